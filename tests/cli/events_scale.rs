//! `miniplane scale` (through the scale subresource) and `miniplane events` (the same table
//! as `kubectl events`, oldest first, `--for`, `-A`, `--types`, `-w`).

use crate::support::{DEADLINE, Server, deployment_yaml, namespace_yaml};

#[test]
fn scale_through_the_scale_subresource() {
    let s = Server::start();
    s.apply_ok(&deployment_yaml("web", 2, "nginx:1.25"), &[]);
    assert_eq!(
        s.cli_ok(&["scale", "deploy/web", "--replicas", "5"]),
        "deployment.apps/web scaled\n"
    );
    assert_eq!(
        s.kubectl_ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"]),
        "5"
    );
    assert_eq!(
        s.cli_ok(&["scale", "deployment", "web", "--replicas=0"]),
        "deployment.apps/web scaled\n"
    );
    assert_eq!(
        s.kubectl_ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"]),
        "0"
    );
}

/// An Event about `kind/name` in `namespace`, first seen `first_ago` seconds ago, last seen
/// `last_ago` seconds ago, `count` times.
fn event_yaml(
    name: &str,
    namespace: &str,
    (kind, object): (&str, &str),
    (type_, reason): (&str, &str),
    (first_ago, last_ago, count): (i64, i64, i32),
) -> String {
    let at = |ago: i64| {
        jiff::Timestamp::now()
            .checked_sub(jiff::SignedDuration::from_secs(ago))
            .unwrap()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    };
    let api_version = if kind == "Deployment" {
        "apps/v1"
    } else {
        "v1"
    };
    format!(
        "apiVersion: v1\nkind: Event\nmetadata: {{name: {name}, namespace: {namespace}}}\n\
         involvedObject: {{apiVersion: {api_version}, kind: {kind}, name: {object}, namespace: {namespace}}}\n\
         type: {type_}\nreason: {reason}\nmessage: '{reason} happened to {object}'\n\
         source: {{component: test}}\n\
         firstTimestamp: '{}'\nlastTimestamp: '{}'\ncount: {count}\n",
        at(first_ago),
        at(last_ago)
    )
}

#[test]
fn events_like_kubectl_events() {
    let s = Server::start();
    s.apply_ok(&namespace_yaml("other"), &[]);
    for yaml in [
        event_yaml(
            "e1",
            "default",
            ("Deployment", "web"),
            ("Normal", "ScalingReplicaSet"),
            (3600, 3600, 1),
        ),
        event_yaml(
            "e2",
            "default",
            ("Pod", "web-1"),
            ("Warning", "BackOff"),
            (7200, 600, 3),
        ),
        event_yaml(
            "e3",
            "other",
            ("Pod", "db-1"),
            ("Normal", "Pulled"),
            (3000, 3000, 1),
        ),
    ] {
        let run = s.create_yaml(&yaml);
        assert!(run.ok(), "{run}");
    }
    assert_eq!(
        s.cli_ok(&["events"]),
        "LAST SEEN            TYPE      REASON              OBJECT           MESSAGE\n\
         60m                  Normal    ScalingReplicaSet   Deployment/web   ScalingReplicaSet happened to web\n\
         10m (x3 over 120m)   Warning   BackOff             Pod/web-1        BackOff happened to web-1\n"
    );
    for args in [
        &["events"][..],
        &["events", "-A"],
        &["events", "--for", "deploy/web"],
        &["events", "--for", "pod/web-1"],
        &["events", "-n", "other"],
        &["events", "--types", "Warning"],
    ] {
        assert_eq!(s.cli_ok(args), s.kubectl_ok(args), "{args:?}");
    }
    let warnings = s.cli_ok(&["events", "--types", "Warning"]);
    assert_eq!(warnings.lines().count(), 2, "{warnings}");
    assert!(warnings.contains(" BackOff "), "{warnings}");
    s.apply_ok(&namespace_yaml("quiet"), &[]);
    let none = s.cli(&["events", "-n", "quiet"]);
    assert!(none.ok(), "{none}");
    assert_eq!(none.stderr, "No events found in quiet namespace.\n");

    let mut watch = s.cli_spawn(&["events", "-n", "other", "-w"]);
    watch.wait_line("the listed event", DEADLINE, |l| l.contains("Pod/db-1"));
    let run = s.create_yaml(&event_yaml(
        "e4",
        "other",
        ("Pod", "db-2"),
        ("Normal", "Started"),
        (0, 0, 1),
    ));
    assert!(run.ok(), "{run}");
    watch.wait_line("the new event", DEADLINE, |l| {
        l.contains("Pod/db-2") && l.contains("Started happened to db-2")
    });
}
