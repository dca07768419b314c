//! Tests of strategic merge patch against a Deployment as the API server stores it.

use super::*;
use crate::gvk::GroupVersionKind;
use serde_json::json;

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "nginx", "namespace": "default", "uid": "u1", "resourceVersion": "1045",
            "generation": 1,
            "labels": {"app": "nginx"},
            "annotations": {
                "deployment.kubernetes.io/revision": "1",
                "kubectl.kubernetes.io/last-applied-configuration": "{}\n"
            },
            "finalizers": ["a", "b"]
        },
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "nginx"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {
                    "containers": [
                        {
                            "name": "nginx", "image": "nginx:1.14.2",
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "env": [{"name": "A", "value": "1"}],
                            "imagePullPolicy": "IfNotPresent"
                        },
                        {"name": "sidecar", "image": "busybox", "args": ["sleep", "1d"]}
                    ],
                    "restartPolicy": "Always"
                }
            }
        },
        "status": {"replicas": 3}
    })
}

fn smp(original: &Value, patch: Value) -> Value {
    let gvk = GroupVersionKind::new("apps", "v1", "Deployment");
    apply(original, &patch, Schema::builtin(&gvk)).expect("patch applies")
}

fn containers(obj: &Value) -> &Vec<Value> {
    obj["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers")
}

fn names(list: &[Value]) -> Vec<&str> {
    list.iter().filter_map(|c| c["name"].as_str()).collect()
}

/// The body of `kubectl apply -f deploy2.yaml` (appendix C, `05-apply-changed`).
#[test]
fn kubectl_apply_three_way_patch() {
    let last = "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"annotations\":{},\"labels\":{\"app\":\"nginx\"},\"name\":\"nginx\",\"namespace\":\"default\"},\"spec\":{\"replicas\":3,\"selector\":{\"matchLabels\":{\"app\":\"nginx\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"nginx\"}},\"spec\":{\"containers\":[{\"image\":\"nginx:1.16.1\",\"name\":\"nginx\",\"ports\":[{\"containerPort\":80}]}]}}}}\n";
    let patch = json!({
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": last}},
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "nginx"}, {"name": "sidecar"}],
            "containers": [{"image": "nginx:1.16.1", "name": "nginx"}]
        }}}
    });
    let got = smp(&deployment(), patch);
    let nginx = &containers(&got)[0];
    assert_eq!(nginx["image"], "nginx:1.16.1");
    assert_eq!(
        nginx["ports"],
        json!([{"containerPort": 80, "protocol": "TCP"}]),
        "ports kept"
    );
    assert_eq!(names(containers(&got)), ["nginx", "sidecar"]);
    assert_eq!(
        got["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
        last
    );
    assert_eq!(
        got["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "1"
    );
    assert!(
        got.to_string().find('$').is_none(),
        "no directive left: {got}"
    );
}

/// The body of `kubectl set image deploy/nginx nginx=nginx:1.25` (appendix C, `18-set-image`).
#[test]
fn kubectl_set_image() {
    let mut live = deployment();
    containers_mut(&mut live).truncate(1);
    let patch = json!({"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"nginx"}],"containers":[{"image":"nginx:1.25","name":"nginx"}]}}}});
    let got = smp(&live, patch);
    assert_eq!(containers(&got).len(), 1);
    assert_eq!(containers(&got)[0]["image"], "nginx:1.25");
    assert_eq!(
        containers(&got)[0]["env"],
        json!([{"name": "A", "value": "1"}])
    );
}

fn containers_mut(obj: &mut Value) -> &mut Vec<Value> {
    obj["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
}

/// The body of `kubectl edit` changing replicas (appendix C, `25-edit-change`).
#[test]
fn kubectl_edit() {
    let got = smp(
        &deployment(),
        json!({"spec":{"replicas":4},"status":{"replicas":4}}),
    );
    assert_eq!(got["spec"]["replicas"], 4);
    assert_eq!(got["status"]["replicas"], 4);
    assert_eq!(got["spec"]["template"], deployment()["spec"]["template"]);
}

#[test]
fn env_merges_by_name() {
    let patch = json!({"spec":{"template":{"spec":{"containers":[
        {"name":"nginx","env":[{"name":"B","value":"2"},{"name":"A","value":"9"}]}
    ]}}}});
    let got = smp(&deployment(), patch);
    assert_eq!(
        containers(&got)[0]["env"],
        json!([{"name":"B","value":"2"},{"name":"A","value":"9"}]),
        "patch order wins for patched elements"
    );
    assert_eq!(
        names(containers(&got)),
        ["nginx", "sidecar"],
        "sidecar untouched"
    );
}

#[test]
fn new_container_is_appended_and_args_are_replaced() {
    let patch = json!({"spec":{"template":{"spec":{"containers":[
        {"name":"sidecar","args":["sleep","2d"]},
        {"name":"extra","image":"redis"}
    ]}}}});
    let got = smp(&deployment(), patch);
    assert_eq!(names(containers(&got)), ["nginx", "sidecar", "extra"]);
    assert_eq!(containers(&got)[1]["args"], json!(["sleep", "2d"]));
    assert_eq!(containers(&got)[1]["image"], "busybox");
}

#[test]
fn patch_delete_removes_an_element() {
    let patch =
        json!({"spec":{"template":{"spec":{"containers":[{"name":"sidecar","$patch":"delete"}]}}}});
    let got = smp(&deployment(), patch);
    assert_eq!(names(containers(&got)), ["nginx"]);
}

#[test]
fn set_element_order_reorders() {
    let patch = json!({"spec":{"template":{"spec":{
        "$setElementOrder/containers":[{"name":"sidecar"},{"name":"nginx"}]
    }}}});
    let got = smp(&deployment(), patch);
    assert_eq!(names(containers(&got)), ["sidecar", "nginx"]);
}

#[test]
fn patch_replace_on_list_and_map() {
    let patch = json!({"metadata":{"labels":{"$patch":"replace","tier":"web"}},
        "spec":{"template":{"spec":{"containers":[{"$patch":"replace"},{"name":"only","image":"x"}]}}}});
    let got = smp(&deployment(), patch);
    assert_eq!(got["metadata"]["labels"], json!({"tier":"web"}));
    assert_eq!(names(containers(&got)), ["only"]);
}

#[test]
fn retain_keys_drops_unlisted_members() {
    let patch = json!({"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate"}}});
    let got = smp(&deployment(), patch);
    assert_eq!(got["spec"]["strategy"], json!({"type":"Recreate"}));
    let bad = json!({"spec":{"strategy":{"$retainKeys":["type"],"rollingUpdate":{}}}});
    let gvk = GroupVersionKind::new("apps", "v1", "Deployment");
    assert!(matches!(
        apply(&deployment(), &bad, Schema::builtin(&gvk)),
        Err(PatchError::BadRequest(_))
    ));
}

#[test]
fn primitive_lists_merge_as_sets_and_delete() {
    let got = smp(&deployment(), json!({"metadata":{"finalizers":["c","a"]}}));
    // Patch elements in patch order, interleaved with live-only ones by live position.
    assert_eq!(got["metadata"]["finalizers"], json!(["c", "a", "b"]));
    let got = smp(
        &deployment(),
        json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["a"]}}),
    );
    assert_eq!(got["metadata"]["finalizers"], json!(["b"]));
}

#[test]
fn null_deletes_and_maps_merge() {
    let got = smp(
        &deployment(),
        json!({"metadata":{"labels":{"app":null,"tier":"web"}}}),
    );
    assert_eq!(got["metadata"]["labels"], json!({"tier":"web"}));
}

#[test]
fn missing_merge_key_is_invalid() {
    let gvk = GroupVersionKind::new("apps", "v1", "Deployment");
    let patch = json!({"spec":{"template":{"spec":{"containers":[{"image":"x"}]}}}});
    let err = apply(&deployment(), &patch, Schema::builtin(&gvk));
    assert!(
        matches!(err, Err(PatchError::Invalid(m)) if m.contains("does not contain declared merge key: name"))
    );
}

#[test]
fn without_schema_lists_are_replaced() {
    let got = apply(
        &deployment(),
        &json!({"spec":{"template":{"spec":{"containers":[{"name":"x"}]}}}}),
        None,
    )
    .expect("applies");
    assert_eq!(containers(&got), &vec![json!({"name":"x"})]);
}

/// `kubectl apply` after removing the sidecar and a port from the manifest.
#[test]
fn kubectl_apply_removing_a_container_and_a_port() {
    let mut live = deployment();
    containers_mut(&mut live)[0]["ports"] = json!([
        {"containerPort": 80, "protocol": "TCP"},
        {"containerPort": 8080, "protocol": "TCP"}
    ]);
    let patch = json!({"spec":{"template":{"spec":{
        "$setElementOrder/containers":[{"name":"nginx"}],
        "containers":[
            {"$setElementOrder/ports":[{"containerPort":80}],"name":"nginx","ports":[{"$patch":"delete","containerPort":8080}]},
            {"$patch":"delete","name":"sidecar"}
        ]
    }}}});
    let got = smp(&live, patch);
    assert_eq!(names(containers(&got)), ["nginx"]);
    assert_eq!(
        containers(&got)[0]["ports"],
        json!([{"containerPort": 80, "protocol": "TCP"}])
    );
    assert!(!got.to_string().contains('$'), "{got}");
}

/// Like Kubernetes, `$patch: merge` is refused in maps and lists (merging is the default).
#[test]
fn patch_merge_directive_is_refused() {
    let gvk = GroupVersionKind::new("apps", "v1", "Deployment");
    let in_map = json!({"metadata":{"labels":{"$patch":"merge","a":"b"}}});
    assert!(matches!(
        apply(&deployment(), &in_map, Schema::builtin(&gvk)),
        Err(PatchError::BadRequest(m)) if m.starts_with("unknown patch type: merge in map")
    ));
    let in_list = json!({"spec":{"template":{"spec":{"containers":[{"$patch":"merge"}]}}}});
    assert_eq!(
        apply(&deployment(), &in_list, Schema::builtin(&gvk)),
        Err(PatchError::Invalid(
            "merging lists cannot yet be specified in the patch".into()
        ))
    );
}
