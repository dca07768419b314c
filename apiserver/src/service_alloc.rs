//! The cluster IPs and node ports of Services: kube-apiserver's allocators
//! (`pkg/registry/core/service/storage/alloc.go`, `ipallocator`, `portallocator`), so two
//! Services never share an address or a node port and a taken or out-of-range one gets
//! Kubernetes' answer.
//!
//! ```text
//!   create / update of a Service (rest::before_create, rest::before_update, after validation)
//!     ├─ cluster IP asked for ──▶ in 10.96.0.0/12? free? ──▶ held (pending), else 422
//!     ├─ cluster IP picked (the strategy's hash) ──▶ taken? the next free one, else 500 "range is full"
//!     └─ node ports: the same, in 30000-32767, per port
//!   the store's Services (listed at start, then watched) ──▶ who holds what, for good
//!     a Service written ─▶ its holds are exactly its IP and ports; deleted ─▶ released
//! ```
//!
//! Who holds what is learnt from the stored Services themselves (listed at start, then
//! watched), as kube-apiserver's repair loops rebuild their bitmaps from them: a Service that
//! goes by any path (a DELETE, its namespace, the garbage collector, its last finalizer)
//! releases its addresses without a hook there. Between a request's check and its write
//! becoming visible, what it took is held as *pending* for [`PENDING`]: a dry run or a write
//! that failed after the check gives it back then.
//!
//! Simplifications: the ranges are fixed (`--service-cluster-ip-range` 10.96.0.0/12,
//! `--service-node-port-range` 30000-32767), IPv4 only; Kubernetes 1.33 also records each
//! cluster IP as a `networking.k8s.io/v1` IPAddress object under a ServiceCIDR, which are not
//! served here; free addresses are found from the strategy's hash upwards rather than at random.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use store::{RangeRequest, Revision};

use crate::error::{ApiError, Result};
use crate::state::AppState;
use crate::strategy::FieldError;
use crate::strategy::field::{FieldPath, Rendered};

/// The service cluster IP range (kube-apiserver's `--service-cluster-ip-range` as kubeadm
/// and kind set it).
pub const SERVICE_CIDR: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 96, 0, 0), 12);

/// The node port range (`--service-node-port-range`'s default).
pub const NODE_PORTS: (i32, i32) = (30000, 32767);

/// How long a check's holding lasts without the write showing up in the store.
pub const PENDING: Duration = Duration::from_secs(30);

/// Where Services are stored.
const PREFIX: &str = "/registry/services/specs/";

/// One holding: the Service (`namespace/name`) and, until its write is seen, a deadline.
#[derive(Debug, Clone)]
struct Hold {
    owner: String,
    pending_until: Option<Instant>,
}

#[derive(Debug, Default)]
struct Holds {
    ips: HashMap<Ipv4Addr, Hold>,
    ports: HashMap<i32, Hold>,
}

/// What a request asked for itself (as opposed to what defaulting picked): the body as sent.
#[derive(Debug, Clone, Default)]
pub struct Requested {
    cluster_ip: bool,
    node_ports: Vec<bool>,
}

impl Requested {
    /// Reads a Service as the client sent it, before defaulting.
    pub fn of(obj: &Value) -> Self {
        let spec = &obj["spec"];
        let ip = |v: &Value| v.as_str().is_some_and(|s| !s.is_empty());
        Requested {
            cluster_ip: ip(&spec["clusterIP"]) || ip(&spec["clusterIPs"][0]),
            node_ports: spec["ports"]
                .as_array()
                .map(|ports| {
                    ports
                        .iter()
                        .map(|p| p["nodePort"].as_i64().is_some_and(|n| n != 0))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// The allocators of one API server.
#[derive(Debug, Default)]
pub struct ServiceAllocations {
    holds: Mutex<Holds>,
}

/// The cluster IP and node ports a stored or prepared Service uses.
fn used(obj: &Value) -> (Option<Ipv4Addr>, Vec<i32>) {
    let spec = &obj["spec"];
    let ip = spec["clusterIP"]
        .as_str()
        .and_then(|s| s.parse::<Ipv4Addr>().ok());
    let ports = spec["ports"]
        .as_array()
        .map(|ports| {
            ports
                .iter()
                .filter_map(|p| p["nodePort"].as_i64())
                .filter_map(|n| i32::try_from(n).ok())
                .filter(|n| *n != 0)
                .collect()
        })
        .unwrap_or_default();
    (ip, ports)
}

fn in_cidr(ip: Ipv4Addr) -> bool {
    let (base, bits) = SERVICE_CIDR;
    let mask = u32::MAX << (32 - u32::from(bits));
    u32::from(ip) & mask == u32::from(base)
}

/// The usable addresses of the range: without the network and broadcast addresses.
fn first_and_last() -> (u32, u32) {
    let (base, bits) = SERVICE_CIDR;
    let base = u32::from(base);
    (base + 1, base + (1u32 << (32 - u32::from(bits))) - 2)
}

fn cidr_text() -> String {
    format!("{}/{}", SERVICE_CIDR.0, SERVICE_CIDR.1)
}

impl ServiceAllocations {
    fn lock(&self) -> std::sync::MutexGuard<'_, Holds> {
        self.holds.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks the cluster IP and node ports of `obj` (the Service `namespace/name` as it is
    /// about to be written, validated) and holds them for it. A value the client asked for
    /// that another Service holds, or outside the range, is a 422 as Kubernetes words it; a
    /// value the strategy picked that is taken is replaced by the next free one (500 when
    /// the range is full).
    pub fn reserve(
        &self,
        owner: &str,
        name: &str,
        requested: &Requested,
        obj: &mut Value,
    ) -> Result<()> {
        let now = Instant::now();
        let mut holds = self.lock();
        let expired = |h: &Hold| h.pending_until.is_some_and(|t| t <= now);
        holds.ips.retain(|_, h| !expired(h));
        holds.ports.retain(|_, h| !expired(h));
        let taken_by_other = |h: Option<&Hold>| h.is_some_and(|h| h.owner != owner && !expired(h));
        let pending = Hold {
            owner: owner.to_owned(),
            pending_until: Some(now + PENDING),
        };
        let invalid = |errors: Vec<FieldError>| ApiError::Invalid {
            target: crate::error::ErrorTarget {
                group: String::new(),
                resource: "services".into(),
                kind: "Service".into(),
                name: name.to_owned(),
            },
            errors,
        };
        let spec = &obj["spec"];
        let external_name = spec["type"].as_str() == Some("ExternalName");
        let ip_text = spec["clusterIP"].as_str().unwrap_or("").to_owned();
        if !external_name && !ip_text.is_empty() && ip_text != "None" {
            let mut ip: Ipv4Addr = ip_text.parse().map_err(|_| {
                ApiError::Internal(format!("failed to parse service IP {ip_text:?}"))
            })?;
            if requested.cluster_ip {
                let rendered = Rendered(format!("[]string{{{ip_text:?}}}"));
                let refuse = |why: String| {
                    invalid(vec![FieldError::invalid(
                        &FieldPath::new("spec").child("clusterIPs"),
                        rendered.clone(),
                        &format!("failed to allocate IP {ip_text}: {why}"),
                    )])
                };
                let (first, last) = first_and_last();
                if !in_cidr(ip) {
                    return Err(refuse(
                        "the provided network does not match the current range".into(),
                    ));
                }
                if !(first..=last).contains(&u32::from(ip)) {
                    return Err(refuse(format!(
                        "the provided IP ({ip}) is not in the valid range. The range of valid IPs is {}",
                        cidr_text()
                    )));
                }
                if taken_by_other(holds.ips.get(&ip)) {
                    return Err(refuse("provided IP is already allocated".into()));
                }
            } else if taken_by_other(holds.ips.get(&ip)) {
                ip = next_free_ip(&holds, ip).ok_or_else(|| {
                    ApiError::Exhausted("failed to allocate a serviceIP: range is full".into())
                })?;
                set_cluster_ip(obj, ip);
            }
            if holds.ips.get(&ip).is_none_or(|h| h.owner != owner) {
                holds.ips.insert(ip, pending.clone());
            }
        }
        let ports = obj["spec"]["ports"]
            .as_array_mut()
            .map(|p| p.iter_mut().collect::<Vec<_>>())
            .unwrap_or_default();
        let mut mine: Vec<i32> = Vec::new();
        for (i, port) in ports.into_iter().enumerate() {
            let Some(mut n) = port["nodePort"]
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .filter(|n| *n != 0)
            else {
                continue;
            };
            let path = FieldPath::new("spec")
                .child("ports")
                .index(i)
                .child("nodePort");
            if requested.node_ports.get(i).copied().unwrap_or(false) {
                if !(NODE_PORTS.0..=NODE_PORTS.1).contains(&n) {
                    return Err(invalid(vec![FieldError::invalid(
                        &path,
                        n,
                        &format!(
                            "provided port is not in the valid range. The range of valid ports is {}-{}",
                            NODE_PORTS.0, NODE_PORTS.1
                        ),
                    )]));
                }
                if taken_by_other(holds.ports.get(&n)) {
                    return Err(invalid(vec![FieldError::invalid(
                        &path,
                        n,
                        "provided port is already allocated",
                    )]));
                }
            } else if taken_by_other(holds.ports.get(&n)) || mine.contains(&n) {
                n = next_free_port(&holds, n, &mine).ok_or_else(|| {
                    ApiError::Exhausted("failed to allocate a nodePort: range is full".into())
                })?;
                port["nodePort"] = Value::from(n);
            }
            mine.push(n);
            if holds.ports.get(&n).is_none_or(|h| h.owner != owner) {
                holds.ports.insert(n, pending.clone());
            }
        }
        Ok(())
    }

    /// The Service `owner` was stored as `obj`: it holds exactly what `obj` uses, for good.
    pub fn observe_put(&self, owner: &str, obj: &Value) {
        let (ip, ports) = used(obj);
        let mut holds = self.lock();
        holds.ips.retain(|_, h| h.owner != owner);
        holds.ports.retain(|_, h| h.owner != owner);
        let held = Hold {
            owner: owner.to_owned(),
            pending_until: None,
        };
        if let Some(ip) = ip {
            holds.ips.insert(ip, held.clone());
        }
        for n in ports {
            holds.ports.insert(n, held.clone());
        }
    }

    /// The Service `owner` is gone: everything it held is free.
    pub fn observe_delete(&self, owner: &str) {
        let mut holds = self.lock();
        holds.ips.retain(|_, h| h.owner != owner);
        holds.ports.retain(|_, h| h.owner != owner);
    }

    /// How many cluster IPs and node ports are held (pending included).
    pub fn counts(&self) -> (usize, usize) {
        let holds = self.lock();
        (holds.ips.len(), holds.ports.len())
    }
}

fn set_cluster_ip(obj: &mut Value, ip: Ipv4Addr) {
    let text = Value::from(ip.to_string());
    obj["spec"]["clusterIP"] = text.clone();
    obj["spec"]["clusterIPs"] = Value::Array(vec![text]);
}

/// The first address after `from` (wrapping around the range) that nobody holds.
fn next_free_ip(holds: &Holds, from: Ipv4Addr) -> Option<Ipv4Addr> {
    let (first, last) = first_and_last();
    let size = last - first + 1;
    let start = u32::from(from).clamp(first, last) - first;
    (1..=size)
        .map(|step| Ipv4Addr::from(first + (start + step) % size))
        .find(|ip| !holds.ips.contains_key(ip) && !reserved_ip(*ip))
}

/// Addresses the strategy never hands out: `.1` (the `kubernetes` Service) and `.10`
/// (kube-dns by convention).
fn reserved_ip(ip: Ipv4Addr) -> bool {
    let offset = u32::from(ip) - u32::from(SERVICE_CIDR.0);
    matches!(offset, 1 | 10)
}

/// The first node port after `from` (wrapping around the range) that nobody holds and the
/// Service does not use yet.
fn next_free_port(holds: &Holds, from: i32, mine: &[i32]) -> Option<i32> {
    let (first, last) = NODE_PORTS;
    let size = last - first + 1;
    let start = from.clamp(first, last) - first;
    (1..=size)
        .map(|step| first + (start + step) % size)
        .find(|n| !holds.ports.contains_key(n) && !mine.contains(n))
}

/// `namespace/name` of a Service's store key.
fn owner_of(key: &[u8]) -> Option<String> {
    std::str::from_utf8(key)
        .ok()?
        .strip_prefix(PREFIX)
        .map(str::to_owned)
}

/// Lists the stored Services into `state`'s allocations, then follows the store's changes to
/// them until the server shuts down (relisting if the watch is cut off). Returns once the
/// first list is in, so no request is checked against an empty picture.
pub async fn start(state: &AppState) -> Result<()> {
    let revision = load(state).await?;
    let state = state.clone();
    state.tasks().spawn({
        let state = state.clone();
        async move { follow(state, revision).await }
    });
    Ok(())
}

async fn load(state: &AppState) -> Result<Revision> {
    let backend = state.storage().backend();
    let resp = backend.range(RangeRequest::prefix(PREFIX)).await?;
    let allocations = state.service_allocations();
    for kv in &resp.kvs {
        if let (Some(owner), Ok(obj)) = (
            owner_of(&kv.key),
            serde_json::from_slice::<Value>(&kv.value),
        ) {
            allocations.observe_put(&owner, &obj);
        }
    }
    Ok(resp.revision)
}

/// What follows the stored Services for the allocations.
struct ServiceFollower(AppState);

impl crate::prefix_follower::Follower for ServiceFollower {
    fn relist(&self) -> futures::future::BoxFuture<'_, std::result::Result<Revision, String>> {
        Box::pin(async move { relist(&self.0).await.map_err(|e| e.to_string()) })
    }

    fn apply(&self, events: Vec<store::Event>) {
        let allocations = self.0.service_allocations();
        for event in events {
            let Some(owner) = owner_of(&event.kv.key) else {
                continue;
            };
            match event.kind {
                store::EventKind::Put => match serde_json::from_slice::<Value>(&event.kv.value) {
                    Ok(obj) => allocations.observe_put(&owner, &obj),
                    Err(e) => tracing::warn!(%owner, error = %e, "stored Service is not JSON"),
                },
                store::EventKind::Delete => allocations.observe_delete(&owner),
            }
        }
    }
}

async fn follow(state: AppState, revision: Revision) {
    let backend = state.storage().backend().clone();
    let shutdown = state.shutdown().clone();
    crate::prefix_follower::follow(
        backend,
        PREFIX,
        revision,
        shutdown,
        "service allocations",
        ServiceFollower(state),
    )
    .await;
}

/// A fresh picture from the store: committed holds are rebuilt, pending ones kept.
async fn relist(state: &AppState) -> Result<Revision> {
    let allocations = state.service_allocations();
    {
        let mut holds = allocations.lock();
        holds.ips.retain(|_, h| h.pending_until.is_some());
        holds.ports.retain(|_, h| h.pending_until.is_some());
    }
    load(state).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(ip: &str, node_ports: &[i64]) -> Value {
        let ports: Vec<Value> = node_ports
            .iter()
            .enumerate()
            .map(|(i, n)| json!({"name": format!("p{i}"), "port": 80 + i, "nodePort": n}))
            .collect();
        json!({"spec": {"type": "NodePort", "clusterIP": ip, "clusterIPs": [ip], "ports": ports}})
    }

    fn message(e: ApiError) -> String {
        e.to_string()
    }

    #[test]
    fn an_address_asked_for_twice_is_refused_with_kubernetes_words() {
        let a = ServiceAllocations::default();
        let mut first = service("10.96.0.50", &[30080]);
        let asked = Requested::of(&first);
        a.reserve("default/a", "a", &asked, &mut first).unwrap();
        let mut second = service("10.96.0.50", &[30081]);
        let err = a
            .reserve("default/b", "b", &Requested::of(&second), &mut second)
            .unwrap_err();
        assert_eq!(
            message(err),
            "Service \"b\" is invalid: spec.clusterIPs: Invalid value: []string{\"10.96.0.50\"}: failed to allocate IP 10.96.0.50: provided IP is already allocated"
        );
        let mut third = service("10.96.0.51", &[30080]);
        let err = a
            .reserve("default/c", "c", &Requested::of(&third), &mut third)
            .unwrap_err();
        assert_eq!(
            message(err),
            "Service \"c\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
        );
        // The owner itself may write the same values again (an update).
        let mut again = service("10.96.0.50", &[30080]);
        a.reserve("default/a", "a", &Requested::of(&again), &mut again)
            .unwrap();
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let a = ServiceAllocations::default();
        let mut s = service("192.168.1.1", &[]);
        let err = a
            .reserve("default/a", "a", &Requested::of(&s), &mut s)
            .unwrap_err();
        assert!(
            message(err).ends_with(
                "failed to allocate IP 192.168.1.1: the provided network does not match the current range"
            )
        );
        let mut s = service("10.111.255.255", &[]);
        let err = a
            .reserve("default/a", "a", &Requested::of(&s), &mut s)
            .unwrap_err();
        assert!(message(err).ends_with(
            "the provided IP (10.111.255.255) is not in the valid range. The range of valid IPs is 10.96.0.0/12"
        ));
        let mut s = service("10.96.0.60", &[80]);
        let err = a
            .reserve("default/a", "a", &Requested::of(&s), &mut s)
            .unwrap_err();
        assert_eq!(
            message(err),
            "Service \"a\" is invalid: spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767"
        );
    }

    #[test]
    fn picked_values_that_are_taken_move_to_the_next_free_one() {
        let a = ServiceAllocations::default();
        a.observe_put("default/a", &service("10.96.0.50", &[30080]));
        // Values the strategy picked (nothing asked for) collide: the next free ones.
        let mut s = service("10.96.0.50", &[30080, 30080]);
        a.reserve("default/b", "b", &Requested::default(), &mut s)
            .unwrap();
        assert_eq!(s["spec"]["clusterIP"], "10.96.0.51");
        assert_eq!(s["spec"]["clusterIPs"][0], "10.96.0.51");
        assert_eq!(s["spec"]["ports"][0]["nodePort"], 30081);
        assert_eq!(s["spec"]["ports"][1]["nodePort"], 30082);
    }

    #[test]
    fn a_full_node_port_range_is_an_internal_error() {
        let a = ServiceAllocations::default();
        for n in NODE_PORTS.0..=NODE_PORTS.1 {
            a.observe_put(&format!("default/s{n}"), &service("", &[i64::from(n)]));
        }
        let mut s = service("", &[30000]);
        let err = a
            .reserve("default/new", "new", &Requested::default(), &mut s)
            .unwrap_err();
        assert_eq!(
            message(err),
            "Internal error occurred: failed to allocate a nodePort: range is full"
        );
    }

    #[test]
    fn a_stored_service_holds_exactly_what_it_uses_and_a_deleted_one_nothing() {
        let a = ServiceAllocations::default();
        let mut s = service("10.96.0.70", &[30070]);
        a.reserve("default/a", "a", &Requested::of(&s), &mut s)
            .unwrap();
        assert_eq!(a.counts(), (1, 1));
        // Stored with another node port (an update that moved it): the old one is free.
        a.observe_put("default/a", &service("10.96.0.70", &[30071]));
        assert_eq!(a.counts(), (1, 1));
        let mut other = service("10.96.0.71", &[30070]);
        a.reserve("default/b", "b", &Requested::of(&other), &mut other)
            .unwrap();
        a.observe_delete("default/a");
        a.observe_delete("default/b");
        assert_eq!(a.counts(), (0, 0));
    }
}
