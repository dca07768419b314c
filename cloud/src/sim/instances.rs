//! Instances: the simulated cloud's virtual machines, one per node, as EC2's instances are.
//! The cloud node controller reads them through `InstancesV2` (`k8s.io/cloud-provider`'s
//! `cloud.go`); the cluster launcher and `miniplane cloud` launch, stop, start and terminate
//! them.
//!
//! ```text
//!             launch                stop              terminate (DELETE)
//!   (none) ──────────▶ running ─────────────▶ stopped ─────────────▶ terminated
//!                         ▲ ◀──────────────────  │                      (kept an hour, then
//!                         │        start         │                       forgotten; its name
//!                         └──── terminate ───────┴──────────────────▶    can launch anew)
//! ```
//!
//! * An instance's name is the node's hostname; at most one instance of a name is not
//!   terminated. Launching a name that has one returns it unchanged (the launcher calls launch
//!   on every start; that is how it makes sure the instances exist).
//! * Its id is `i-` and 17 hex digits; its provider ID `miniplane:///<zone>/<id>`, the form
//!   `spec.providerID` takes (`aws:///us-east-1a/i-0abc...` on AWS).
//! * Zones `local-1a`, `local-1b`, `local-1c` of region `local-1`, round-robin in launch order.
//! * Addresses: the InternalIP the launcher gives (the node's) or the lowest free one of
//!   172.31.0.0/16, an ExternalIP from 198.51.100.0/24 (then 198.18.0.0/15), and the name
//!   as Hostname. A terminated instance's addresses are free again.
//! * A terminated instance does not exist for `InstancesV2` (the node lifecycle controller
//!   deletes its Node); a stopped one exists and is shut down (the Node is tainted).
//!
//! Unlike EC2, a stopped instance keeps its external IP, and there are no instance types to
//! choose from: the type is a label.
//!
//! The instances are kept in launch order, with an [`InstanceIndex`] beside them
//! (`instance_index.rs`): no call scans them all.

use std::net::Ipv4Addr;

use jiff::{SignedDuration, Timestamp};
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::{InstanceMetadata, NodeAddress};

use super::address_pool::{AddressPool, EXTERNAL, INTERNAL};
use super::api::{LaunchRequest, Rejection, check_name};
use super::instance_index::InstanceIndex;
use super::state::CloudState;

/// The provider name, the scheme of the provider IDs.
pub const PROVIDER_NAME: &str = "miniplane";
/// The one region.
pub const REGION: &str = "local-1";
/// The zones of [`REGION`], in the order instances are spread over them.
pub const ZONES: [&str; 3] = ["local-1a", "local-1b", "local-1c"];
/// The type of an instance launched without one.
pub const DEFAULT_INSTANCE_TYPE: &str = "sim.standard-2";
/// How long a terminated instance stays listed (EC2 shows them for about an hour).
const TERMINATED_KEPT: SignedDuration = SignedDuration::from_hours(1);

/// Where an instance is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstanceState {
    /// Running: its node can be Ready.
    Running,
    /// Stopped: it exists, but is shut down (`InstanceShutdown` is true).
    Stopped,
    /// Terminated: gone for good (`InstanceExists` is false).
    Terminated,
}

impl InstanceState {
    /// `running`, `stopped` or `terminated`.
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceState::Running => "running",
            InstanceState::Stopped => "stopped",
            InstanceState::Terminated => "terminated",
        }
    }
}

/// A virtual machine of the simulated cloud.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloudInstance {
    /// `i-` and 17 hex digits, unique for the cloud's life.
    pub id: String,
    /// The node's hostname.
    pub name: String,
    /// `miniplane:///<zone>/<id>`.
    pub provider_id: String,
    /// E.g. `sim.standard-2`.
    pub instance_type: String,
    /// Always [`REGION`].
    pub region: String,
    /// One of [`ZONES`].
    pub zone: String,
    /// Running, stopped or terminated.
    pub state: InstanceState,
    /// Its address in the cluster's network.
    pub internal_ip: Ipv4Addr,
    /// Its address from outside the cloud.
    pub external_ip: Ipv4Addr,
    /// When it was launched.
    pub launched_at: Timestamp,
    /// When it was terminated, if it was.
    #[serde(default)]
    pub terminated_at: Option<Timestamp>,
}

impl CloudInstance {
    /// Whether it is not terminated (so it exists for `InstancesV2`).
    pub fn is_live(&self) -> bool {
        self.state != InstanceState::Terminated
    }

    /// Its addresses as a Node's `status.addresses`: InternalIP, ExternalIP, Hostname.
    pub fn node_addresses(&self) -> Vec<NodeAddress> {
        vec![
            NodeAddress {
                type_: NodeAddress::INTERNAL_IP.to_owned(),
                address: self.internal_ip.to_string(),
            },
            NodeAddress {
                type_: NodeAddress::EXTERNAL_IP.to_owned(),
                address: self.external_ip.to_string(),
            },
            NodeAddress {
                type_: NodeAddress::HOSTNAME.to_owned(),
                address: self.name.clone(),
            },
        ]
    }

    /// What `InstanceMetadata` answers for it.
    pub fn metadata(&self) -> InstanceMetadata {
        InstanceMetadata {
            provider_id: self.provider_id.clone(),
            instance_type: self.instance_type.clone(),
            node_addresses: self.node_addresses(),
            zone: self.zone.clone(),
            region: self.region.clone(),
        }
    }
}

/// `miniplane:///<zone>/<id>`.
pub fn provider_id(zone: &str, id: &str) -> String {
    format!("{PROVIDER_NAME}:///{zone}/{id}")
}

/// The instance id in a provider ID of this cloud (`miniplane:///<zone>/<id>`, or
/// `miniplane://<id>`), or `None` when it is not one.
pub fn instance_id_from_provider_id(provider_id: &str) -> Option<&str> {
    let rest = provider_id
        .strip_prefix(PROVIDER_NAME)?
        .strip_prefix("://")?;
    let id = rest.rsplit('/').next()?;
    let hex = id.strip_prefix("i-")?;
    (!hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// The answer to a launch: the instance, and whether this call created it.
#[derive(Debug, Clone)]
pub(crate) struct Launched {
    pub instance: CloudInstance,
    pub created: bool,
}

impl CloudState {
    /// The instance named `name` that is not terminated.
    pub(crate) fn live_instance(&self, name: &str) -> Option<&CloudInstance> {
        self.index
            .live
            .get(name)
            .and_then(|&at| self.instances.get(at))
    }

    /// Every instance (terminated ones too) with this name and/or id, in launch order.
    pub(crate) fn find_instances(
        &self,
        name: Option<&str>,
        id: Option<&str>,
    ) -> Vec<CloudInstance> {
        let matches =
            |i: &&CloudInstance| name.is_none_or(|n| i.name == n) && id.is_none_or(|d| i.id == d);
        let one =
            |found: Option<&CloudInstance>| found.filter(matches).into_iter().cloned().collect();
        match (name, id) {
            // An id names at most one instance.
            (_, Some(id)) => one(self
                .index
                .ids
                .get(id)
                .and_then(|&at| self.instances.get(at))),
            // With no terminated instance, a name has at most its live one.
            (Some(name), None) if self.index.terminated == 0 => one(self.live_instance(name)),
            _ => self.instances.iter().filter(matches).cloned().collect(),
        }
    }

    /// Launches `request.name` unless it has a live instance, which is returned unchanged.
    /// A refused launch changes nothing.
    pub(crate) fn launch(
        &mut self,
        request: &LaunchRequest,
        now: Timestamp,
        rng: &mut impl Rng,
    ) -> Result<Launched, Rejection> {
        check_name("instance", &request.name)?;
        if let Some(existing) = self.live_instance(&request.name) {
            return Ok(Launched {
                instance: existing.clone(),
                created: false,
            });
        }
        let instance_type = match &request.instance_type {
            Some(t) => {
                check_name("instance type", t)?;
                t.clone()
            }
            None => DEFAULT_INSTANCE_TYPE.to_owned(),
        };
        let internal_ip = match request.internal_ip {
            Some(ip) => {
                if self.index.internal.contains(&ip) {
                    let holder = self
                        .instances
                        .iter()
                        .find(|i| i.is_live() && i.internal_ip == ip);
                    return Err(Rejection::Conflict(format!(
                        "internal IP {ip} is in use by instance {} ({})",
                        holder.map_or("?", |h| h.name.as_str()),
                        holder.map_or("?", |h| h.id.as_str()),
                    )));
                }
                ip
            }
            None => self
                .index
                .lowest_free(&[INTERNAL], false)
                .ok_or_else(|| exhausted("internal", &[INTERNAL]))?,
        };
        let external_ip = self
            .index
            .lowest_free(&EXTERNAL, true)
            .ok_or_else(|| exhausted("external", &EXTERNAL))?;
        let id = loop {
            let id = format!("i-{:017x}", rng.random::<u128>() & ((1u128 << 68) - 1));
            if !self.index.ids.contains_key(&id) {
                break id;
            }
        };
        self.forget_terminated(now);
        let zone = ZONES[(self.launches % ZONES.len() as u64) as usize];
        self.launches += 1;
        let instance = CloudInstance {
            provider_id: provider_id(zone, &id),
            id,
            name: request.name.clone(),
            instance_type,
            region: REGION.to_owned(),
            zone: zone.to_owned(),
            state: InstanceState::Running,
            internal_ip,
            external_ip,
            launched_at: now,
            terminated_at: None,
        };
        self.index.add(self.instances.len(), &instance);
        self.instances.push(instance.clone());
        Ok(Launched {
            instance,
            created: true,
        })
    }

    /// Stops the live instance `name` (a stopped one stays stopped).
    pub(crate) fn stop(&mut self, name: &str) -> Result<CloudInstance, Rejection> {
        self.set_state(name, InstanceState::Stopped, None)
    }

    /// Starts the live instance `name` (a running one stays running).
    pub(crate) fn start(&mut self, name: &str) -> Result<CloudInstance, Rejection> {
        self.set_state(name, InstanceState::Running, None)
    }

    /// Terminates the live instance `name`: its addresses are free again, its routes become
    /// blackholes.
    pub(crate) fn terminate(
        &mut self,
        name: &str,
        now: Timestamp,
    ) -> Result<CloudInstance, Rejection> {
        self.set_state(name, InstanceState::Terminated, Some(now))
    }

    fn set_state(
        &mut self,
        name: &str,
        state: InstanceState,
        terminated_at: Option<Timestamp>,
    ) -> Result<CloudInstance, Rejection> {
        let instance = self
            .index
            .live
            .get(name)
            .and_then(|&at| self.instances.get_mut(at))
            .ok_or_else(|| instance_not_found(name))?;
        instance.state = state;
        instance.terminated_at = terminated_at;
        let instance = instance.clone();
        if state == InstanceState::Terminated {
            self.index.terminated(&instance);
        }
        Ok(instance)
    }

    /// Drops the instances terminated more than [`TERMINATED_KEPT`] ago.
    fn forget_terminated(&mut self, now: Timestamp) {
        if self.index.terminated == 0 {
            return;
        }
        let kept = self.instances.len();
        self.instances.retain(|i| {
            i.terminated_at
                .is_none_or(|t| now.duration_since(t) < TERMINATED_KEPT)
        });
        if self.instances.len() != kept {
            self.index = InstanceIndex::new(&self.instances);
        }
    }
}

/// The answer for a name without a live instance.
pub(crate) fn instance_not_found(name: &str) -> Rejection {
    Rejection::NotFound(format!("instance {name:?} not found"))
}

fn exhausted(which: &str, pools: &[AddressPool]) -> Rejection {
    let count: u32 = pools.iter().map(AddressPool::host_count).sum();
    let ranges: Vec<String> = pools.iter().map(ToString::to_string).collect();
    Rejection::Conflict(format!(
        "no free {which} IP: all {count} addresses of {} are in use",
        ranges.join(" and ")
    ))
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    fn launch(state: &mut CloudState, name: &str, ip: Option<[u8; 4]>) -> Launched {
        let request = LaunchRequest {
            name: name.into(),
            internal_ip: ip.map(Ipv4Addr::from),
            instance_type: None,
        };
        state
            .launch(
                &request,
                Timestamp::UNIX_EPOCH,
                &mut StdRng::seed_from_u64(7),
            )
            .expect("launch")
    }

    #[test]
    fn launch_spreads_over_zones_and_picks_addresses() {
        let mut state = CloudState::default();
        let a = launch(&mut state, "node-a", Some([10, 0, 0, 5])).instance;
        let b = launch(&mut state, "node-b", None).instance;
        let c = launch(&mut state, "node-c", None).instance;
        let d = launch(&mut state, "node-d", None).instance;
        let zones: Vec<&str> = [&a, &b, &c, &d].iter().map(|i| i.zone.as_str()).collect();
        assert_eq!(zones, ["local-1a", "local-1b", "local-1c", "local-1a"]);
        assert_eq!(a.internal_ip, Ipv4Addr::new(10, 0, 0, 5));
        assert_eq!(b.internal_ip, Ipv4Addr::new(172, 31, 0, 1));
        assert_eq!(c.internal_ip, Ipv4Addr::new(172, 31, 0, 2));
        assert_eq!(a.external_ip, Ipv4Addr::new(198, 51, 100, 1));
        assert_eq!(d.external_ip, Ipv4Addr::new(198, 51, 100, 4));
        assert_eq!(a.instance_type, DEFAULT_INSTANCE_TYPE);
        assert_eq!(a.region, "local-1");
        assert_eq!(a.state, InstanceState::Running);
        assert!(a.id.starts_with("i-") && a.id.len() == 19, "{}", a.id);
        assert_ne!(a.id, b.id);
        assert_eq!(a.provider_id, format!("miniplane:///local-1a/{}", a.id));
        assert_eq!(
            instance_id_from_provider_id(&a.provider_id),
            Some(a.id.as_str())
        );
        let types: Vec<String> = a.node_addresses().into_iter().map(|a| a.type_).collect();
        assert_eq!(types, ["InternalIP", "ExternalIP", "Hostname"]);
    }

    #[test]
    fn launch_is_idempotent_by_name() {
        let mut state = CloudState::default();
        let first = launch(&mut state, "node-a", None);
        let again = launch(&mut state, "node-a", Some([10, 9, 9, 9]));
        assert!(first.created);
        assert!(!again.created);
        assert_eq!(again.instance, first.instance);
        assert_eq!(state.instances.len(), 1);
        assert_eq!(state.launches, 1);
    }

    #[test]
    fn an_internal_ip_in_use_is_refused() {
        let mut state = CloudState::default();
        launch(&mut state, "node-a", Some([10, 0, 0, 5]));
        let request = LaunchRequest {
            name: "node-b".into(),
            internal_ip: Some(Ipv4Addr::new(10, 0, 0, 5)),
            instance_type: None,
        };
        let err = state
            .launch(
                &request,
                Timestamp::UNIX_EPOCH,
                &mut StdRng::seed_from_u64(1),
            )
            .expect_err("in use");
        assert_eq!(err.status(), 409);
        assert!(
            err.to_string().contains("in use by instance node-a"),
            "{err}"
        );
    }

    #[test]
    fn stop_start_terminate_and_launch_anew() {
        let mut state = CloudState::default();
        let first = launch(&mut state, "node-a", None).instance;
        assert_eq!(
            state.stop("node-a").map(|i| i.state),
            Ok(InstanceState::Stopped)
        );
        assert_eq!(
            state.stop("node-a").map(|i| i.state),
            Ok(InstanceState::Stopped)
        );
        assert_eq!(
            state.start("node-a").map(|i| i.state),
            Ok(InstanceState::Running)
        );
        let gone = state
            .terminate("node-a", Timestamp::UNIX_EPOCH)
            .expect("terminate");
        assert_eq!(gone.state, InstanceState::Terminated);
        assert!(state.live_instance("node-a").is_none());
        assert_eq!(state.stop("node-a").map_err(|e| e.status()), Err(404));
        assert_eq!(
            state
                .terminate("node-a", Timestamp::UNIX_EPOCH)
                .map_err(|e| e.status()),
            Err(404)
        );
        // The name launches anew with a new id; its old addresses are free again.
        let second = launch(&mut state, "node-a", None).instance;
        assert_ne!(second.id, first.id);
        assert_eq!(second.internal_ip, first.internal_ip);
        assert_eq!(state.find_instances(Some("node-a"), None).len(), 2);
        assert_eq!(
            state.find_instances(None, Some(&first.id))[0].state,
            InstanceState::Terminated
        );
    }

    #[test]
    fn terminated_instances_are_forgotten_after_an_hour() {
        let mut state = CloudState::default();
        launch(&mut state, "node-a", None);
        state
            .terminate("node-a", Timestamp::UNIX_EPOCH)
            .expect("terminate");
        let later = Timestamp::UNIX_EPOCH + SignedDuration::from_hours(2);
        let request = LaunchRequest {
            name: "node-b".into(),
            internal_ip: None,
            instance_type: Some("sim.large-8".into()),
        };
        let b = state
            .launch(&request, later, &mut StdRng::seed_from_u64(3))
            .expect("launch");
        assert_eq!(b.instance.instance_type, "sim.large-8");
        let names: Vec<&str> = state.instances.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["node-b"]);
    }

    /// The index answers as a scan of the instances would, through launches past the first
    /// external pool, terminations (whose addresses are taken again, lowest first), a
    /// forgetting and a reading back from JSON.
    #[test]
    fn lookups_and_free_addresses_stay_right_as_instances_come_and_go() {
        let mut state = CloudState::default();
        for n in 0..300 {
            launch(&mut state, &format!("n-{n}"), None);
        }
        let b = |n: u8| Ipv4Addr::new(198, 51, 100, n);
        assert_eq!(
            state.live_instance("n-253").map(|i| i.external_ip),
            Some(b(254))
        );
        assert_eq!(
            state.live_instance("n-254").map(|i| i.external_ip),
            Some(Ipv4Addr::new(198, 18, 0, 1))
        );
        for name in ["n-10", "n-4", "n-270"] {
            state
                .terminate(name, Timestamp::UNIX_EPOCH)
                .expect("terminate");
        }
        let again = launch(&mut state, "n-10", None).instance;
        assert_eq!(
            (again.internal_ip, again.external_ip),
            (Ipv4Addr::new(172, 31, 0, 5), b(5)),
            "the lowest freed addresses first (n-4's)"
        );
        let next = launch(&mut state, "x", None).instance;
        assert_eq!(next.external_ip, b(11));
        let last = launch(&mut state, "y", None).instance;
        assert_eq!(last.external_ip, Ipv4Addr::new(198, 18, 0, 17), "n-270's");
        let fresh = launch(&mut state, "z", None).instance;
        assert_eq!(fresh.external_ip, Ipv4Addr::new(198, 18, 0, 47));

        let scan = |state: &CloudState, name: &str| {
            state
                .instances
                .iter()
                .find(|i| i.name == name && i.is_live())
                .cloned()
        };
        let check = |state: &CloudState| {
            for i in &state.instances {
                assert_eq!(state.live_instance(&i.name).cloned(), scan(state, &i.name));
                let all: Vec<_> = state
                    .instances
                    .iter()
                    .filter(|j| j.name == i.name)
                    .collect();
                let found = state.find_instances(Some(&i.name), None);
                assert_eq!(found.iter().collect::<Vec<_>>(), all);
                assert_eq!(
                    state.find_instances(None, Some(&i.id)),
                    std::slice::from_ref(i)
                );
                let other = if i.name == "x" { "y" } else { "x" };
                assert_eq!(state.find_instances(Some(other), Some(&i.id)), []);
            }
        };
        check(&state);
        let later = Timestamp::UNIX_EPOCH + SignedDuration::from_hours(2);
        let request = LaunchRequest {
            name: "after-an-hour".into(),
            internal_ip: None,
            instance_type: None,
        };
        state
            .launch(&request, later, &mut StdRng::seed_from_u64(9))
            .expect("launch");
        assert_eq!(
            state.instances.len(),
            305 - 3,
            "the 3 terminated ones forgotten"
        );
        check(&state);
        let read = CloudState::from_json(&state.to_json().expect("encode")).expect("decode");
        assert_eq!(read, state);
        check(&read);
        assert_eq!(
            read.live_instance("n-299").map(|i| &i.id),
            state.live_instance("n-299").map(|i| &i.id)
        );
    }

    /// Each refusal comes before any change: the state is as it was (so the cloud needs no
    /// copy of itself to undo one).
    #[test]
    fn a_refused_call_changes_nothing() {
        let mut state = CloudState::default();
        launch(&mut state, "node-a", Some([10, 0, 0, 5]));
        state
            .terminate("node-a", Timestamp::UNIX_EPOCH)
            .expect("terminate");
        launch(&mut state, "node-b", Some([10, 0, 0, 6]));
        let before = state.clone();
        let later = Timestamp::UNIX_EPOCH + SignedDuration::from_hours(2);
        let refused = [
            ("node-c", Some([10, 0, 0, 6]), None),
            ("Node C", None, None),
            ("node-c", None, Some("no such type!")),
        ];
        for (name, ip, instance_type) in refused {
            let request = LaunchRequest {
                name: name.into(),
                internal_ip: ip.map(Ipv4Addr::from),
                instance_type: instance_type.map(Into::into),
            };
            assert!(
                state
                    .launch(&request, later, &mut StdRng::seed_from_u64(2))
                    .is_err()
            );
            assert_eq!(state, before, "{name} {ip:?} {instance_type:?}");
        }
        assert!(state.stop("node-a").is_err());
        assert!(state.terminate("nobody", later).is_err());
        assert_eq!(state, before);
    }

    #[test]
    fn provider_ids_of_other_clouds_are_not_ours() {
        assert_eq!(
            instance_id_from_provider_id("miniplane://i-0abc"),
            Some("i-0abc")
        );
        assert_eq!(
            instance_id_from_provider_id("aws:///us-east-1a/i-0abc"),
            None
        );
        assert_eq!(
            instance_id_from_provider_id("miniplane:///local-1a/node-1"),
            None
        );
        assert_eq!(
            instance_id_from_provider_id("miniplane:///local-1a/i-"),
            None
        );
        assert_eq!(instance_id_from_provider_id("kwok://node-1"), None);
    }
}
