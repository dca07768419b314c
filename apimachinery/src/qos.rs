//! A pod's quality-of-service class (`GetPodQOS`, which Kubernetes keeps in
//! `k8s.io/component-helpers/resource/qos.go` and `pkg/apis/core/helper/qos/qos.go`): the API
//! server records it in `status.qosClass` on create, the kubelet uses it to pick eviction
//! victims and `kubectl describe pod` prints it.
//!
//! ```text
//! every container has cpu+memory limits, and requests == limits  → Guaranteed
//! no container requests or limits cpu/memory at all              → BestEffort
//! anything in between                                            → Burstable
//! ```

use crate::resource::quantity::Quantity;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use std::collections::BTreeMap;

/// The QoS class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QosClass {
    /// Requests equal limits for CPU and memory in every container.
    Guaranteed,
    /// Some requests or limits, but not Guaranteed.
    Burstable,
    /// No CPU or memory requests or limits anywhere.
    BestEffort,
}

impl QosClass {
    /// The `status.qosClass` string.
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }
}

const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// `GetPodQOS` over the containers and init containers of `spec` (requests already defaulted
/// from limits, as `SetDefaults_Pod` does before the class is computed).
pub fn pod_qos(spec: &PodSpec) -> QosClass {
    let mut requests: BTreeMap<&str, Quantity> = BTreeMap::new();
    let mut limits: BTreeMap<&str, Quantity> = BTreeMap::new();
    let mut guaranteed = true;
    let containers: Vec<&Container> = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .collect();
    for c in containers {
        let res = c.resources.clone().unwrap_or_default();
        for (name, total) in [(&res.requests, &mut requests), (&res.limits, &mut limits)] {
            for (k, v) in name.iter().flatten() {
                let Some(key) = QOS_RESOURCES.iter().find(|r| **r == k.as_str()) else {
                    continue;
                };
                let q = Quantity::parse(&v.0).unwrap_or_default();
                if !q.is_zero() {
                    let sum = total.entry(key).or_default();
                    *sum = sum.saturating_add(q);
                }
            }
        }
        let has_all_limits = QOS_RESOURCES.iter().all(|r| {
            res.limits
                .as_ref()
                .and_then(|l| l.get(*r))
                .is_some_and(|q| !Quantity::parse(&q.0).unwrap_or_default().is_zero())
        });
        if !has_all_limits {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return QosClass::BestEffort;
    }
    if guaranteed
        && requests.iter().all(|(k, v)| limits.get(k) == Some(v))
        && requests.len() == limits.len()
    {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn qos(containers: serde_json::Value) -> &'static str {
        let spec: PodSpec = serde_json::from_value(json!({ "containers": containers })).unwrap();
        pod_qos(&spec).as_str()
    }

    #[test]
    fn classes() {
        assert_eq!(qos(json!([{"name": "a"}])), "BestEffort");
        assert_eq!(
            qos(json!([{"name": "a", "resources": {"requests": {"cpu": "100m"}}}])),
            "Burstable"
        );
        let full = json!({"cpu": "1", "memory": "1Gi"});
        assert_eq!(
            qos(json!([{"name": "a", "resources": {"requests": full, "limits": full}}])),
            "Guaranteed"
        );
        assert_eq!(
            qos(
                json!([{"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": full}}])
            ),
            "Burstable"
        );
        assert_eq!(
            qos(
                json!([{"name": "a", "resources": {"requests": full, "limits": full}}, {"name": "b"}])
            ),
            "Burstable"
        );
        assert_eq!(
            qos(json!([{"name": "a", "resources": {"requests": {"example.com/gpu": "1"}}}])),
            "BestEffort"
        );
    }
}
