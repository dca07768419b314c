//! core/v1 Node (`pkg/registry/core/node/strategy.go`, `SetDefaults_NodeStatus` in
//! `pkg/apis/core/v1/defaults.go`, `ValidateNode` in `pkg/apis/core/validation/validation.go`,
//! and `printNode`).
//!
//! STATUS is built from the `Ready` condition and `spec.unschedulable`: `Ready`, `NotReady`,
//! `Unknown` (no Ready condition yet), with `,SchedulingDisabled` for a cordoned node. ROLES come
//! from `node-role.kubernetes.io/<role>` labels.

use super::field::FieldPath;
use super::pod_spec::defaults::default_resource_list;
use super::table::{age_column, column, text};
use super::typed::{KindRules, age};
use super::{FieldError, TableColumn};
use apimachinery::validation::is_qualified_name;
use k8s_openapi::api::core::v1::Node;
use serde_json::Value;
use std::collections::BTreeSet;

/// Whether `value` is an IPv4 or IPv6 CIDR (`IsValidCIDRForLegacyField`, which also takes
/// the non-canonical forms Go's `ParseCIDRSloppy` accepts).
fn is_valid_cidr(value: &str) -> bool {
    if value.parse::<apimachinery::Ipv4Cidr>().is_ok() {
        return true;
    }
    value.split_once('/').is_some_and(|(addr, prefix)| {
        addr.parse::<std::net::Ipv6Addr>().is_ok()
            && prefix.len() <= 3
            && prefix.bytes().all(|b| b.is_ascii_digit())
            && prefix.parse::<u8>().is_ok_and(|p| p <= 128)
    })
}

/// The Node rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct NodeRules;

impl KindRules for NodeRules {
    type Object = Node;
    const STATUS_SUBRESOURCE: bool = true;
    const KEEP_STATUS_ON_CREATE: bool = true;

    fn set_defaults(&self, obj: &mut Node) {
        if let Some(status) = obj.status.as_mut() {
            if status.allocatable.is_none() {
                status.allocatable.clone_from(&status.capacity);
            }
            for list in [&mut status.capacity, &mut status.allocatable]
                .into_iter()
                .flatten()
            {
                default_resource_list(list);
            }
        }
    }

    fn validate(&self, obj: &Node) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let path = FieldPath::new("spec").child("taints");
        for (i, taint) in obj
            .spec
            .iter()
            .flat_map(|s| s.taints.iter().flatten())
            .enumerate()
        {
            let p = path.index(i);
            for msg in is_qualified_name(&taint.key) {
                errs.push(FieldError::invalid(&p.child("key"), &taint.key, &msg));
            }
            let effects = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
            if taint.effect.is_empty() {
                errs.push(FieldError::required(&p.child("effect"), ""));
            } else if !effects.contains(&taint.effect.as_str()) {
                errs.push(FieldError::not_supported(
                    &p.child("effect"),
                    &taint.effect,
                    &effects,
                ));
            }
        }
        let cidrs_path = FieldPath::new("spec").child("podCIDRs");
        let cidrs = obj
            .spec
            .iter()
            .flat_map(|s| s.pod_cidrs.iter().flatten())
            .collect::<Vec<_>>();
        for (i, cidr) in cidrs.iter().enumerate() {
            if !is_valid_cidr(cidr) {
                errs.push(FieldError::invalid(
                    &cidrs_path.index(i),
                    cidr.as_str(),
                    "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
                ));
            }
        }
        if cidrs.len() > 1 {
            let v6 = cidrs.iter().filter(|c| c.contains(':')).count();
            if cidrs.len() > 2 || v6 != 1 {
                errs.push(FieldError::invalid(
                    &cidrs_path,
                    super::field::Rendered(format!(
                        "[]string{{{}}}",
                        cidrs
                            .iter()
                            .map(|c| apimachinery::fmt::go_quote(c))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                    "may specify no more than one CIDR for each IP family",
                ));
            }
        }
        errs
    }

    /// `ValidateNodeUpdate`: `spec.podCIDRs` and `spec.providerID` are set once (the node
    /// IPAM controller and the cloud node controller fill them in) and never changed.
    fn validate_update(&self, new: &Node, old: &Node) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let spec = |n: &Node| n.spec.clone().unwrap_or_default();
        let (new_spec, old_spec) = (spec(new), spec(old));
        let old_cidrs = old_spec.pod_cidrs.unwrap_or_default();
        if !old_cidrs.is_empty() && new_spec.pod_cidrs.unwrap_or_default() != old_cidrs {
            errs.push(FieldError::forbidden(
                &FieldPath::new("spec").child("podCIDRs"),
                "node updates may not change podCIDR except from \"\" to valid",
            ));
        }
        let old_id = old_spec.provider_id.unwrap_or_default();
        if !old_id.is_empty() && new_spec.provider_id.unwrap_or_default() != old_id {
            errs.push(FieldError::forbidden(
                &FieldPath::new("spec").child("providerID"),
                "node updates may not change providerID except from \"\" to valid",
            ));
        }
        errs
    }

    fn selectable_fields(&self, obj: &Node) -> Vec<(&'static str, String)> {
        let unschedulable = obj
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false);
        vec![("spec.unschedulable", unschedulable.to_string())]
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![
            column("Status", "string", "The status of the node", 0),
            column("Roles", "string", "The roles of the node", 0),
            age_column(),
            column(
                "Version",
                "string",
                "Kubelet Version reported by the node.",
                0,
            ),
            column(
                "Internal-IP",
                "string",
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
                1,
            ),
            column(
                "External-IP",
                "string",
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
                1,
            ),
            column(
                "OS-Image",
                "string",
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
                1,
            ),
            column(
                "Kernel-Version",
                "string",
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
                1,
            ),
            column(
                "Container-Runtime",
                "string",
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
                1,
            ),
        ]
    }

    fn table_row(&self, obj: &Node, now: jiff::Timestamp) -> Vec<Value> {
        let status = obj.status.clone().unwrap_or_default();
        let mut states: Vec<String> = status
            .conditions
            .iter()
            .flatten()
            .filter(|c| c.type_ == "Ready")
            .take(1)
            .map(|c| {
                if c.status == "True" {
                    "Ready".to_owned()
                } else {
                    "NotReady".to_owned()
                }
            })
            .collect();
        if states.is_empty() {
            states.push("Unknown".to_owned());
        }
        if obj.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
            states.push("SchedulingDisabled".to_owned());
        }
        let roles = node_roles(obj);
        let info = status.node_info.clone().unwrap_or_default();
        let address = |type_: &str| {
            status
                .addresses
                .iter()
                .flatten()
                .find(|a| a.type_ == type_)
                .map_or_else(|| "<none>".to_owned(), |a| a.address.clone())
        };
        let unknown_if_empty = |s: String| {
            if s.is_empty() {
                "<unknown>".to_owned()
            } else {
                s
            }
        };
        vec![
            text(states.join(",")),
            text(if roles.is_empty() {
                "<none>".to_owned()
            } else {
                roles.join(",")
            }),
            text(age(&obj.metadata, now)),
            text(info.kubelet_version),
            text(address("InternalIP")),
            text(address("ExternalIP")),
            text(unknown_if_empty(info.os_image)),
            text(unknown_if_empty(info.kernel_version)),
            text(unknown_if_empty(info.container_runtime_version)),
        ]
    }
}

/// `findNodeRoles`: `node-role.kubernetes.io/<role>` label keys and `kubernetes.io/role=<role>`
/// label values, sorted.
pub fn node_roles(node: &Node) -> Vec<String> {
    let mut roles = BTreeSet::new();
    for (k, v) in node.metadata.labels.iter().flatten() {
        if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
            if !role.is_empty() {
                roles.insert(role.to_owned());
            }
        } else if k == "kubernetes.io/role" && !v.is_empty() {
            roles.insert(v.clone());
        }
    }
    roles.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use crate::strategy::typed::Typed;
    use serde_json::json;

    fn node(ready: Option<&str>, unschedulable: bool) -> Value {
        let conditions =
            ready.map_or_else(Vec::new, |s| vec![json!({"type": "Ready", "status": s})]);
        json!({
            "metadata": {"name": "node-1", "creationTimestamp": "2024-01-01T00:00:00Z",
                         "labels": {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "worker"}},
            "spec": {"unschedulable": unschedulable},
            "status": {"conditions": conditions,
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                       "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "miniplane", "kernelVersion": "",
                                    "containerRuntimeVersion": "sim://1", "architecture": "amd64", "bootID": "", "machineID": "",
                                    "kubeProxyVersion": "", "operatingSystem": "linux", "systemUUID": ""}}
        })
    }

    #[test]
    fn status_column() {
        let s = Typed(NodeRules);
        let now: jiff::Timestamp = "2024-01-02T00:00:00Z".parse().unwrap();
        assert_eq!(
            s.table_row(&node(Some("True"), false), now)[0],
            json!("Ready")
        );
        assert_eq!(
            s.table_row(&node(Some("False"), false), now)[0],
            json!("NotReady")
        );
        assert_eq!(
            s.table_row(&node(Some("Unknown"), false), now)[0],
            json!("NotReady")
        );
        assert_eq!(s.table_row(&node(None, false), now)[0], json!("Unknown"));
        assert_eq!(
            s.table_row(&node(Some("True"), true), now)[0],
            json!("Ready,SchedulingDisabled")
        );
        assert_eq!(
            s.table_row(&node(Some("True"), false), now),
            vec![
                json!("Ready"),
                json!("control-plane,worker"),
                json!("24h"),
                json!("v1.33.0"),
                json!("10.0.0.1"),
                json!("<none>"),
                json!("miniplane"),
                json!("<unknown>"),
                json!("sim://1")
            ]
        );
        assert_eq!(
            s.selectable_fields(&node(None, true)),
            vec![("spec.unschedulable", "true".to_owned())]
        );
    }

    #[test]
    fn allocatable_defaults_to_capacity_and_taints_are_checked() {
        let s = Typed(NodeRules);
        let mut obj = json!({"metadata": {"name": "n"}, "spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}, "status": {"capacity": {"cpu": "4", "memory": "8192Mi"}}});
        s.default(&mut obj).unwrap();
        assert_eq!(
            obj["status"]["allocatable"],
            json!({"cpu": "4", "memory": "8Gi"})
        );
        let errs: Vec<String> = crate::strategy::messages(&s.validate_create(&obj));
        assert_eq!(
            errs,
            vec![
                "spec.taints[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""
            ]
        );
    }

    #[test]
    fn pod_cidrs_and_provider_id_are_set_once() {
        let s = Typed(NodeRules);
        let bare = json!({"metadata": {"name": "n"}, "spec": {}});
        let with = |spec: Value| json!({"metadata": {"name": "n"}, "spec": spec});
        let assigned = with(
            json!({"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"],
                                   "providerID": "miniplane:///local-1a/i-1"}),
        );
        assert!(
            s.validate_update(&assigned, &bare).is_empty(),
            "from \"\" to valid"
        );
        assert!(s.validate_update(&assigned, &assigned).is_empty());
        let changed = with(
            json!({"podCIDR": "10.244.2.0/24", "podCIDRs": ["10.244.2.0/24"],
                                  "providerID": "miniplane:///local-1a/i-2"}),
        );
        assert_eq!(
            crate::strategy::messages(&s.validate_update(&changed, &assigned)),
            vec![
                "spec.podCIDRs: Forbidden: node updates may not change podCIDR except from \"\" to valid",
                "spec.providerID: Forbidden: node updates may not change providerID except from \"\" to valid",
            ]
        );
        let bad = with(json!({"podCIDRs": ["10.244.1.0", "fd00::/64", "10.1.0.0/16"]}));
        assert_eq!(
            crate::strategy::messages(&s.validate_create(&bad)),
            vec![
                "spec.podCIDRs[0]: Invalid value: \"10.244.1.0\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
                "spec.podCIDRs: Invalid value: []string{\"10.244.1.0\", \"fd00::/64\", \"10.1.0.0/16\"}: may specify no more than one CIDR for each IP family",
            ]
        );
    }
}
