//! The API server's identity Lease: kube-apiserver's `APIServerIdentity` (on by default since
//! 1.26). Each API server keeps a Lease in `kube-system` that says it is alive and where its
//! peers reach it, and collects the Leases of API servers that stopped renewing theirs
//! (`pkg/controlplane/apiserver/server.go`: `start-kube-apiserver-identity-lease-controller`,
//! `start-kube-apiserver-identity-lease-garbage-collector`;
//! `staging/src/k8s.io/component-helpers/apimachinery/lease/controller.go`,
//! `pkg/controlplane/apiserver/leasegc` through `apiserverleasegc`).
//!
//! ```text
//!   kube-system/apiserver-<base32(sha256(host:port))[..16 bytes]>      one per API server
//!     labels      apiserver.kubernetes.io/identity=kube-apiserver
//!                 kubernetes.io/hostname=<host>
//!     annotations kubernetes.io/peer-advertise-address=<ip>:<port>   (with an advertise address)
//!     spec        holderIdentity <name>_<uuid of this run>, leaseDurationSeconds 3600,
//!                 acquireTime: when this run took it, renewTime: now, every 10 s
//!   every hour: Leases of that label not renewed within their duration are deleted
//! ```
//!
//! The kubernetes Service's endpoint reconciler ([`crate::kubernetes_service`]) reads the
//! Leases renewed within its TTL as the API servers that are up ([`live`]), as kube-apiserver's
//! lease reconciler reads its master leases.
//!
//! Simplified: kube-apiserver hashes the host name alone, so two API servers of one machine
//! would share a Lease; here the port is hashed with it, so that the API servers `miniplane up
//! --apiservers N` runs on one machine each have their own. The peer address annotation is
//! kube-apiserver's with `UnknownVersionInteroperabilityProxy` on; here it is always written
//! (it is how the endpoint reconciler learns the others' ports). `acquireTime`, which
//! kube-apiserver's identity Leases leave empty, says since when this run of the API server
//! holds it, to the microsecond: the endpoint reconciler's "up longest".

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::error::{ApiError, Result};
use crate::gvk::GroupVersion;
use crate::registry::ResourceInfo;
use crate::rest::{self, WriteContext};
use crate::state::AppState;
use crate::storage::{ObjectRef, Update};

/// `IdentityLeaseComponentLabelKey`.
pub const IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";
/// The identity label's value for kube-apiserver.
pub const IDENTITY: &str = "kube-apiserver";
/// `corev1.LabelHostname`.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// `corev1.AnnotationPeerAdvertiseAddress`: `ip:port` where peers reach this API server.
pub const PEER_ADDRESS_ANNOTATION: &str = "kubernetes.io/peer-advertise-address";
/// Where the Leases live.
pub const NAMESPACE: &str = "kube-system";
/// `IdentityLeaseDurationSeconds`.
pub const LEASE_DURATION_SECONDS: i64 = 3600;
/// `IdentityLeaseRenewIntervalPeriod`.
pub const RENEW_INTERVAL: Duration = Duration::from_secs(10);
/// `IdentityLeaseGCPeriod`.
pub const GC_PERIOD: Duration = Duration::from_secs(3600);

/// Who this API server is in its Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The Lease's name, `apiserver-<hash>`.
    pub name: String,
    /// `spec.holderIdentity`: the name and a UUID of this run.
    pub holder: String,
    /// The `kubernetes.io/hostname` label.
    pub hostname: String,
    /// The `kubernetes.io/peer-advertise-address` annotation, if there is an advertise address.
    pub peer_address: Option<SocketAddr>,
}

impl Identity {
    /// The identity of an API server on this host serving on `port`, reachable by its peers at
    /// `peer_address`.
    pub fn new(port: u16, peer_address: Option<SocketAddr>) -> Identity {
        let hostname = hostname::get()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "localhost".to_string());
        Identity::for_host(&hostname, port, peer_address)
    }

    /// [`Identity::new`] for a given host name.
    pub fn for_host(hostname: &str, port: u16, peer_address: Option<SocketAddr>) -> Identity {
        let hostname = hostname.to_lowercase();
        let digest = ring::digest::digest(
            &ring::digest::SHA256,
            format!("{hostname}:{port}").as_bytes(),
        );
        let hash = data_encoding::BASE32_NOPAD
            .encode(&digest.as_ref()[..16])
            .to_lowercase();
        let name = format!("apiserver-{hash}");
        Identity {
            holder: format!("{name}_{}", uuid::Uuid::new_v4()),
            name,
            hostname,
            peer_address,
        }
    }
}

/// An API server whose Lease is fresh, as [`live`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Its Lease's name.
    pub name: String,
    /// Its `kubernetes.io/peer-advertise-address`, if it has one.
    pub address: Option<SocketAddr>,
    /// Since when this run of it holds its Lease (`spec.acquireTime`, else the Lease's
    /// creation): the API server up longest has the oldest.
    pub since: jiff::Timestamp,
}

/// Renews `identity`'s Lease every `interval` and collects expired identity Leases every
/// [`GC_PERIOD`], until the server shuts down.
pub async fn run(state: AppState, identity: Identity, interval: Duration) {
    let mut last_gc: Option<tokio::time::Instant> = None;
    loop {
        if let Err(e) = renew(&state, &identity).await {
            tracing::warn!(
                error = %e,
                lease = %identity.name,
                "could not renew the API server's identity lease"
            );
        }
        if last_gc.is_none_or(|at| at.elapsed() >= GC_PERIOD) {
            last_gc = Some(tokio::time::Instant::now());
            if let Err(e) = collect_garbage(&state).await {
                tracing::warn!(error = %e, "could not collect expired API server identity leases");
            }
        }
        tokio::select! {
            () = state.shutdown().cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}

/// Creates the Lease or moves its `renewTime` to now (taking it over with this run's holder
/// identity), with the labels and annotation in place.
pub async fn renew(state: &AppState, identity: &Identity) -> Result<()> {
    let info = leases(state)?;
    let (r, wctx) = target(&info, state, &identity.name);
    let now = micro_time(state.now());
    state
        .storage()
        .guaranteed_update(&r, false, |current| {
            let mut lease = match current {
                Some(current) => current.clone(),
                None => json!({
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": identity.name, "namespace": NAMESPACE},
                    "spec": {},
                }),
            };
            lease["metadata"]["labels"][IDENTITY_LABEL] = json!(IDENTITY);
            lease["metadata"]["labels"][HOSTNAME_LABEL] = json!(identity.hostname);
            if let Some(address) = identity.peer_address {
                lease["metadata"]["annotations"][PEER_ADDRESS_ANNOTATION] =
                    json!(address.to_string());
            }
            if lease["spec"]["holderIdentity"] != identity.holder.as_str()
                || lease["spec"]["acquireTime"].is_null()
            {
                lease["spec"]["acquireTime"] = json!(now);
            }
            lease["spec"]["holderIdentity"] = json!(identity.holder);
            lease["spec"]["leaseDurationSeconds"] = json!(LEASE_DURATION_SECONDS);
            lease["spec"]["renewTime"] = json!(now);
            match current {
                None => {
                    rest::default(&info, &mut lease)?;
                    rest::before_create(&info, Some(NAMESPACE), &mut lease, &wctx)?;
                    Ok(Update::Put(lease))
                }
                Some(current) => rest::before_update(&r, current, lease, &wctx).map(Update::Put),
            }
        })
        .await?;
    Ok(())
}

/// The API servers whose identity Leases were renewed within `ttl` of now.
pub async fn live(state: &AppState, ttl: Duration) -> Result<Vec<Peer>> {
    let now = state.now();
    let ttl = jiff::SignedDuration::try_from(ttl).unwrap_or(jiff::SignedDuration::MAX);
    Ok(identity_leases(state)
        .await?
        .iter()
        .filter(|lease| renewed(lease).is_some_and(|at| now.duration_since(at) <= ttl))
        .map(|lease| Peer {
            name: lease["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            address: lease["metadata"]["annotations"][PEER_ADDRESS_ANNOTATION]
                .as_str()
                .and_then(|a| a.parse().ok()),
            since: lease["spec"]["acquireTime"]
                .as_str()
                .or(lease["metadata"]["creationTimestamp"].as_str())
                .and_then(|t| t.parse().ok())
                .unwrap_or(now),
        })
        .collect())
}

/// Deletes the identity Leases not renewed within their `leaseDurationSeconds`
/// (`apiserverleasegc`); returns how many.
pub async fn collect_garbage(state: &AppState) -> Result<usize> {
    let info = leases(state)?;
    let now = state.now();
    let expired = |lease: &Value| {
        let duration = lease["spec"]["leaseDurationSeconds"]
            .as_i64()
            .unwrap_or(LEASE_DURATION_SECONDS);
        renewed(lease)
            .is_none_or(|at| now.duration_since(at) > jiff::SignedDuration::from_secs(duration))
    };
    let mut deleted = 0;
    for lease in identity_leases(state).await? {
        if !expired(&lease) {
            continue;
        }
        let name = lease["metadata"]["name"].as_str().unwrap_or_default();
        let (r, _) = target(&info, state, name);
        // Checked again on the current object: its API server may have come back.
        let done = state
            .storage()
            .guaranteed_update(&r, false, |current| match current {
                Some(current) if expired(current) => Ok(Update::Delete(current.clone())),
                Some(current) => Ok(Update::Keep(current.clone())),
                None => Err(r.not_found()),
            })
            .await;
        match done {
            Ok(updated) if updated.deleted => {
                tracing::info!(lease = name, "deleted an expired API server identity lease");
                deleted += 1;
            }
            Ok(_) | Err(ApiError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(deleted)
}

/// Every Lease in `kube-system` with the identity label of kube-apiserver.
async fn identity_leases(state: &AppState) -> Result<Vec<Value>> {
    let info = leases(state)?;
    let prefix = crate::storage::prefix(&info, Some(NAMESPACE));
    let keep = |lease: &Value| lease["metadata"]["labels"][IDENTITY_LABEL] == IDENTITY;
    Ok(state
        .storage()
        .list(&prefix, None, None, 0, &keep)
        .await?
        .items)
}

/// A Lease's `spec.renewTime`.
fn renewed(lease: &Value) -> Option<jiff::Timestamp> {
    lease["spec"]["renewTime"].as_str()?.parse().ok()
}

/// `metav1.MicroTime`'s form: RFC 3339 in UTC with six fractional digits.
fn micro_time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

fn leases(state: &AppState) -> Result<Arc<ResourceInfo>> {
    state
        .registry()
        .lookup(&GroupVersion::new("coordination.k8s.io", "v1"), "leases")
        .ok_or_else(|| ApiError::Internal("leases are not registered".into()))
}

/// `kube-system/<name>` of the Leases, and how kube-apiserver writes it.
fn target(info: &Arc<ResourceInfo>, state: &AppState, name: &str) -> (ObjectRef, WriteContext) {
    let r = ObjectRef {
        info: info.clone(),
        namespace: Some(NAMESPACE.into()),
        name: name.into(),
    };
    let wctx = WriteContext::server_own("kube-apiserver", state.now(), state.ids().clone());
    (r, wctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kube_apiservers_form_and_differ_by_port() {
        let a = Identity::for_host("Control-Plane", 6443, None);
        let b = Identity::for_host("control-plane", 6444, None);
        assert!(a.name.starts_with("apiserver-"), "{}", a.name);
        // 16 bytes in unpadded base32: 26 characters of [a-z2-7].
        let hash = &a.name["apiserver-".len()..];
        assert_eq!(hash.len(), 26);
        assert!(
            hash.chars()
                .all(|c| c.is_ascii_lowercase() || ('2'..='7').contains(&c))
        );
        assert_ne!(a.name, b.name);
        assert_eq!(a.name, Identity::for_host("control-plane", 6443, None).name);
        assert_eq!(a.hostname, "control-plane");
        assert!(a.holder.starts_with(&format!("{}_", a.name)));
        assert_ne!(
            a.holder,
            Identity::for_host("control-plane", 6443, None).holder
        );
    }

    #[test]
    fn micro_time_has_six_fractional_digits() {
        let t: jiff::Timestamp = "2026-01-02T03:04:05.123456789Z".parse().unwrap();
        assert_eq!(micro_time(t), "2026-01-02T03:04:05.123456Z");
    }
}
