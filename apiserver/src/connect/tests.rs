//! The container choice of connect requests, worded as Kubernetes words it.

use super::*;
use serde_json::json;

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "web-1"}, "spec": spec})).expect("pod")
}

#[test]
fn the_only_container_is_chosen_and_several_need_a_name() {
    let one = pod(json!({"containers": [{"name": "nginx"}]}));
    assert_eq!(validate_container(&one, "", false).expect("one"), "nginx");
    let two = pod(json!({
        "initContainers": [{"name": "setup"}],
        "containers": [{"name": "a"}, {"name": "b"}],
        "ephemeralContainers": [{"name": "debugger"}],
    }));
    let err = validate_container(&two, "", true).expect_err("two");
    assert_eq!(
        err.to_string(),
        "a container name must be specified for pod web-1, choose one of: [a b] or one of the init containers: [setup]"
    );
    assert_eq!(err.code(), axum::http::StatusCode::BAD_REQUEST);
    let err = validate_container(&two, "", false).expect_err("two, logs");
    assert!(
        err.to_string()
            .ends_with(" or one of the ephemeral containers: [debugger]"),
        "{err}"
    );
    for name in ["a", "setup", "debugger"] {
        assert_eq!(validate_container(&two, name, true).expect(name), name);
    }
    assert_eq!(
        validate_container(&two, "c", true)
            .expect_err("unknown")
            .to_string(),
        "container c is not valid for pod web-1"
    );
    let none = pod(json!({"containers": []}));
    assert_eq!(
        validate_container(&none, "", true)
            .expect_err("none")
            .to_string(),
        "pod web-1 does not have any containers"
    );
}

#[test]
fn connect_subresources_are_recognized() {
    for (r, s) in [
        ("pods", "log"),
        ("pods", "exec"),
        ("pods", "attach"),
        ("pods", "portforward"),
        ("nodes", "proxy"),
    ] {
        assert!(is_connect(r, s), "{r}/{s}");
    }
    assert!(!is_connect("pods", "status"));
    assert!(!is_connect("services", "log"));
}

#[test]
fn invalid_log_options_become_a_422_with_causes() {
    let err = invalid_log_options(
        "web-1",
        &[
            "tailLines: Invalid value: -1: must be greater than or equal to 0".into(),
            "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified".into(),
        ],
    );
    assert_eq!(err.code(), axum::http::StatusCode::UNPROCESSABLE_ENTITY);
    let text = err.to_string();
    assert!(
        text.starts_with("PodLogOptions \"web-1\" is invalid: [tailLines: Invalid value: -1: must be greater than or equal to 0"),
        "{text}"
    );
}
