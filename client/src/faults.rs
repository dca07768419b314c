//! Learning the faults in force: a watch of the ConfigMap `kube-system/miniplane-faults`
//! (see the `admin` crate and `docs/faults.md`), published on a `tokio::sync::watch` channel
//! that each component reacts to (the controller-manager pauses queues, the kubelet stops a
//! node's heartbeats, `miniplane up` stops a component).
//!
//! No client-go counterpart; it is an ordinary single-object informer (kube-runtime's
//! `watcher` with a `metadata.name` field selector), so it relists on 410 and retries with
//! backoff like any other.
//!
//! ```text
//!   watcher(ConfigMap, fieldSelector=metadata.name=miniplane-faults)
//!     Apply/InitApply(cm) ─▶ faults_from_data(cm.data) ─▶ tx.send_if_modified
//!     Delete(cm) / InitDone without it ─▶ []
//! ```

use admin::{FAULTS_CONFIGMAP, FAULTS_NAMESPACE, Fault, faults_from_data};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// A channel of the faults in force, and the task that keeps it current. The channel is
/// marked changed once the first list is complete (even if it found no fault), so a component
/// can wait for it before it starts work.
pub fn fault_watch(client: kube::Client) -> (watch::Receiver<Vec<Fault>>, FaultWatcher) {
    let (tx, rx) = watch::channel(Vec::new());
    (rx, FaultWatcher { client, tx })
}

/// Keeps a fault channel current; see [`fault_watch`].
pub struct FaultWatcher {
    client: kube::Client,
    tx: watch::Sender<Vec<Fault>>,
}

fn faults_of(cm: &ConfigMap) -> Vec<Fault> {
    let data = cm.data.clone().unwrap_or_default();
    let (faults, errors) = faults_from_data(&data);
    for e in errors {
        tracing::warn!(error = %e, "ignoring an invalid fault");
    }
    faults
}

impl FaultWatcher {
    /// Watches until `shutdown` fires.
    pub async fn run(self, shutdown: CancellationToken) {
        let api: Api<ConfigMap> = Api::namespaced(self.client, FAULTS_NAMESPACE);
        let config =
            watcher::Config::default().fields(&format!("metadata.name={FAULTS_CONFIGMAP}"));
        let stream = watcher(api, config).default_backoff();
        futures::pin_mut!(stream);
        // The faults listed since the last `Init`, published at `InitDone` (always, even
        // unchanged, so a consumer can wait for the first complete look).
        let mut listed: Vec<Fault> = Vec::new();
        let publish = |faults: Vec<Fault>| {
            self.tx.send_if_modified(|current| {
                if *current == faults {
                    false
                } else {
                    *current = faults;
                    true
                }
            });
        };
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => return,
                event = stream.next() => event,
            };
            match event {
                None => return,
                Some(Err(e)) => tracing::debug!(error = %e, "fault watch error (retrying)"),
                Some(Ok(watcher::Event::Init)) => listed.clear(),
                Some(Ok(watcher::Event::InitApply(cm))) => listed = faults_of(&cm),
                Some(Ok(watcher::Event::InitDone)) => {
                    self.tx.send_replace(std::mem::take(&mut listed));
                }
                Some(Ok(watcher::Event::Apply(cm))) => publish(faults_of(&cm)),
                Some(Ok(watcher::Event::Delete(_))) => publish(Vec::new()),
            }
        }
    }
}
