//! End to end: the rbac.authorization.k8s.io/v1 kinds through `miniplane apiserver` and the
//! real kubectl, and the controller-manager's `clusterrole-aggregation` controller.
//!
//! `kubectl create clusterrole|role|rolebinding|clusterrolebinding` (protobuf bodies), the
//! server's tables as `kubectl get` prints them (`NAME CREATED AT` for roles, `NAME ROLE AGE`
//! and the wide subject columns for bindings), `kubectl describe`, discovery and `explain`, an
//! invalid binding refused with kube-apiserver's 422, a binding's `roleRef` that cannot
//! change, server-side apply of a Role; and an aggregated ClusterRole applied with two labelled
//! ClusterRoles, whose rules the controller fills in, follows and empties. The server runs
//! with `--authorization-mode AlwaysAllow` (its default) here; enforcement is `authz`'s.

use crate::support;

use serde_json::Value;
use support::controller_manager::ControllerManager;
use support::{DEADLINE, Server, eventually};

/// The rows of a kubectl table, split on whitespace (the header first).
fn rows(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[test]
fn kubectl_creates_gets_and_describes_roles_and_bindings() {
    let s = Server::start();
    // Discovery: no short names, Kubernetes' scopes.
    let resources = s.kubectl_ok(&[
        "api-resources",
        "--api-group=rbac.authorization.k8s.io",
        "--no-headers",
    ]);
    assert_eq!(
        rows(&resources),
        [
            [
                "clusterrolebindings",
                "rbac.authorization.k8s.io/v1",
                "false",
                "ClusterRoleBinding"
            ],
            [
                "clusterroles",
                "rbac.authorization.k8s.io/v1",
                "false",
                "ClusterRole"
            ],
            [
                "rolebindings",
                "rbac.authorization.k8s.io/v1",
                "true",
                "RoleBinding"
            ],
            ["roles", "rbac.authorization.k8s.io/v1", "true", "Role"],
        ],
        "{resources}"
    );

    assert_eq!(
        s.kubectl_ok(&[
            "create",
            "clusterrole",
            "pod-reader",
            "--verb=get,list,watch",
            "--resource=pods",
        ]),
        "clusterrole.rbac.authorization.k8s.io/pod-reader created\n"
    );
    assert_eq!(
        s.kubectl_ok(&[
            "create",
            "role",
            "pod-writer",
            "--verb=create,delete",
            "--resource=pods,deployments.apps",
            "--resource-name=web",
            "-n",
            "default",
        ]),
        "role.rbac.authorization.k8s.io/pod-writer created\n"
    );
    assert_eq!(
        s.kubectl_ok(&[
            "create",
            "rolebinding",
            "read-pods",
            "--clusterrole=pod-reader",
            "--user=alice",
            "--user=bob",
            "--group=devs",
            "--serviceaccount=default:robot",
            "-n",
            "default",
        ]),
        "rolebinding.rbac.authorization.k8s.io/read-pods created\n"
    );
    assert_eq!(
        s.kubectl_ok(&[
            "create",
            "clusterrolebinding",
            "read-pods-everywhere",
            "--clusterrole=pod-reader",
            "--group=devs",
        ]),
        "clusterrolebinding.rbac.authorization.k8s.io/read-pods-everywhere created\n"
    );

    // Defaults: the binding's roleRef and its User/Group subjects get the RBAC group.
    let binding = s.kubectl_json(&["get", "rolebinding", "read-pods", "-n", "default"]);
    assert_eq!(
        binding["roleRef"],
        serde_json::json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pod-reader"})
    );
    assert_eq!(
        binding["subjects"],
        serde_json::json!([
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"},
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"},
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"},
            {"kind": "ServiceAccount", "name": "robot", "namespace": "default"}
        ])
    );

    // Roles have no printer in Kubernetes: the default table, NAME and CREATED AT.
    let created: String = s.kubectl_ok(&[
        "get",
        "clusterrole",
        "pod-reader",
        "-o",
        "jsonpath={.metadata.creationTimestamp}",
    ]);
    assert_eq!(
        rows(&s.kubectl_ok(&["get", "clusterrole", "pod-reader"])),
        [
            vec!["NAME", "CREATED", "AT"],
            vec!["pod-reader", created.as_str()]
        ]
    );
    let roles = rows(&s.kubectl_ok(&["get", "roles", "-n", "default"]));
    assert_eq!(roles[0], ["NAME", "CREATED", "AT"]);
    assert_eq!(roles[1][0], "pod-writer");
    // Bindings: NAME ROLE AGE, and with -o wide the subjects.
    let table = rows(&s.kubectl_ok(&["get", "rolebinding", "read-pods", "-n", "default"]));
    assert_eq!(table[0], ["NAME", "ROLE", "AGE"]);
    assert_eq!(table[1][..2], ["read-pods", "ClusterRole/pod-reader"]);
    let wide = s.kubectl_ok(&["get", "rolebinding", "-n", "default", "-o", "wide"]);
    let lines: Vec<&str> = wide.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"],
        "{wide}"
    );
    assert!(
        lines[1].starts_with("read-pods   ClusterRole/pod-reader   ")
            && lines[1].ends_with("   alice, bob   devs     default/robot"),
        "{wide}"
    );
    let wide = s.kubectl_ok(&[
        "get",
        "clusterrolebinding",
        "read-pods-everywhere",
        "-o",
        "wide",
    ]);
    let row: Vec<&str> = wide
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        (row[0], row[1], row[3]),
        ("read-pods-everywhere", "ClusterRole/pod-reader", "devs"),
        "{wide}"
    );

    // kubectl's own describers, over what the server returns.
    let described = s.kubectl_ok(&["describe", "role", "pod-writer", "-n", "default"]);
    for line in [
        "Name:         pod-writer",
        "PolicyRule:",
        "  Resources         Non-Resource URLs  Resource Names  Verbs",
        "  pods              []                 [web]           [create delete]",
        "  deployments.apps  []                 [web]           [create delete]",
    ] {
        assert!(
            described.lines().any(|l| l == line),
            "{line:?} in\n{described}"
        );
    }
    let described = s.kubectl_ok(&["describe", "rolebinding", "read-pods", "-n", "default"]);
    for line in [
        "Role:",
        "  Kind:  ClusterRole",
        "  Name:  pod-reader",
        "Subjects:",
        "  ServiceAccount  robot  default",
    ] {
        assert!(
            described.lines().any(|l| l == line),
            "{line:?} in\n{described}"
        );
    }
    let described = s.kubectl_ok(&["describe", "clusterrole", "pod-reader"]);
    assert!(
        described
            .lines()
            .any(|l| l == "  pods       []                 []              [get list watch]"),
        "{described}"
    );

    // The OpenAPI document kubectl explains from.
    let explained = s.kubectl_ok(&["explain", "clusterrole.aggregationRule"]);
    assert!(
        explained.contains("GROUP:      rbac.authorization.k8s.io"),
        "{explained}"
    );
    assert!(explained.contains("KIND:       ClusterRole"), "{explained}");
    assert!(explained.contains("clusterRoleSelectors"), "{explained}");

    // Server-side apply of a Role.
    let role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\n\
                metadata: {name: cm-reader, namespace: default}\n\
                rules:\n- {apiGroups: [\"\"], resources: [configmaps], verbs: [get]}\n";
    assert_eq!(
        s.apply_ok(role, &["--server-side"]),
        "role.rbac.authorization.k8s.io/cm-reader serverside-applied\n"
    );
    let applied = s.kubectl_json(&[
        "get",
        "role",
        "cm-reader",
        "-n",
        "default",
        "--show-managed-fields",
    ]);
    assert_eq!(
        applied["metadata"]["managedFields"][0]["operation"],
        "Apply"
    );
    assert_eq!(applied["rules"][0]["resources"][0], "configmaps");
}

#[test]
fn invalid_bindings_are_refused_as_kube_apiserver_refuses_them() {
    let s = Server::start();
    // A ClusterRoleBinding may only refer to a ClusterRole: kube-apiserver's 422, byte for byte.
    let body = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "x"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"}
    });
    let refused = s.send_json(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        &body,
    );
    assert_eq!(
        refused.text(),
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\
         \"message\":\"ClusterRoleBinding.rbac.authorization.k8s.io \\\"x\\\" is invalid: roleRef.kind: \
         Unsupported value: \\\"Role\\\": supported values: \\\"ClusterRole\\\"\",\"reason\":\"Invalid\",\
         \"details\":{\"name\":\"x\",\"group\":\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRoleBinding\",\
         \"causes\":[{\"reason\":\"FieldValueNotSupported\",\"message\":\"Unsupported value: \\\"Role\\\": \
         supported values: \\\"ClusterRole\\\"\",\"field\":\"roleRef.kind\"}]},\"code\":422}\n"
    );
    assert_eq!(refused.status, 422);
    // Through kubectl, with a ServiceAccount subject that names no namespace too.
    let manifest = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n\
                    metadata: {name: bad}\n\
                    roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}\n\
                    subjects:\n- {kind: ServiceAccount, name: robot}\n";
    let run = s.create_yaml(manifest);
    assert!(!run.ok(), "{run}");
    assert_eq!(
        run.stderr,
        "The ClusterRoleBinding \"bad\" is invalid: \n\
         * roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"\n\
         * subjects[0].namespace: Required value\n",
        "{run}"
    );

    // A binding's roleRef cannot change.
    s.kubectl_ok(&[
        "create",
        "rolebinding",
        "read-pods",
        "--clusterrole=view",
        "--user=alice",
        "-n",
        "default",
    ]);
    let err = s.kubectl_err(&[
        "patch",
        "rolebinding",
        "read-pods",
        "-n",
        "default",
        "--type=merge",
        "-p",
        "{\"roleRef\":{\"name\":\"edit\"}}",
    ]);
    assert_eq!(
        err,
        "The RoleBinding \"read-pods\" is invalid: roleRef: Invalid value: \
         rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: \
         cannot change roleRef\n"
    );
    // Its subjects can.
    s.kubectl_ok(&[
        "patch",
        "rolebinding",
        "read-pods",
        "-n",
        "default",
        "--type=merge",
        "-p",
        "{\"subjects\":[{\"kind\":\"Group\",\"name\":\"devs\"}]}",
    ]);
    let patched = s.kubectl_json(&["get", "rolebinding", "read-pods", "-n", "default"]);
    assert_eq!(
        patched["subjects"][0]["apiGroup"],
        "rbac.authorization.k8s.io"
    );
}

/// The rules of ClusterRole `name`, as JSON (`null` when it has none).
fn rules_of(s: &Server, name: &str) -> Value {
    s.kubectl_json(&["get", "clusterrole", name])["rules"].clone()
}

#[test]
fn aggregated_cluster_roles_gather_the_rules_of_the_roles_they_select() {
    let s = Server::start();
    // The controller-manager with its default controllers: clusterrole-aggregation is one.
    let _cm = ControllerManager::start(&s, "cm", &[]);
    let manifest = r#"apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: monitoring
aggregationRule:
  clusterRoleSelectors:
  - matchLabels:
      rbac.example.com/aggregate-to-monitoring: "true"
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: monitoring-metrics
  labels:
    rbac.example.com/aggregate-to-monitoring: "true"
rules:
- nonResourceURLs: ["/metrics"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["services", "endpoints", "pods"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: monitoring-endpoints
  labels:
    rbac.example.com/aggregate-to-monitoring: "true"
rules:
- apiGroups: [""]
  resources: ["services", "endpoints", "pods"]
  verbs: ["get", "list", "watch"]
"#;
    assert_eq!(
        s.apply_ok(manifest, &[]),
        "clusterrole.rbac.authorization.k8s.io/monitoring created\n\
         clusterrole.rbac.authorization.k8s.io/monitoring-metrics created\n\
         clusterrole.rbac.authorization.k8s.io/monitoring-endpoints created\n"
    );
    let endpoints = serde_json::json!({"apiGroups": [""], "resources": ["services", "endpoints", "pods"],
                                       "verbs": ["get", "list", "watch"]});
    let metrics = serde_json::json!({"nonResourceURLs": ["/metrics"], "verbs": ["get"]});
    // The roles by name (monitoring-endpoints first), each rule once.
    let want = serde_json::json!([endpoints, metrics]);
    eventually("monitoring's rules aggregated", DEADLINE, || {
        (rules_of(&s, "monitoring") == want).then_some(())
    });
    // Written by server-side apply, as the controller's field manager.
    let role = s.kubectl_json(&["get", "clusterrole", "monitoring", "--show-managed-fields"]);
    let managers: Vec<(&str, &str)> = role["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            (
                m["manager"].as_str().unwrap_or_default(),
                m["operation"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        managers.contains(&("clusterrole-aggregation-controller", "Apply")),
        "{managers:?}"
    );
    let described = s.kubectl_ok(&["describe", "clusterrole", "monitoring"]);
    assert!(
        described
            .lines()
            .any(|l| l == "             [/metrics]         []              [get]"),
        "{described}"
    );

    // A role that stops matching takes its rules along; a newly labelled one brings its own.
    s.kubectl_ok(&[
        "label",
        "clusterrole",
        "monitoring-endpoints",
        "rbac.example.com/aggregate-to-monitoring-",
    ]);
    let only_metrics = serde_json::json!([metrics, endpoints]);
    eventually("monitoring-metrics' rules only", DEADLINE, || {
        (rules_of(&s, "monitoring") == only_metrics).then_some(())
    });
    s.kubectl_ok(&[
        "create",
        "clusterrole",
        "node-reader",
        "--verb=list",
        "--resource=nodes",
    ]);
    s.kubectl_ok(&[
        "label",
        "clusterrole",
        "node-reader",
        "rbac.example.com/aggregate-to-monitoring=true",
    ]);
    let nodes = serde_json::json!({"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]});
    let with_nodes = serde_json::json!([metrics, endpoints, nodes]);
    eventually("node-reader's rule added", DEADLINE, || {
        (rules_of(&s, "monitoring") == with_nodes).then_some(())
    });
    // No role selected: no rules left.
    s.kubectl_ok(&["delete", "clusterrole", "monitoring-metrics", "node-reader"]);
    eventually("monitoring's rules emptied", DEADLINE, || {
        rules_of(&s, "monitoring")
            .as_array()
            .is_none_or(Vec::is_empty)
            .then_some(())
    });
}
