//! The rules of the control-plane components' and nodes' ClusterRoles in `policy.go`:
//! `system:node` (`NodeRules()`), `system:kubelet-api-admin`, `system:node-proxier` and
//! `system:kube-scheduler`, each with its feature-gated additions.

use super::FeatureGates;
use super::rules::{
    APPS, AUTHENTICATION, AUTHORIZATION, CERTIFICATES, COORDINATION, DISCOVERY, EXTENSIONS, LEGACY,
    NETWORKING, NODE, POLICY, READ, READ_UPDATE, READ_WRITE, RESOURCE, Rule, STORAGE, events_rule,
    rule,
};

/// The rules of `system:node` (`NodeRules()`). The Node authorizer and the NodeRestriction
/// admission plugin narrow most of them to the objects of the node's own pods.
pub(super) fn node_rules(gates: &FeatureGates) -> Vec<Rule> {
    let mut rules = vec![
        // Checking API access (non-mutating creates).
        rule(&["create"])
            .groups(&[AUTHENTICATION])
            .resources(&["tokenreviews"]),
        rule(&["create"])
            .groups(&[AUTHORIZATION])
            .resources(&["subjectaccessreviews", "localsubjectaccessreviews"]),
        // The Service lister, for the Service environment variables of pods.
        rule(READ).groups(&[LEGACY]).resources(&["services"]),
        // Registering the Node object and reporting its status.
        rule(&["create", "get", "list", "watch"])
            .groups(&[LEGACY])
            .resources(&["nodes"]),
        rule(&["update", "patch"])
            .groups(&[LEGACY])
            .resources(&["nodes/status"]),
        rule(&["update", "patch"])
            .groups(&[LEGACY])
            .resources(&["nodes"]),
        rule(&["create", "update", "patch"])
            .groups(&[LEGACY])
            .resources(&["events"]),
        // Pods bound to the node (the Node authorizer limits get, list and watch).
        rule(READ).groups(&[LEGACY]).resources(&["pods"]),
        // Mirror pods.
        rule(&["create", "delete"])
            .groups(&[LEGACY])
            .resources(&["pods"]),
        // The status of the node's pods.
        rule(&["update", "patch"])
            .groups(&[LEGACY])
            .resources(&["pods/status"]),
        // Evictions of the node's pods.
        rule(&["create"])
            .groups(&[LEGACY])
            .resources(&["pods/eviction"]),
        // Secrets and ConfigMaps for volumes, environment variables and image pull secrets.
        rule(&["get", "list", "watch"])
            .groups(&[LEGACY])
            .resources(&["secrets", "configmaps"]),
        // Persistent volumes.
        rule(&["get"])
            .groups(&[LEGACY])
            .resources(&["persistentvolumeclaims", "persistentvolumes"]),
        // glusterfs volumes.
        rule(&["get"]).groups(&[LEGACY]).resources(&["endpoints"]),
        // The kubelet's CSRs, to rotate its own certificate.
        rule(&["create", "get", "list", "watch"])
            .groups(&[CERTIFICATES])
            .resources(&["certificatesigningrequests"]),
        // Leases.
        rule(&["get", "create", "update", "patch", "delete"])
            .groups(&[COORDINATION])
            .resources(&["leases"]),
        // CSI.
        rule(&["get"])
            .groups(&[STORAGE])
            .resources(&["volumeattachments"]),
        // Tokens of the ServiceAccounts of the node's pods.
        rule(&["create"])
            .groups(&[LEGACY])
            .resources(&["serviceaccounts/token"]),
        // The status of the PVCs of the node's pods.
        rule(&["get", "update", "patch"])
            .groups(&[LEGACY])
            .resources(&["persistentvolumeclaims/status"]),
        // CSI.
        rule(&["get", "watch", "list"])
            .groups(&[STORAGE])
            .resources(&["csidrivers"]),
        rule(&["get", "create", "update", "patch", "delete"])
            .groups(&[STORAGE])
            .resources(&["csinodes"]),
        // RuntimeClass.
        rule(&["get", "list", "watch"])
            .groups(&[NODE])
            .resources(&["runtimeclasses"]),
    ];
    if gates.dynamic_resource_allocation {
        rules.push(
            rule(&["get"])
                .groups(&[RESOURCE])
                .resources(&["resourceclaims"]),
        );
        rules.push(
            rule(&["deletecollection"])
                .groups(&[RESOURCE])
                .resources(&["resourceslices"]),
        );
    }
    // The pemTrustAnchors volume type.
    if gates.cluster_trust_bundle {
        rules.push(
            rule(&["get", "list", "watch"])
                .groups(&[CERTIFICATES])
                .resources(&["clustertrustbundles"]),
        );
    }
    // ServiceAccount tokens for the credential provider.
    if gates.kubelet_service_account_token_for_credential_providers {
        rules.push(
            rule(&["get"])
                .groups(&[LEGACY])
                .resources(&["serviceaccounts"]),
        );
    }
    rules
}

/// The rules of `system:kubelet-api-admin`: every call to the kubelet API.
pub(super) fn kubelet_api_admin_rules(gates: &FeatureGates) -> Vec<Rule> {
    let mut rules = vec![
        rule(&["get", "list", "watch"])
            .groups(&[LEGACY])
            .resources(&["nodes"]),
        rule(&["proxy"]).groups(&[LEGACY]).resources(&["nodes"]),
        rule(&["*"]).groups(&[LEGACY]).resources(&[
            "nodes/proxy",
            "nodes/metrics",
            "nodes/stats",
            "nodes/log",
        ]),
    ];
    if gates.kubelet_fine_grained_authz {
        rules.push(rule(&["*"]).groups(&[LEGACY]).resources(&[
            "nodes/pods",
            "nodes/healthz",
            "nodes/configz",
        ]));
    }
    rules
}

/// The rules of `system:node-proxier` (kube-proxy).
pub(super) fn node_proxier_rules(gates: &FeatureGates) -> Vec<Rule> {
    let mut rules = vec![
        rule(&["list", "watch"])
            .groups(&[LEGACY])
            .resources(&["services", "endpoints"]),
        rule(&["get", "list", "watch"])
            .groups(&[LEGACY])
            .resources(&["nodes"]),
        events_rule(),
    ];
    if gates.multi_cidr_service_allocator {
        rules.push(
            rule(&["list", "watch"])
                .groups(&[NETWORKING])
                .resources(&["servicecidrs"]),
        );
    }
    rules.push(
        rule(&["list", "watch"])
            .groups(&[DISCOVERY])
            .resources(&["endpointslices"]),
    );
    rules
}

/// The rules of `system:kube-scheduler`.
pub(super) fn kube_scheduler_rules(gates: &FeatureGates) -> Vec<Rule> {
    let mut rules = vec![
        events_rule(),
        // Leader election.
        rule(&["create"])
            .groups(&[COORDINATION])
            .resources(&["leases"]),
        rule(&["get", "update", "list", "watch"])
            .groups(&[COORDINATION])
            .resources(&["leases"])
            .names(&["kube-scheduler"]),
        rule(READ_WRITE)
            .groups(&[COORDINATION])
            .resources(&["leasecandidates"]),
        // Fundamental resources.
        rule(READ).groups(&[LEGACY]).resources(&["nodes"]),
        rule(&["get", "list", "watch", "delete"])
            .groups(&[LEGACY])
            .resources(&["pods"]),
        rule(&["create"])
            .groups(&[LEGACY])
            .resources(&["pods/binding", "bindings"]),
        rule(&["patch", "update"])
            .groups(&[LEGACY])
            .resources(&["pods/status"]),
        // Things that select pods.
        rule(READ)
            .groups(&[LEGACY])
            .resources(&["services", "replicationcontrollers"]),
        rule(READ)
            .groups(&[APPS, EXTENSIONS])
            .resources(&["replicasets"]),
        rule(READ).groups(&[APPS]).resources(&["statefulsets"]),
        // Things pods use or that apply to them.
        rule(READ)
            .groups(&[POLICY])
            .resources(&["poddisruptionbudgets"]),
        rule(READ)
            .groups(&[LEGACY])
            .resources(&["persistentvolumeclaims", "persistentvolumes"]),
        // Checking API access (non-mutating creates).
        rule(&["create"])
            .groups(&[AUTHENTICATION])
            .resources(&["tokenreviews"]),
        rule(&["create"])
            .groups(&[AUTHORIZATION])
            .resources(&["subjectaccessreviews"]),
        // Volume limits.
        rule(READ).groups(&[STORAGE]).resources(&["csinodes"]),
        rule(&["get", "list", "watch"])
            .groups(&[STORAGE])
            .resources(&["volumeattachments"]),
        // The namespaceSelector of pod affinity.
        rule(READ).groups(&[LEGACY]).resources(&["namespaces"]),
        rule(READ).groups(&[STORAGE]).resources(&["csidrivers"]),
        rule(READ)
            .groups(&[STORAGE])
            .resources(&["csistoragecapacities"]),
    ];
    // Dynamic resource allocation. (Go tests DynamicResourceAllocation again, not
    // DRADeviceTaints, before adding devicetaintrules; mirrored as written.)
    if gates.dynamic_resource_allocation {
        rules.extend([
            rule(READ).groups(&[RESOURCE]).resources(&["deviceclasses"]),
            rule(READ_UPDATE)
                .groups(&[RESOURCE])
                .resources(&["resourceclaims"]),
            rule(READ_UPDATE)
                .groups(&[RESOURCE])
                .resources(&["resourceclaims/status"]),
            rule(READ_UPDATE)
                .groups(&[LEGACY])
                .resources(&["pods/finalizers"]),
            rule(READ)
                .groups(&[RESOURCE])
                .resources(&["resourceslices"]),
            rule(READ)
                .groups(&[RESOURCE])
                .resources(&["devicetaintrules"]),
        ]);
    }
    rules
}
