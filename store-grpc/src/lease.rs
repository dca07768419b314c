//! The Lease service: grant, revoke, keep-alive, time-to-live, list (etcd's `v3rpc/lease.go`
//! over `server/lease/lessor.go`).
//!
//! Simplified: leases live in this endpoint's memory (the store does not know them, and they
//! are lost on restart); an expired lease is revoked by a task that looks every half second,
//! deleting the keys attached to it through this endpoint. A key stays attached when the API
//! server overwrites it (etcd would detach it).

use crate::Shared;
use crate::errors::{LEASE_EXIST, LEASE_NOT_FOUND, LEASE_TTL_TOO_LARGE, status};
use crate::observe::outcome;
use crate::proto::etcdserverpb::{self as pb, lease_server::Lease};
use bytes::Bytes;
use std::collections::{BTreeSet, HashMap};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};

/// etcd's `MaxLeaseTTL`: the longest lease a client may ask for, in seconds.
pub(crate) const MAX_LEASE_TTL: i64 = 9_000_000_000;
/// How often expired leases are looked for.
const EXPIRY_TICK: Duration = Duration::from_millis(500);

/// One lease.
#[derive(Debug)]
struct Entry {
    /// The granted time to live, in seconds.
    ttl: i64,
    /// When it expires unless kept alive.
    deadline: Instant,
    /// The keys attached to it.
    keys: BTreeSet<Bytes>,
}

/// The lease table.
#[derive(Debug, Default)]
struct Table {
    leases: HashMap<i64, Entry>,
    /// Which lease each attached key is on.
    key_lease: HashMap<Bytes, i64>,
    /// The last id handed out by the server.
    last_id: i64,
}

/// The endpoint's leases.
#[derive(Debug, Default)]
pub(crate) struct Leases {
    table: Mutex<Table>,
    /// How many keys are attached to a lease (`key_lease`'s length, written under the lock):
    /// while none are, a write or an event asks nothing of the table, so puts and watches do
    /// not take its lock.
    attached: AtomicUsize,
}

impl Leases {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Grants a lease (`id` 0: the server picks one).
    pub(crate) fn grant(&self, id: i64, ttl: i64) -> Result<(i64, i64), Status> {
        if ttl > MAX_LEASE_TTL {
            return Err(Status::out_of_range(LEASE_TTL_TOO_LARGE));
        }
        let ttl = ttl.max(1);
        let mut t = self.lock();
        let id = if id == 0 {
            // Ids of their own kind, as etcd's are (large, positive), and unused.
            let mut next = t.last_id.max(0x6d70_0000_0000_0000);
            loop {
                next += 1;
                if !t.leases.contains_key(&next) {
                    break next;
                }
            }
        } else if t.leases.contains_key(&id) {
            return Err(Status::failed_precondition(LEASE_EXIST));
        } else {
            id
        };
        t.last_id = t.last_id.max(id);
        t.leases.insert(
            id,
            Entry {
                ttl,
                deadline: Instant::now() + Duration::from_secs(ttl as u64),
                keys: BTreeSet::new(),
            },
        );
        Ok((id, ttl))
    }

    /// Whether the lease exists.
    pub(crate) fn exists(&self, id: i64) -> bool {
        self.lock().leases.contains_key(&id)
    }

    /// Whether any key is attached to a lease.
    pub(crate) fn any_attached(&self) -> bool {
        self.attached.load(Ordering::Acquire) != 0
    }

    /// The lease `key` is attached to, 0 for none.
    pub(crate) fn lease_of(&self, key: &[u8]) -> i64 {
        if !self.any_attached() {
            return 0;
        }
        let t = self.lock();
        t.key_lease.get(key).copied().unwrap_or(0)
    }

    /// Attaches `key` to `lease` (0: detaches it).
    pub(crate) fn attach(&self, key: &Bytes, lease: i64) {
        if lease == 0 && !self.any_attached() {
            return;
        }
        let mut t = self.lock();
        if let Some(old) = t.key_lease.remove(key)
            && let Some(e) = t.leases.get_mut(&old)
        {
            e.keys.remove(key);
        }
        if lease != 0
            && let Some(e) = t.leases.get_mut(&lease)
        {
            e.keys.insert(key.clone());
            t.key_lease.insert(key.clone(), lease);
        }
        self.attached.store(t.key_lease.len(), Ordering::Release);
    }

    /// Removes a lease; its keys, if it existed.
    fn remove(&self, id: i64) -> Option<BTreeSet<Bytes>> {
        let mut t = self.lock();
        let e = t.leases.remove(&id)?;
        for k in &e.keys {
            t.key_lease.remove(k);
        }
        self.attached.store(t.key_lease.len(), Ordering::Release);
        Some(e.keys)
    }

    /// Renews a lease; its TTL, or `None` if it does not exist.
    fn keep_alive(&self, id: i64) -> Option<i64> {
        let mut t = self.lock();
        let e = t.leases.get_mut(&id)?;
        e.deadline = Instant::now() + Duration::from_secs(e.ttl as u64);
        Some(e.ttl)
    }

    /// Seconds left, granted TTL and keys of a lease.
    fn time_to_live(&self, id: i64) -> Option<(i64, i64, Vec<Bytes>)> {
        let t = self.lock();
        let e = t.leases.get(&id)?;
        let left = e.deadline.saturating_duration_since(Instant::now());
        Some((
            left.as_secs() as i64,
            e.ttl,
            e.keys.iter().cloned().collect(),
        ))
    }

    /// Every lease id, in order.
    fn ids(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self.lock().leases.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// The leases past their deadline.
    fn expired(&self, now: Instant) -> Vec<i64> {
        let t = self.lock();
        t.leases
            .iter()
            .filter(|(_, e)| e.deadline <= now)
            .map(|(id, _)| *id)
            .collect()
    }
}

/// Revokes a lease: removes it and deletes its keys. `false` if it did not exist.
async fn revoke(shared: &Shared, id: i64) -> Result<bool, Status> {
    let Some(keys) = shared.leases.remove(id) else {
        return Ok(false);
    };
    for key in keys {
        shared.backend.delete(key).await.map_err(status)?;
    }
    Ok(true)
}

/// Revokes expired leases until shutdown.
pub(crate) async fn expire_loop(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(EXPIRY_TICK);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shared.shutdown.cancelled() => return,
        }
        for id in shared.leases.expired(Instant::now()) {
            if let Err(e) = revoke(&shared, id).await {
                tracing::warn!(lease = id, error = %e.message(), "revoking an expired lease failed");
            }
        }
    }
}

/// The Lease service over the shared state.
pub(crate) struct LeaseService(pub(crate) Arc<Shared>);

/// The stream of keep-alive answers.
type KeepAliveStream =
    Pin<Box<dyn Stream<Item = Result<pb::LeaseKeepAliveResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Lease for LeaseService {
    async fn lease_grant(
        &self,
        req: Request<pb::LeaseGrantRequest>,
    ) -> Result<Response<pb::LeaseGrantResponse>, Status> {
        let began = self.0.observe.began();
        let shared = &self.0;
        let r = req.get_ref();
        let result = shared.check_writable("lease grant").and_then(|()| {
            let (id, ttl) = shared.leases.grant(r.id, r.ttl)?;
            Ok(pb::LeaseGrantResponse {
                header: shared.header(),
                id,
                ttl,
                error: String::new(),
            })
        });
        shared.observe.report(&began, "LeaseGrant", &[], &[], || {
            let revision = shared.backend.current_revision().0 as i64;
            let served = outcome(&result, |a| format!("lease {:x}, TTL {}s", a.id, a.ttl));
            (revision, served)
        });
        result.map(Response::new)
    }

    async fn lease_revoke(
        &self,
        req: Request<pb::LeaseRevokeRequest>,
    ) -> Result<Response<pb::LeaseRevokeResponse>, Status> {
        let began = self.0.observe.began();
        let shared = &self.0;
        let id = req.get_ref().id;
        let result = match revoke(shared, id).await {
            Ok(true) => Ok(pb::LeaseRevokeResponse {
                header: shared.header(),
            }),
            Ok(false) => Err(Status::not_found(LEASE_NOT_FOUND)),
            Err(e) => Err(e),
        };
        shared.observe.report(&began, "LeaseRevoke", &[], &[], || {
            let revision = shared.backend.current_revision().0 as i64;
            (revision, outcome(&result, |_| format!("lease {id:x}")))
        });
        result.map(Response::new)
    }

    type LeaseKeepAliveStream = KeepAliveStream;

    async fn lease_keep_alive(
        &self,
        req: Request<Streaming<pb::LeaseKeepAliveRequest>>,
    ) -> Result<Response<Self::LeaseKeepAliveStream>, Status> {
        let shared = self.0.clone();
        let inbound = req.into_inner();
        let stream =
            futures::stream::unfold((shared, inbound), |(shared, mut inbound)| async move {
                let next = tokio::select! {
                    m = inbound.message() => m,
                    () = shared.shutdown.cancelled() => return None,
                };
                let r = match next {
                    Ok(Some(r)) => r,
                    Ok(None) => return None,
                    Err(e) => return Some((Err(e), (shared, inbound))),
                };
                // An unknown lease is answered with TTL 0, as etcd does.
                let ttl = shared.leases.keep_alive(r.id).unwrap_or(0);
                let resp = pb::LeaseKeepAliveResponse {
                    header: shared.header(),
                    id: r.id,
                    ttl,
                };
                Some((Ok(resp), (shared, inbound)))
            });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn lease_time_to_live(
        &self,
        req: Request<pb::LeaseTimeToLiveRequest>,
    ) -> Result<Response<pb::LeaseTimeToLiveResponse>, Status> {
        let shared = &self.0;
        let r = req.get_ref();
        // An unknown lease is answered with TTL -1, as etcd does.
        let (ttl, granted_ttl, keys) =
            shared
                .leases
                .time_to_live(r.id)
                .unwrap_or((-1, 0, Vec::new()));
        Ok(Response::new(pb::LeaseTimeToLiveResponse {
            header: shared.header(),
            id: r.id,
            ttl,
            granted_ttl,
            keys: if r.keys {
                keys.into_iter().map(|k| k.to_vec()).collect()
            } else {
                Vec::new()
            },
        }))
    }

    async fn lease_leases(
        &self,
        _req: Request<pb::LeaseLeasesRequest>,
    ) -> Result<Response<pb::LeaseLeasesResponse>, Status> {
        let shared = &self.0;
        Ok(Response::new(pb::LeaseLeasesResponse {
            header: shared.header(),
            leases: shared
                .leases
                .ids()
                .into_iter()
                .map(|id| pb::LeaseStatus { id })
                .collect(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_attach_and_remove() {
        let leases = Leases::default();
        let (id, ttl) = leases.grant(0, 60).unwrap();
        assert!(id > 0);
        assert_eq!(ttl, 60);
        assert_eq!(leases.grant(id, 5).unwrap_err().message(), LEASE_EXIST);
        assert_eq!(
            leases.grant(0, MAX_LEASE_TTL + 1).unwrap_err().code(),
            tonic::Code::OutOfRange
        );
        let key = Bytes::from_static(b"/k");
        leases.attach(&key, id);
        assert_eq!(leases.lease_of(b"/k"), id);
        let (left, granted, keys) = leases.time_to_live(id).unwrap();
        assert!(left <= 60 && granted == 60);
        assert_eq!(keys, std::slice::from_ref(&key));
        assert_eq!(leases.remove(id).unwrap().len(), 1);
        assert_eq!(leases.lease_of(b"/k"), 0);
        assert!(leases.keep_alive(id).is_none());
        assert!(leases.ids().is_empty());
    }
}
