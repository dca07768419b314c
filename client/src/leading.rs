//! Running a component's work only while it holds its Lease: the `--leader-elect*` flags of
//! kube-controller-manager and kube-scheduler (component-base's
//! `LeaderElectionConfiguration`) and client-go's `leaderelection.RunOrDie` with
//! `OnStartedLeading: run` and `OnStoppedLeading: exit`, as both components wire them.
//!
//! ```text
//!   run_while_leading(client, election, clock, shutdown, work)
//!     campaign for Lease <namespace>/<name> ([`crate::LeaderElector`])   log: attempting…
//!        │ acquired                                                      log: acquired…
//!        ▼
//!     work(token) ── runs until it ends, shutdown, or leadership is lost ─┐
//!        │ lost before shutdown: token cancelled, work drained,           │ log: lost
//!        ▼                                                                │
//!     the Lease is released (on shutdown) once the work has stopped ◀─────┘
//! ```
//!
//! A standby (not yet leading) runs nothing of `work`: it only retries the Lease every retry
//! period. Acquiring and giving up the Lease are logged and recorded as Events on the Lease
//! (reason `LeaderElection`, `<identity> became leader` / `<identity> stopped leading`), as
//! client-go's `LeaseLock.RecordEvent` does. Each component decides what losing means; both
//! components exit with `leaderelection lost`, as Kubernetes' do (a restart campaigns afresh).

use std::future::Future;
use std::time::Duration;

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

use crate::SharedClock;
use crate::events::{ApiEventSink, EventRecorder, new_recorder};
use crate::leader_election::{LeaderElectionConfig, LeaderElector, LeaseResourceLock};
use apimachinery::EventType;

/// How long the last leader-election Event may take to be written once the work stopped.
const EVENT_FLUSH: Duration = Duration::from_secs(2);

/// The `--leader-elect-*` settings of one component (component-base's
/// `LeaderElectionConfiguration`, with the Lease's name and this candidate's identity).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElection {
    /// `--leader-elect-lease-duration` (15 s).
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline` (10 s).
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period` (2 s).
    pub retry_period: Duration,
    /// `--leader-elect-resource-namespace` (`kube-system`).
    pub namespace: String,
    /// `--leader-elect-resource-name` (`kube-controller-manager`, `kube-scheduler`).
    pub name: String,
    /// This candidate's identity: `<hostname>_<uuid>`, as both components make it.
    pub identity: String,
}

impl LeaderElection {
    /// Kubernetes' defaults (15 s / 10 s / 2 s) for the Lease `kube-system/<name>`, with a
    /// fresh [`default_identity`].
    pub fn new(name: &str) -> Self {
        LeaderElection {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            namespace: "kube-system".into(),
            name: name.into(),
            identity: default_identity(),
        }
    }

    /// `namespace/name` of the Lease.
    pub fn lease(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// `<hostname>_<uuid>` (`id + "_" + string(uuid.NewUUID())` in both components' `Run`).
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// How [`run_while_leading`] ended.
#[derive(Debug, PartialEq, Eq)]
pub struct Leadership<T> {
    /// What the work returned; `None` if it never started (shutdown while on standby).
    pub output: Option<T>,
    /// Whether leadership was lost before shutdown (the component should exit non-zero).
    pub lost: bool,
}

/// Campaigns for `election`'s Lease and runs `work` once it is acquired, until `work` ends,
/// `shutdown` fires or the Lease is lost; `work`'s token is cancelled in the last two cases
/// and `work` is awaited (drained) before the Lease is released.
pub async fn run_while_leading<T, F, Fut>(
    client: &Client,
    election: &LeaderElection,
    clock: &SharedClock,
    shutdown: &CancellationToken,
    work: F,
) -> Leadership<T>
where
    F: FnOnce(CancellationToken) -> Fut,
    Fut: Future<Output = T>,
{
    let lock = LeaseResourceLock::new(
        Api::<Lease>::namespaced(client.clone(), &election.namespace),
        election.name.clone(),
    );
    let elector = LeaderElector::new(
        LeaderElectionConfig {
            identity: election.identity.clone(),
            lease_duration: election.lease_duration,
            renew_deadline: election.renew_deadline,
            retry_period: election.retry_period,
            release_on_cancel: true,
        },
        lock,
        clock.clone(),
    );
    let mut is_leader = elector.is_leader();
    let election_token = shutdown.child_token();
    let campaign = tokio::spawn(elector.run(election_token.clone()));
    let lease = election.lease();
    tracing::info!(identity = %election.identity, %lease, "attempting to acquire leader lease");
    let leading = tokio::select! {
        () = shutdown.cancelled() => false,
        result = is_leader.wait_for(|leading| *leading) => result.is_ok(),
    };
    let mut outcome = Leadership {
        output: None,
        lost: false,
    };
    let (recorder, broadcaster) = new_recorder(
        Arc::new(ApiEventSink::new(client.clone())),
        &election.name,
        clock.clone(),
    );
    let events = tokio::spawn(broadcaster.run(CancellationToken::new()));
    if leading {
        tracing::info!(identity = %election.identity, %lease, "successfully acquired lease");
        record(&recorder, election, "became leader");
        let token = shutdown.child_token();
        let mut work = std::pin::pin!(work(token.clone()));
        let ended = tokio::select! {
            output = &mut work => Some(output),
            () = shutdown.cancelled() => None,
            _ = is_leader.wait_for(|leading| !*leading) => {
                if !shutdown.is_cancelled() {
                    tracing::error!(identity = %election.identity, %lease, "leaderelection lost");
                    outcome.lost = true;
                }
                None
            }
        };
        outcome.output = Some(match ended {
            Some(output) => output,
            None => {
                token.cancel();
                work.await
            }
        });
    }
    // The work has stopped: now the lease may be released.
    election_token.cancel();
    let _ = campaign.await;
    if leading {
        record(&recorder, election, "stopped leading");
    }
    // The broadcaster ends once it has written what the dropped recorder queued.
    drop(recorder);
    let _ = tokio::time::timeout(EVENT_FLUSH, events).await;
    outcome
}

/// An Event about the Lease: `<identity> <what>` (`LeaseLock.RecordEvent`).
fn record(recorder: &EventRecorder, election: &LeaderElection, what: &str) {
    let lease = ObjectReference {
        api_version: Some("coordination.k8s.io/v1".into()),
        kind: Some("Lease".into()),
        namespace: Some(election.namespace.clone()),
        name: Some(election.name.clone()),
        ..Default::default()
    };
    let message = format!("{} {what}", election.identity);
    recorder.event(&lease, EventType::Normal, "LeaderElection", &message);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_host_underscore_uuid() {
        let id = default_identity();
        let (host, uuid) = id.rsplit_once('_').expect("an underscore");
        assert!(!host.is_empty());
        assert!(uuid::Uuid::parse_str(uuid).is_ok(), "{id}");
        assert_ne!(default_identity(), id, "a fresh uuid each time");
    }

    #[test]
    fn defaults_are_kubernetes() {
        let e = LeaderElection::new("kube-scheduler");
        assert_eq!(e.lease(), "kube-system/kube-scheduler");
        assert_eq!(
            (e.lease_duration, e.renew_deadline, e.retry_period),
            (
                Duration::from_secs(15),
                Duration::from_secs(10),
                Duration::from_secs(2)
            )
        );
    }
}
