//! The ServiceAccount plugin's decisions, as `plugin/pkg/admission/serviceaccount/
//! admission_test.go` checks them.

use super::*;
use serde_json::json;

fn pod(spec: Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "ns"}, "spec": spec}))
        .expect("a pod")
}

fn sa(automount: Option<bool>) -> ServiceAccount {
    ServiceAccount {
        automount_service_account_token: automount,
        ..Default::default()
    }
}

fn fixed() -> String {
    "kube-api-access-abcde".into()
}

#[test]
fn a_pod_gets_the_default_account_and_the_token_volume_exactly_as_kubernetes_builds_it() {
    let mut p = pod(json!({
        "initContainers": [{"name": "init", "image": "busybox"}],
        "containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "nginx",
            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "volumes": [{"name": "data", "emptyDir": {}}]
    }));
    let decision = admit(&mut p, &sa(None), fixed);
    assert_eq!(
        decision,
        Decision::Mounted {
            service_account: "default".into(),
            volume: "kube-api-access-abcde".into(),
            added: true
        }
    );
    let spec = serde_json::to_value(p.spec.as_ref().expect("a spec")).expect("encodes");
    let mount = json!({"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
        "name": "kube-api-access-abcde", "readOnly": true});
    assert_eq!(spec["serviceAccountName"], "default");
    assert_eq!(spec["initContainers"][0]["volumeMounts"], json!([mount]));
    assert_eq!(spec["containers"][0]["volumeMounts"], json!([mount]));
    assert_eq!(
        spec["containers"][1]["volumeMounts"],
        json!([{"mountPath": "/data", "name": "data"}, mount])
    );
    assert_eq!(
        spec["volumes"][1],
        json!({"name": "kube-api-access-abcde", "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
                {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}, "path": "namespace"}]}}
            ]
        }})
    );
    assert_eq!(
        decision.describe(),
        "default: mounted volume kube-api-access-abcde (added)"
    );
}

#[test]
fn the_pods_choice_wins_over_the_service_accounts() {
    let containers = json!([{"name": "a", "image": "nginx"}]);
    let opted_out = |pod_choice: Option<bool>, sa_choice: Option<bool>| {
        let mut spec = json!({"containers": containers, "serviceAccountName": "builder"});
        if let Some(c) = pod_choice {
            spec["automountServiceAccountToken"] = json!(c);
        }
        let mut p = pod(spec);
        let d = admit(&mut p, &sa(sa_choice), fixed);
        let volumes = p.spec.as_ref().and_then(|s| s.volumes.clone());
        (d, volumes.is_none())
    };
    let not_mounted = |why| Decision::NotMounted {
        service_account: "builder".into(),
        why,
    };
    assert_eq!(
        opted_out(Some(false), Some(true)),
        (not_mounted(NotMounted::PodOptOut), true)
    );
    assert_eq!(
        opted_out(None, Some(false)),
        (not_mounted(NotMounted::ServiceAccountOptOut), true)
    );
    assert!(matches!(
        opted_out(Some(true), Some(false)),
        (Decision::Mounted { .. }, false)
    ));
    assert_eq!(
        not_mounted(NotMounted::ServiceAccountOptOut).describe(),
        "builder: no token volume (automountServiceAccountToken is false on the ServiceAccount)"
    );
}

#[test]
fn a_container_mounting_the_token_path_itself_keeps_its_mount() {
    let own = json!([{"name": "mine", "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH}]);
    let mut p = pod(
        json!({"containers": [{"name": "a", "image": "x", "volumeMounts": own}],
        "volumes": [{"name": "mine", "emptyDir": {}}]}),
    );
    let d = admit(&mut p, &sa(None), fixed);
    assert_eq!(
        d,
        Decision::NotMounted {
            service_account: "default".into(),
            why: NotMounted::AlreadyMounted
        }
    );
    assert_eq!(
        p.spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .map(Vec::len),
        Some(1)
    );

    // A `kube-api-access-*` volume of the pod's own is mounted, not added again.
    let mut p = pod(json!({"containers": [{"name": "a", "image": "x"}],
        "volumes": [{"name": "kube-api-access-mine", "emptyDir": {}}]}));
    let d = admit(&mut p, &sa(None), || unreachable!("no name is generated"));
    assert_eq!(
        d,
        Decision::Mounted {
            service_account: "default".into(),
            volume: "kube-api-access-mine".into(),
            added: false
        }
    );
    assert_eq!(
        p.spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .map(Vec::len),
        Some(1)
    );
}

#[test]
fn the_deprecated_field_names_the_account_and_pull_secrets_come_from_it() {
    let mut p = pod(json!({"containers": [{"name": "a", "image": "x"}], "serviceAccount": "old"}));
    assert_eq!(requested_service_account(&p), "old");
    let account = ServiceAccount {
        image_pull_secrets: Some(vec![LocalObjectReference {
            name: "registry".into(),
        }]),
        ..Default::default()
    };
    admit(&mut p, &account, fixed);
    let spec = p.spec.as_ref().expect("a spec");
    assert_eq!(spec.service_account_name.as_deref(), Some("old"));
    assert_eq!(
        spec.image_pull_secrets.as_deref(),
        Some(
            &[LocalObjectReference {
                name: "registry".into()
            }][..]
        )
    );
}

#[test]
fn mirror_pods_may_not_name_accounts_secrets_or_token_projections() {
    let mirror = |spec: Value| {
        let mut p = pod(spec);
        p.metadata.annotations = Some([(MIRROR_POD_ANNOTATION.to_owned(), "x".to_owned())].into());
        assert!(is_mirror_pod(&p));
        validate_mirror_pod(&p)
    };
    let c = json!([{"name": "a", "image": "x"}]);
    assert_eq!(mirror(json!({"containers": c})), Ok(()));
    assert_eq!(
        mirror(json!({"containers": c, "serviceAccountName": "default"})),
        Err("a mirror pod may not reference service accounts")
    );
    assert_eq!(
        mirror(json!({"containers": [{"name": "a", "image": "x",
            "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]})),
        Err("a mirror pod may not reference secrets")
    );
    assert_eq!(
        mirror(json!({"containers": c, "volumes": [{"name": "v",
            "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]})),
        Err("a mirror pod may not use ServiceAccountToken volume projections")
    );
}

#[test]
fn a_missing_account_is_refused_with_kubernetes_message_and_a_mirror_pod_is_left_alone() {
    let info = crate::registry::Registry::builtin()
        .lookup(&crate::gvk::GroupVersion::new("", "v1"), "pods")
        .expect("pods are built in");
    let missing = ServiceAccountAdmission {
        namespace: "ns".into(),
        lookup: Lookup::Missing("builder".into()),
        trace: None,
    };
    let mut body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
        "spec": {"containers": [{"name": "a", "image": "x"}], "serviceAccountName": "builder"}});
    let err = missing.admit(&info, &mut body, fixed).expect_err("refused");
    assert_eq!(
        err.to_string(),
        "pods \"x\" is forbidden: error looking up service account ns/builder: serviceaccount \"builder\" not found"
    );
    let mut generated = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-"},
        "spec": {"containers": [{"name": "a", "image": "x"}]}});
    let err = missing
        .admit(&info, &mut generated, fixed)
        .expect_err("refused");
    assert!(
        err.to_string().starts_with("pods \"web-\" is forbidden"),
        "{err}"
    );

    let mirror = ServiceAccountAdmission {
        lookup: Lookup::MirrorPod,
        ..missing
    };
    let before = body.clone();
    body["spec"]
        .as_object_mut()
        .expect("a spec")
        .remove("serviceAccountName");
    let unchanged = body.clone();
    mirror.admit(&info, &mut body, fixed).expect("admitted");
    assert_eq!(body, unchanged);
    assert!(mirror.admit(&info, &mut before.clone(), fixed).is_err());
}
