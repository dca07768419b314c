//! [`FaultTable`]: the API server's copy of the faults in force, read from the ConfigMap
//! `kube-system/miniplane-faults` at start and after every write to it, and the two faults
//! the API server itself injects: failing writes (`FailWrites`) and delaying or dropping the
//! watch events sent to one component (`WatchEvents`).
//!
//! No Kubernetes counterpart (kube-apiserver has no fault injection; its e2e tests break
//! things from outside). Decisions are plain functions of the faults, the request and a
//! random draw, so they are tested without a server.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use admin::{Fault, FaultSpec};
use rand::Rng;

/// The faults in force (cheap to clone; clones share the table).
#[derive(Clone, Default)]
pub struct FaultTable {
    faults: Arc<RwLock<Vec<Fault>>>,
}

/// What to do with one watch event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WatchAction {
    /// Send it now.
    Send,
    /// Send it after the delay.
    Delay(Duration),
    /// Never send it.
    Drop,
}

/// The program of a User-Agent (`kube-scheduler/v1.33.0 (linux/amd64)` → `kube-scheduler`).
pub fn program(user_agent: Option<&str>) -> &str {
    user_agent
        .and_then(|ua| ua.split('/').next())
        .map(str::trim)
        .unwrap_or("")
}

impl FaultTable {
    /// Replaces the faults in force.
    pub fn set(&self, faults: Vec<Fault>) {
        *self.faults.write().unwrap_or_else(|p| p.into_inner()) = faults;
    }

    /// The faults in force, sorted by name.
    pub fn list(&self) -> Vec<Fault> {
        self.faults
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether a write of `resource` by `program` fails, and with which fault and code.
    pub fn fail_write(&self, program: &str, resource: &str) -> Option<(String, u16)> {
        let faults = self.faults.read().unwrap_or_else(|p| p.into_inner());
        decide_write(&faults, program, resource, rand::rng().random::<f64>())
    }

    /// What to do with a watch event of `resource` sent to `program`.
    pub fn watch_action(&self, program: &str, resource: &str) -> WatchAction {
        let faults = self.faults.read().unwrap_or_else(|p| p.into_inner());
        if faults.is_empty() {
            return WatchAction::Send;
        }
        decide_watch(&faults, program, resource, rand::rng().random::<f64>())
    }
}

fn matches(filter: Option<&String>, value: &str) -> bool {
    filter.is_none_or(|f| f == value)
}

/// The first `FailWrites` fault matching the write, if the draw (in `0.0..1.0`) falls under
/// its fraction: `(fault name, HTTP code)`.
pub fn decide_write(
    faults: &[Fault],
    program: &str,
    resource: &str,
    draw: f64,
) -> Option<(String, u16)> {
    faults.iter().find_map(|f| match &f.spec {
        FaultSpec::FailWrites {
            code,
            fraction,
            resource: only_resource,
            component,
        } if matches(only_resource.as_ref(), resource)
            && matches(component.as_ref(), program)
            && draw < *fraction =>
        {
            Some((f.name.clone(), *code))
        }
        _ => None,
    })
}

/// The effect of the first `WatchEvents` fault matching the watch: dropped if the draw falls
/// under its drop fraction, else delayed by its delay.
pub fn decide_watch(faults: &[Fault], program: &str, resource: &str, draw: f64) -> WatchAction {
    for f in faults {
        if let FaultSpec::WatchEvents {
            component,
            resource: only_resource,
            delay_ms,
            drop_fraction,
        } = &f.spec
            && component == program
            && matches(only_resource.as_ref(), resource)
        {
            if draw < *drop_fraction {
                return WatchAction::Drop;
            }
            if *delay_ms > 0 {
                return WatchAction::Delay(Duration::from_millis(*delay_ms));
            }
        }
    }
    WatchAction::Send
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(spec: FaultSpec) -> Fault {
        Fault::new(spec)
    }

    #[test]
    fn writes_fail_by_fraction_resource_and_component() {
        let faults = vec![fault(FaultSpec::FailWrites {
            code: 409,
            fraction: 0.5,
            resource: Some("replicasets".into()),
            component: Some("kube-controller-manager".into()),
        })];
        let cm = "kube-controller-manager";
        assert_eq!(
            decide_write(&faults, cm, "replicasets", 0.2),
            Some(("fail-writes-409-replicasets".into(), 409))
        );
        assert_eq!(decide_write(&faults, cm, "replicasets", 0.7), None);
        assert_eq!(decide_write(&faults, cm, "pods", 0.2), None);
        assert_eq!(decide_write(&faults, "kubectl", "replicasets", 0.2), None);
        assert_eq!(decide_write(&[], cm, "replicasets", 0.0), None);
    }

    #[test]
    fn watch_events_are_dropped_or_delayed_for_one_component() {
        let faults = vec![fault(FaultSpec::WatchEvents {
            component: "kube-scheduler".into(),
            resource: Some("pods".into()),
            delay_ms: 250,
            drop_fraction: 0.5,
        })];
        assert_eq!(
            decide_watch(&faults, "kube-scheduler", "pods", 0.1),
            WatchAction::Drop
        );
        assert_eq!(
            decide_watch(&faults, "kube-scheduler", "pods", 0.9),
            WatchAction::Delay(Duration::from_millis(250))
        );
        assert_eq!(
            decide_watch(&faults, "kube-scheduler", "nodes", 0.1),
            WatchAction::Send
        );
        assert_eq!(
            decide_watch(&faults, "kubelet", "pods", 0.1),
            WatchAction::Send
        );
    }

    #[test]
    fn user_agent_program() {
        assert_eq!(
            program(Some("kube-scheduler/v1.33.0 (linux/amd64)")),
            "kube-scheduler"
        );
        assert_eq!(program(None), "");
    }
}
