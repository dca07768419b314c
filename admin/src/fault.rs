//! [`Fault`]: one fault in force in a cluster, as stored in the ConfigMap
//! `kube-system/miniplane-faults` and served by `/miniplane/v1/faults`.
//!
//! No Kubernetes counterpart; the closest are kwok's chaos stages and the fault injection of
//! Kubernetes' own e2e tests (`test/e2e/framework/network`, "stop the kubelet on the VM").
//!
//! ```json
//! {"name": "pause-deployment", "kind": "PauseController", "controller": "deployment", "steps": 0}
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Controllers whose work queue can be paused and stepped: kube-controller-manager's, then
/// the cloud-controller-manager's (by their `--controllers` names).
pub const PAUSABLE_CONTROLLERS: [&str; 17] = [
    "deployment",
    "replicaset",
    "endpoint",
    "endpointslice",
    "garbagecollector",
    "namespace",
    "nodeipam",
    "serviceaccount",
    "clusterrole-aggregation",
    "root-ca-cert-publisher",
    "csrsigning",
    "job",
    "cronjob",
    "ttl-after-finished",
    "daemonset",
    "cloud-node",
    "service",
];

/// Components `StopComponent` can stop (the names `miniplane up` reports them by).
pub const STOPPABLE_COMPONENTS: [&str; 4] = [
    "controller-manager",
    "scheduler",
    "kubelet",
    "cloud-controller-manager",
];

/// Longest watch-event delay (`WatchEvents.delayMs`).
pub const MAX_DELAY_MS: u64 = 60_000;

/// One fault in force.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fault {
    /// Unique name (a DNS label); [`FaultSpec::default_name`] when created without one.
    #[serde(default)]
    pub name: String,
    /// What the fault does.
    #[serde(flatten)]
    pub spec: FaultSpec,
    /// When it was created (RFC 3339), set by the API server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
}

/// What a fault does; the `kind` field names the variant (see `docs/faults.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum FaultSpec {
    /// The node's simulated kubelet stops renewing its Lease and posting status.
    StopHeartbeats {
        /// The node.
        node: String,
    },
    /// The kubelet stops simulating the node and deletes its Node object.
    RemoveNode {
        /// The node.
        node: String,
    },
    /// The controller's workers take no key from its queue (except granted steps).
    PauseController {
        /// The controller (`deployment`, `replicaset`, `endpoint`, `endpointslice`,
        /// `garbagecollector`, `namespace`).
        controller: String,
        /// Steps granted so far: each lets one key through.
        #[serde(default)]
        steps: u64,
    },
    /// Watch events the API server sends to one component are delayed and/or dropped.
    #[serde(rename_all = "camelCase")]
    WatchEvents {
        /// The component, as the program of its User-Agent (`kube-controller-manager`, ...).
        component: String,
        /// Only watches of this resource (plural), if set.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resource: Option<String>,
        /// Delay before each event is sent.
        #[serde(default)]
        delay_ms: u64,
        /// Fraction of events dropped (0.0..=1.0).
        #[serde(default)]
        drop_fraction: f64,
    },
    /// A fraction of writes is answered with an error instead of being done.
    FailWrites {
        /// 409 (Conflict) or 500 (InternalError).
        code: u16,
        /// Fraction of matching writes that fail (0.0..=1.0).
        fraction: f64,
        /// Only writes of this resource (plural), if set.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resource: Option<String>,
        /// Only writes from this component (User-Agent program), if set.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        component: Option<String>,
    },
    /// The cluster's supervisor stops the component until the fault is cleared.
    StopComponent {
        /// `controller-manager`, `scheduler` or `kubelet`.
        component: String,
    },
}

/// `{"items": [...]}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultList {
    /// The faults, sorted by name.
    pub items: Vec<Fault>,
}

/// Why a fault was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidFault(pub String);

impl FaultSpec {
    /// The name a fault gets when created without one: `pause-deployment`,
    /// `stop-heartbeats-node-1`, `fail-writes-409-replicasets`, ...
    pub fn default_name(&self) -> String {
        let name = match self {
            FaultSpec::StopHeartbeats { node } => format!("stop-heartbeats-{node}"),
            FaultSpec::RemoveNode { node } => format!("remove-node-{node}"),
            FaultSpec::PauseController { controller, .. } => format!("pause-{controller}"),
            FaultSpec::WatchEvents {
                component,
                resource,
                ..
            } => match resource {
                Some(r) => format!("watch-{component}-{r}"),
                None => format!("watch-{component}"),
            },
            FaultSpec::FailWrites { code, resource, .. } => match resource {
                Some(r) => format!("fail-writes-{code}-{r}"),
                None => format!("fail-writes-{code}"),
            },
            FaultSpec::StopComponent { component } => format!("stop-{component}"),
        };
        name.to_ascii_lowercase()
    }

    /// The `kind` field.
    pub fn kind(&self) -> &'static str {
        match self {
            FaultSpec::StopHeartbeats { .. } => "StopHeartbeats",
            FaultSpec::RemoveNode { .. } => "RemoveNode",
            FaultSpec::PauseController { .. } => "PauseController",
            FaultSpec::WatchEvents { .. } => "WatchEvents",
            FaultSpec::FailWrites { .. } => "FailWrites",
            FaultSpec::StopComponent { .. } => "StopComponent",
        }
    }

    /// One line for `miniplane fault list`: what it does to whom.
    pub fn describe(&self) -> String {
        match self {
            FaultSpec::StopHeartbeats { node } => format!("node {node}: heartbeats stopped"),
            FaultSpec::RemoveNode { node } => format!("node {node}: removed"),
            FaultSpec::PauseController { controller, steps } => {
                format!("controller {controller}: paused ({steps} steps granted)")
            }
            FaultSpec::WatchEvents {
                component,
                resource,
                delay_ms,
                drop_fraction,
            } => format!(
                "watch events to {component}{}: delayed {delay_ms} ms, {:.0}% dropped",
                resource
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default(),
                drop_fraction * 100.0
            ),
            FaultSpec::FailWrites {
                code,
                fraction,
                resource,
                component,
            } => format!(
                "{:.0}% of writes{}{} answered {code}",
                fraction * 100.0,
                resource
                    .as_deref()
                    .map(|r| format!(" to {r}"))
                    .unwrap_or_default(),
                component
                    .as_deref()
                    .map(|c| format!(" from {c}"))
                    .unwrap_or_default(),
            ),
            FaultSpec::StopComponent { component } => format!("component {component}: stopped"),
        }
    }

    /// Checks the fields (names, ranges); the error says which field is wrong and why.
    pub fn validate(&self) -> Result<(), InvalidFault> {
        let fraction_ok = |f: f64| (0.0..=1.0).contains(&f);
        match self {
            FaultSpec::StopHeartbeats { node } | FaultSpec::RemoveNode { node } => {
                check_name("node", node)
            }
            FaultSpec::PauseController { controller, .. } => {
                if PAUSABLE_CONTROLLERS.contains(&controller.as_str()) {
                    Ok(())
                } else {
                    Err(InvalidFault(format!(
                        "controller: Unsupported value: {controller:?}: supported values: {}",
                        quoted(&PAUSABLE_CONTROLLERS)
                    )))
                }
            }
            FaultSpec::WatchEvents {
                component,
                resource,
                delay_ms,
                drop_fraction,
            } => {
                check_name("component", component)?;
                if let Some(r) = resource {
                    check_name("resource", r)?;
                }
                if *delay_ms > MAX_DELAY_MS {
                    return Err(InvalidFault(format!(
                        "delayMs: Invalid value: {delay_ms}: must be at most {MAX_DELAY_MS}"
                    )));
                }
                if !fraction_ok(*drop_fraction) {
                    return Err(InvalidFault(format!(
                        "dropFraction: Invalid value: {drop_fraction}: must be between 0 and 1"
                    )));
                }
                if *delay_ms == 0 && *drop_fraction == 0.0 {
                    return Err(InvalidFault(
                        "delayMs, dropFraction: Required value: a delay or a drop fraction".into(),
                    ));
                }
                Ok(())
            }
            FaultSpec::FailWrites {
                code,
                fraction,
                resource,
                component,
            } => {
                if *code != 409 && *code != 500 {
                    return Err(InvalidFault(format!(
                        "code: Unsupported value: {code}: supported values: 409, 500"
                    )));
                }
                if !fraction_ok(*fraction) || *fraction == 0.0 {
                    return Err(InvalidFault(format!(
                        "fraction: Invalid value: {fraction}: must be greater than 0 and at most 1"
                    )));
                }
                if let Some(r) = resource {
                    check_name("resource", r)?;
                }
                if let Some(c) = component {
                    check_name("component", c)?;
                }
                Ok(())
            }
            FaultSpec::StopComponent { component } => {
                if STOPPABLE_COMPONENTS.contains(&component.as_str()) {
                    Ok(())
                } else {
                    Err(InvalidFault(format!(
                        "component: Unsupported value: {component:?}: supported values: {}",
                        quoted(&STOPPABLE_COMPONENTS)
                    )))
                }
            }
        }
    }
}

impl Fault {
    /// A fault with its default name.
    pub fn new(spec: FaultSpec) -> Self {
        Fault {
            name: spec.default_name(),
            spec,
            created: None,
        }
    }

    /// Fills in the default name if missing and validates the name and the spec.
    pub fn normalize(mut self) -> Result<Fault, InvalidFault> {
        if self.name.is_empty() {
            self.name = self.spec.default_name();
        }
        check_name("name", &self.name)?;
        self.spec.validate()?;
        Ok(self)
    }
}

fn quoted(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A DNS-1123 label of at most 63 characters (node names may also contain dots).
fn check_name(field: &str, value: &str) -> Result<(), InvalidFault> {
    let ok = !value.is_empty()
        && value.len() <= 253
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && value.starts_with(|c: char| c.is_ascii_alphanumeric())
        && value.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(InvalidFault(format!(
            "{field}: Invalid value: {value:?}: a lowercase RFC 1123 name must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        )))
    }
}

/// The faults in the `data` of the faults ConfigMap, sorted by name. Entries that do not
/// parse are returned as errors (`key: why`) and otherwise ignored, so one bad hand edit does
/// not disable the others.
pub fn faults_from_data(data: &BTreeMap<String, String>) -> (Vec<Fault>, Vec<String>) {
    let mut faults = Vec::new();
    let mut errors = Vec::new();
    for (key, value) in data {
        match serde_json::from_str::<Fault>(value) {
            Ok(mut fault) => {
                fault.name = key.clone();
                match fault.normalize() {
                    Ok(f) => faults.push(f),
                    Err(e) => errors.push(format!("{key}: {e}")),
                }
            }
            Err(e) => errors.push(format!("{key}: {e}")),
        }
    }
    (faults, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_kind_tag_and_default_name() {
        let json = r#"{"kind":"PauseController","controller":"deployment"}"#;
        let fault: Fault = serde_json::from_str(json).expect("valid fault");
        let fault = fault.normalize().expect("valid");
        assert_eq!(fault.name, "pause-deployment");
        assert_eq!(
            fault.spec,
            FaultSpec::PauseController {
                controller: "deployment".into(),
                steps: 0
            }
        );
        let back = serde_json::to_value(&fault).expect("serializable");
        assert_eq!(back["kind"], "PauseController");
        assert_eq!(back["steps"], 0);
        let watch: Fault = serde_json::from_str(
            r#"{"kind":"WatchEvents","component":"kube-scheduler","delayMs":500}"#,
        )
        .expect("valid");
        assert_eq!(watch.spec.default_name(), "watch-kube-scheduler");
    }

    #[test]
    fn bad_fields_are_refused_with_the_field_named() {
        let bad = [
            (
                FaultSpec::PauseController {
                    controller: "nope".into(),
                    steps: 0,
                },
                "controller: Unsupported value",
            ),
            (
                FaultSpec::FailWrites {
                    code: 404,
                    fraction: 0.5,
                    resource: None,
                    component: None,
                },
                "code: Unsupported value: 404",
            ),
            (
                FaultSpec::FailWrites {
                    code: 500,
                    fraction: 1.5,
                    resource: None,
                    component: None,
                },
                "fraction: Invalid value",
            ),
            (
                FaultSpec::WatchEvents {
                    component: "kubelet".into(),
                    resource: None,
                    delay_ms: 0,
                    drop_fraction: 0.0,
                },
                "Required value",
            ),
            (
                FaultSpec::StopHeartbeats {
                    node: "Node_1".into(),
                },
                "node: Invalid value",
            ),
            (
                FaultSpec::StopComponent {
                    component: "apiserver".into(),
                },
                "component: Unsupported value",
            ),
        ];
        for (spec, want) in bad {
            let err = spec.validate().expect_err("invalid");
            assert!(err.0.contains(want), "{err} should contain {want}");
        }
    }

    #[test]
    fn configmap_data_keeps_good_entries_and_reports_bad_ones() {
        let mut data = BTreeMap::new();
        data.insert(
            "stop-heartbeats-node-1".to_string(),
            r#"{"kind":"StopHeartbeats","node":"node-1"}"#.to_string(),
        );
        data.insert("broken".to_string(), "{".to_string());
        let (faults, errors) = faults_from_data(&data);
        assert_eq!(faults.len(), 1);
        assert_eq!(faults[0].name, "stop-heartbeats-node-1");
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("broken:"));
    }
}
