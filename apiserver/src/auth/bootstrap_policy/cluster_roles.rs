//! The ClusterRoles of `policy.go` (`ClusterRoles()`, with `viewRules` and `editRules`; the
//! components' rules are in `component_rules.rs`), in the order Go builds them.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{AggregationRule, ClusterRole};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::FeatureGates;
use super::component_rules::{
    kube_scheduler_rules, kubelet_api_admin_rules, node_proxier_rules, node_rules,
};
use super::rules::{
    APPS, AUTHENTICATION, AUTHORIZATION, AUTOSCALING, BATCH, CERTIFICATES, COORDINATION, DISCOVERY,
    EXTENSIONS, KUBE_APISERVER_CLIENT_KUBELET_SIGNER, KUBE_APISERVER_CLIENT_SIGNER,
    KUBELET_SERVING_SIGNER, LEGACY, LEGACY_UNKNOWN_SIGNER, NETWORKING, POLICY, RBAC, READ,
    READ_UPDATE, READ_WRITE, RESOURCE, Rule, STORAGE, WRITE, bootstrap_metadata, build_all,
    cluster_role, events_rule, rule,
};

/// The label that aggregates a ClusterRole into `admin`.
const AGGREGATE_TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
/// The label that aggregates a ClusterRole into `edit`.
const AGGREGATE_TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
/// The label that aggregates a ClusterRole into `view`.
const AGGREGATE_TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

/// The name of the kubelets' role (`systemNodeRoleName`).
pub(super) const SYSTEM_NODE: &str = "system:node";

/// The ClusterRoles of `ClusterRoles()` under `gates`, in Go's order.
pub(super) fn cluster_roles(gates: &FeatureGates) -> Vec<ClusterRole> {
    let mut monitoring_rules = vec![rule(&["get"]).urls(&[
        "/metrics",
        "/metrics/slis",
        "/livez",
        "/readyz",
        "/healthz",
        "/livez/*",
        "/readyz/*",
        "/healthz/*",
    ])];
    if gates.component_flagz {
        monitoring_rules.push(rule(&["get"]).urls(&["/flagz"]));
    }
    if gates.component_statusz {
        monitoring_rules.push(rule(&["get"]).urls(&["/statusz"]));
    }

    let mut roles = vec![
        // A "root" role which can do absolutely anything.
        cluster_role(
            "cluster-admin",
            vec![
                rule(&["*"]).groups(&["*"]).resources(&["*"]),
                rule(&["*"]).urls(&["*"]),
            ],
        ),
        // Just enough power to determine whether the server is ready and to discover API
        // versions for negotiation.
        cluster_role(
            "system:discovery",
            vec![rule(&["get"]).urls(&[
                "/livez",
                "/readyz",
                "/healthz",
                "/version",
                "/version/",
                "/openapi",
                "/openapi/*",
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
            ])],
        ),
        // Minimal read access to the monitoring endpoints; the splatted health checks allow
        // reading individual checks, which may say more about the cluster.
        cluster_role("system:monitoring", monitoring_rules),
        // Minimal access for a "normal" user to learn about themselves.
        cluster_role(
            "system:basic-user",
            vec![
                rule(&["create"])
                    .groups(&[AUTHORIZATION])
                    .resources(&["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
                rule(&["create"])
                    .groups(&[AUTHENTICATION])
                    .resources(&["selfsubjectreviews"]),
            ],
        ),
        // Just enough power to read insensitive cluster information.
        cluster_role(
            "system:public-info-viewer",
            vec![rule(&["get"]).urls(&["/livez", "/readyz", "/healthz", "/version", "/version/"])],
        ),
        // A namespace-level admin: `edit` plus the power to grant permissions to others.
        aggregated("admin", None, AGGREGATE_TO_ADMIN),
        // A namespace-level editor: every user-level action in a namespace, but not the
        // "privileged" resources of the system (`/status`, quota, limits).
        aggregated("edit", Some(AGGREGATE_TO_ADMIN), AGGREGATE_TO_EDIT),
        // Namespace-level read-only access to non-escalating resources.
        aggregated("view", Some(AGGREGATE_TO_EDIT), AGGREGATE_TO_VIEW),
        labeled(
            "system:aggregate-to-admin",
            AGGREGATE_TO_ADMIN,
            vec![
                // Additional admin powers.
                rule(&["create"])
                    .groups(&[AUTHORIZATION])
                    .resources(&["localsubjectaccessreviews"]),
                rule(READ_WRITE)
                    .groups(&[RBAC])
                    .resources(&["roles", "rolebindings"]),
            ],
        ),
        labeled(
            "system:aggregate-to-edit",
            AGGREGATE_TO_EDIT,
            edit_rules(gates),
        ),
        labeled(
            "system:aggregate-to-view",
            AGGREGATE_TO_VIEW,
            view_rules(gates),
        ),
        // Heapster's connections back to the API server.
        cluster_role(
            "system:heapster",
            vec![
                rule(READ)
                    .groups(&[LEGACY])
                    .resources(&["events", "pods", "nodes", "namespaces"]),
                rule(READ).groups(&[EXTENSIONS]).resources(&["deployments"]),
            ],
        ),
        // What nodes need to run pods.
        cluster_role(SYSTEM_NODE, node_rules(gates)),
        // The node-problem-detector's access; not bound, as its deployments vary.
        cluster_role(
            "system:node-problem-detector",
            vec![
                rule(&["get"]).groups(&[LEGACY]).resources(&["nodes"]),
                rule(&["patch"])
                    .groups(&[LEGACY])
                    .resources(&["nodes/status"]),
                events_rule(),
            ],
        ),
        // Bootstrapping a node's client certificate: create a CSR and watch it get signed.
        cluster_role(
            "system:node-bootstrapper",
            vec![
                rule(&["create", "get", "list", "watch"])
                    .groups(&[CERTIFICATES])
                    .resources(&["certificatesigningrequests"]),
            ],
        ),
        // Delegating authentication and authorization (these creates are non-mutating).
        cluster_role(
            "system:auth-delegator",
            vec![
                rule(&["create"])
                    .groups(&[AUTHENTICATION])
                    .resources(&["tokenreviews"]),
                rule(&["create"])
                    .groups(&[AUTHORIZATION])
                    .resources(&["subjectaccessreviews"]),
            ],
        ),
        // The API aggregator must see every Service to know whether the ones it points to
        // exist.
        cluster_role(
            "system:kube-aggregator",
            vec![
                rule(READ)
                    .groups(&[LEGACY])
                    .resources(&["services", "endpoints"]),
            ],
        ),
        // Bootstrapping the kube-controller-manager: its shared informers and the
        // ServiceAccounts and Secrets of the controllers' own identities.
        cluster_role(
            "system:kube-controller-manager",
            vec![
                events_rule(),
                // Leader election.
                rule(&["create"])
                    .groups(&[COORDINATION])
                    .resources(&["leases"]),
                rule(&["get", "update"])
                    .groups(&[COORDINATION])
                    .resources(&["leases"])
                    .names(&["kube-controller-manager"]),
                // Fundamental resources.
                rule(&["create"])
                    .groups(&[LEGACY])
                    .resources(&["secrets", "serviceaccounts"]),
                rule(&["delete"]).groups(&[LEGACY]).resources(&["secrets"]),
                rule(&["get"]).groups(&[LEGACY]).resources(&[
                    "namespaces",
                    "secrets",
                    "serviceaccounts",
                    "configmaps",
                ]),
                rule(&["update"])
                    .groups(&[LEGACY])
                    .resources(&["secrets", "serviceaccounts"]),
                // Checking API access (non-mutating creates).
                rule(&["create"])
                    .groups(&[AUTHENTICATION])
                    .resources(&["tokenreviews"]),
                rule(&["create"])
                    .groups(&[AUTHORIZATION])
                    .resources(&["subjectaccessreviews"]),
                // All shared informers.
                rule(&["list", "watch"]).groups(&["*"]).resources(&["*"]),
                rule(&["create"])
                    .groups(&[LEGACY])
                    .resources(&["serviceaccounts/token"]),
            ],
        ),
        // The kube-dns pod.
        cluster_role(
            "system:kube-dns",
            vec![
                rule(&["list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["endpoints", "services"]),
            ],
        ),
        // An external (out-of-tree) PersistentVolume provisioner.
        cluster_role(
            "system:persistent-volume-provisioner",
            vec![
                rule(&["get", "list", "watch", "create", "delete"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumes"]),
                // update, besides reading, sets lock annotations on PVCs.
                rule(&["get", "list", "watch", "update"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumeclaims"]),
                rule(READ).groups(&[STORAGE]).resources(&["storageclasses"]),
                // Watching provisioning success and failure events.
                rule(&["watch"]).groups(&[LEGACY]).resources(&["events"]),
                events_rule(),
            ],
        ),
        // Makes the csrapprover controller approve a node client CSR.
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            vec![
                rule(&["create"])
                    .groups(&[CERTIFICATES])
                    .resources(&["certificatesigningrequests/nodeclient"]),
            ],
        ),
        // Makes the csrapprover controller approve a node client CSR the node itself asked
        // for.
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            vec![
                rule(&["create"])
                    .groups(&[CERTIFICATES])
                    .resources(&["certificatesigningrequests/selfnodeclient"]),
            ],
        ),
        cluster_role(
            "system:volume-scheduler",
            vec![
                rule(READ_UPDATE)
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumes"]),
                rule(READ).groups(&[STORAGE]).resources(&["storageclasses"]),
                rule(READ_UPDATE)
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumeclaims"]),
            ],
        ),
        approver(
            "system:certificates.k8s.io:legacy-unknown-approver",
            LEGACY_UNKNOWN_SIGNER,
        ),
        approver(
            "system:certificates.k8s.io:kubelet-serving-approver",
            KUBELET_SERVING_SIGNER,
        ),
        approver(
            "system:certificates.k8s.io:kube-apiserver-client-approver",
            KUBE_APISERVER_CLIENT_SIGNER,
        ),
        approver(
            "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
            KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
        ),
        // Reading the ServiceAccount issuer discovery endpoints; the slash-ended URLs serve
        // clients generated from OpenAPI documents published before the trailing slash was
        // fixed.
        cluster_role(
            "system:service-account-issuer-discovery",
            vec![rule(&["get"]).urls(&[
                "/.well-known/openid-configuration",
                "/.well-known/openid-configuration/",
                "/openid/v1/jwks",
                "/openid/v1/jwks/",
            ])],
        ),
        // Full access to the kubelet API.
        cluster_role("system:kubelet-api-admin", kubelet_api_admin_rules(gates)),
        // kube-proxy's role.
        cluster_role("system:node-proxier", node_proxier_rules(gates)),
        cluster_role("system:kube-scheduler", kube_scheduler_rules(gates)),
    ];

    // Reading ClusterTrustBundle objects.
    if gates.cluster_trust_bundle {
        roles.push(cluster_role(
            "system:cluster-trust-bundle-discovery",
            vec![
                rule(READ)
                    .groups(&[CERTIFICATES])
                    .resources(&["clustertrustbundles"]),
            ],
        ));
    }
    roles
}

/// A ClusterRole whose rules the aggregation controller fills from the ClusterRoles labelled
/// `aggregate_from: "true"`; it is itself labelled `label: "true"` when given.
fn aggregated(name: &str, label: Option<&str>, aggregate_from: &str) -> ClusterRole {
    let labels: Vec<(&str, &str)> = label.map(|l| (l, "true")).into_iter().collect();
    ClusterRole {
        metadata: bootstrap_metadata(name, None, &labels),
        aggregation_rule: Some(AggregationRule {
            cluster_role_selectors: Some(vec![LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    aggregate_from.to_string(),
                    "true".to_string(),
                )])),
                match_expressions: None,
            }]),
        }),
        rules: None,
    }
}

/// A ClusterRole labelled `label: "true"` (to be aggregated into another) with these rules.
fn labeled(name: &str, label: &str, rules: Vec<Rule>) -> ClusterRole {
    ClusterRole {
        metadata: bootstrap_metadata(name, None, &[(label, "true")]),
        rules: Some(build_all(rules)),
        aggregation_rule: None,
    }
}

/// A ClusterRole allowing to approve the CSRs of one signer.
fn approver(name: &str, signer: &str) -> ClusterRole {
    cluster_role(
        name,
        vec![
            rule(&["approve"])
                .groups(&[CERTIFICATES])
                .resources(&["signers"])
                .names(&[signer]),
        ],
    )
}

/// The rules of `system:aggregate-to-view` (`viewRules()`): reading the non-escalating
/// resources of a namespace.
fn view_rules(gates: &FeatureGates) -> Vec<Rule> {
    let mut rules = vec![
        rule(READ).groups(&[LEGACY]).resources(&[
            "pods",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/status",
            "endpoints",
            "persistentvolumeclaims",
            "persistentvolumeclaims/status",
            "configmaps",
        ]),
        rule(READ).groups(&[LEGACY]).resources(&[
            "limitranges",
            "resourcequotas",
            "bindings",
            "events",
            "pods/status",
            "resourcequotas/status",
            "namespaces/status",
            "replicationcontrollers/status",
            "pods/log",
        ]),
        // Reading namespaces at namespace scope means reading *this* namespace: an indicator
        // of which namespaces one has access to.
        rule(READ).groups(&[LEGACY]).resources(&["namespaces"]),
        rule(READ)
            .groups(&[DISCOVERY])
            .resources(&["endpointslices"]),
        rule(READ).groups(&[APPS]).resources(&[
            "controllerrevisions",
            "statefulsets",
            "statefulsets/status",
            "statefulsets/scale",
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/status",
            "deployments/scale",
            "replicasets",
            "replicasets/status",
            "replicasets/scale",
        ]),
        rule(READ).groups(&[AUTOSCALING]).resources(&[
            "horizontalpodautoscalers",
            "horizontalpodautoscalers/status",
        ]),
        rule(READ).groups(&[BATCH]).resources(&[
            "jobs",
            "cronjobs",
            "cronjobs/status",
            "jobs/status",
        ]),
        rule(READ).groups(&[EXTENSIONS]).resources(&[
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "ingresses",
            "ingresses/status",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "replicationcontrollers/scale",
            "networkpolicies",
        ]),
        rule(READ)
            .groups(&[POLICY])
            .resources(&["poddisruptionbudgets", "poddisruptionbudgets/status"]),
        rule(READ).groups(&[NETWORKING]).resources(&[
            "networkpolicies",
            "ingresses",
            "ingresses/status",
        ]),
    ];
    if gates.dynamic_resource_allocation {
        rules.push(rule(READ).groups(&[RESOURCE]).resources(&[
            "resourceclaims",
            "resourceclaims/status",
            "resourceclaimtemplates",
        ]));
    }
    rules
}

/// The rules of `system:aggregate-to-edit` (`editRules()`): every user-level change in a
/// namespace.
fn edit_rules(gates: &FeatureGates) -> Vec<Rule> {
    let mut rules = vec![
        // Reading the escalating resources.
        rule(READ).groups(&[LEGACY]).resources(&[
            "pods/attach",
            "pods/proxy",
            "pods/exec",
            "pods/portforward",
            "secrets",
            "services/proxy",
        ]),
        rule(&["impersonate"])
            .groups(&[LEGACY])
            .resources(&["serviceaccounts"]),
        rule(WRITE).groups(&[LEGACY]).resources(&[
            "pods",
            "pods/attach",
            "pods/proxy",
            "pods/exec",
            "pods/portforward",
        ]),
        rule(&["create"])
            .groups(&[LEGACY])
            .resources(&["pods/eviction"]),
        rule(WRITE).groups(&[LEGACY]).resources(&[
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/proxy",
            "persistentvolumeclaims",
            "configmaps",
            "secrets",
            "events",
        ]),
        rule(&["create"])
            .groups(&[LEGACY])
            .resources(&["serviceaccounts/token"]),
        rule(WRITE).groups(&[APPS]).resources(&[
            "statefulsets",
            "statefulsets/scale",
            "daemonsets",
            "deployments",
            "deployments/scale",
            "deployments/rollback",
            "replicasets",
            "replicasets/scale",
        ]),
        rule(WRITE)
            .groups(&[AUTOSCALING])
            .resources(&["horizontalpodautoscalers"]),
        rule(WRITE)
            .groups(&[BATCH])
            .resources(&["jobs", "cronjobs"]),
        rule(WRITE).groups(&[EXTENSIONS]).resources(&[
            "daemonsets",
            "deployments",
            "deployments/scale",
            "deployments/rollback",
            "ingresses",
            "replicasets",
            "replicasets/scale",
            "replicationcontrollers/scale",
            "networkpolicies",
        ]),
        rule(WRITE)
            .groups(&[POLICY])
            .resources(&["poddisruptionbudgets"]),
        rule(WRITE)
            .groups(&[NETWORKING])
            .resources(&["networkpolicies", "ingresses"]),
        rule(READ_WRITE)
            .groups(&[COORDINATION])
            .resources(&["leases"]),
    ];
    if gates.dynamic_resource_allocation {
        rules.push(
            rule(WRITE)
                .groups(&[RESOURCE])
                .resources(&["resourceclaims", "resourceclaimtemplates"]),
        );
    }
    rules
}
