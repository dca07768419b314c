//! The simulated cloud's whole state, one value: its instances, load balancers, routes and
//! faults. Every operation of the cloud is a plain function over it (in `instances.rs`,
//! `load_balancers.rs`, `routes.rs`, `faults.rs`), given the time and a random number
//! generator, so it is tested without a server or a clock; the server (`server.rs`) only
//! moves it between HTTP and `state.json` (`state_file.rs`).
//!
//! ```json
//! {"version": 1, "launches": 3,
//!  "instances": [{"id": "i-0c9a...", "name": "node-1", "state": "running", ...}],
//!  "load_balancers": {"a3f2...": {"ingress_ip": "203.0.113.1", "active_at": "...", ...}},
//!  "routes": {"kubernetes-6c1f...": {"target_node": "node-1", "destination_cidr": "10.244.0.0/24", ...}},
//!  "faults": [{"api": "routes", "fail_fraction": 0.5, "delay_ms": 0}]}
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::faults::Fault;
use super::instance_index::InstanceIndex;
use super::instances::CloudInstance;
use super::load_balancers::LoadBalancerRecord;
use super::routes::RouteRecord;

/// The version of `state.json`'s format this cloud reads and writes.
pub(crate) const FORMAT_VERSION: u32 = 1;

/// Everything the simulated cloud knows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CloudState {
    /// [`FORMAT_VERSION`].
    pub version: u32,
    /// How many instances were ever launched: the next one's zone is `ZONES[launches % 3]`.
    pub launches: u64,
    /// The instances in launch order, terminated ones too (for an hour).
    pub instances: Vec<CloudInstance>,
    /// The load balancers by name.
    pub load_balancers: BTreeMap<String, LoadBalancerRecord>,
    /// The routes by name.
    pub routes: BTreeMap<String, RouteRecord>,
    /// The faults in force, by group.
    pub faults: Vec<Fault>,
    /// Where the instances are by name, id and address (not saved: rebuilt on reading).
    #[serde(skip)]
    pub(super) index: InstanceIndex,
}

/// Two states are equal when what they save is: the index is derived from the instances.
impl PartialEq for CloudState {
    fn eq(&self, other: &CloudState) -> bool {
        self.version == other.version
            && self.launches == other.launches
            && self.instances == other.instances
            && self.load_balancers == other.load_balancers
            && self.routes == other.routes
            && self.faults == other.faults
    }
}

impl Default for CloudState {
    fn default() -> CloudState {
        CloudState {
            version: FORMAT_VERSION,
            launches: 0,
            instances: Vec::new(),
            load_balancers: BTreeMap::new(),
            routes: BTreeMap::new(),
            faults: Vec::new(),
            index: InstanceIndex::default(),
        }
    }
}

impl CloudState {
    /// Reads a state written by [`CloudState::to_json`], refusing one that breaks the
    /// cloud's invariants (so a hand-edited file fails at start, not at some later call).
    pub(crate) fn from_json(bytes: &[u8]) -> Result<CloudState, String> {
        let mut state: CloudState = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if state.version != FORMAT_VERSION {
            return Err(format!(
                "format version {} (this cloud reads version {FORMAT_VERSION})",
                state.version
            ));
        }
        let mut ids = BTreeSet::new();
        let mut live_names = BTreeSet::new();
        for i in &state.instances {
            if !ids.insert(&i.id) {
                return Err(format!("instance id {} appears twice", i.id));
            }
            if i.is_live() && !live_names.insert(&i.name) {
                return Err(format!("two live instances are named {}", i.name));
            }
        }
        let mut ips = BTreeSet::new();
        for (name, lb) in &state.load_balancers {
            if !ips.insert(lb.ingress_ip) {
                return Err(format!(
                    "load balancer {name} shares ingress IP {}",
                    lb.ingress_ip
                ));
            }
        }
        state.index = InstanceIndex::new(&state.instances);
        Ok(state)
    }

    /// The state as `state.json` holds it.
    pub(crate) fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut bytes = serde_json::to_vec_pretty(self)?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;
    use crate::sim::api::LaunchRequest;

    #[test]
    fn round_trips_through_json() {
        let mut state = CloudState::default();
        let request = LaunchRequest {
            name: "node-a".into(),
            internal_ip: None,
            instance_type: None,
        };
        state
            .launch(
                &request,
                Timestamp::UNIX_EPOCH,
                &mut StdRng::seed_from_u64(1),
            )
            .expect("launch");
        let bytes = state.to_json().expect("serialize");
        assert_eq!(CloudState::from_json(&bytes), Ok(state));
    }

    #[test]
    fn refuses_what_this_cloud_did_not_write() {
        let err = |json: &str| CloudState::from_json(json.as_bytes()).expect_err(json);
        assert!(err("{\"version\": 1").contains("EOF"));
        assert!(err("42").contains("invalid type"));
        let v2 = r#"{"version":2,"launches":0,"instances":[],"load_balancers":{},"routes":{},"faults":[]}"#;
        assert_eq!(err(v2), "format version 2 (this cloud reads version 1)");
        let mut state = CloudState::default();
        let request = LaunchRequest {
            name: "node-a".into(),
            internal_ip: None,
            instance_type: None,
        };
        state
            .launch(
                &request,
                Timestamp::UNIX_EPOCH,
                &mut StdRng::seed_from_u64(1),
            )
            .expect("launch");
        let twin = state.instances[0].clone();
        state.instances.push(twin);
        let bytes = state.to_json().expect("serialize");
        assert!(
            CloudState::from_json(&bytes)
                .expect_err("twins")
                .contains("appears twice")
        );
    }
}
