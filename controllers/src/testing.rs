//! Shared test helpers: a fixed clock and small builders.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, Pod, PodCondition, PodIP, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};

/// `t0 + secs`, with t0 a fixed instant (tests never read the clock).
pub fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).expect("in range")
}

/// A pod's conditions when Ready since `since` (None: no Ready condition).
pub fn ready_since(since: Option<i64>) -> Option<Vec<PodCondition>> {
    since.map(|s| {
        vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            last_transition_time: Some(Time(at(s))),
            ..Default::default()
        }]
    })
}

/// Metadata of an object `name` in `default`, UID `uid-<name>`, generation 1.
pub fn object_meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some("default".into()),
        uid: Some(format!("uid-{name}")),
        generation: Some(1),
        ..Default::default()
    }
}

/// A selector matching `labels` exactly.
pub fn selector_for(labels: &std::collections::BTreeMap<String, String>) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels.clone()),
        ..Default::default()
    }
}

/// A pod template with `labels` and one container `c` running `image`.
pub fn pod_template(
    labels: &std::collections::BTreeMap<String, String>,
    image: &str,
) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels.clone()),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                image: Some(image.into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
    }
}

/// `{"app": app}`.
pub fn app_labels(app: &str) -> std::collections::BTreeMap<String, String> {
    std::collections::BTreeMap::from([("app".to_owned(), app.to_owned())])
}

/// Pod `web-<i>` on `node-1` with IP `10.244.<i/250>.<i%250+1>`, ready unless `!ready`.
pub fn service_pod(i: usize, ready: bool) -> Pod {
    let ip = format!("10.244.{}.{}", i / 250, i % 250 + 1);
    Pod {
        metadata: ObjectMeta {
            labels: Some(app_labels("web")),
            ..object_meta(&format!("web-{i}"))
        },
        spec: Some(PodSpec {
            node_name: Some("node-1".into()),
            containers: vec![Container {
                name: "c".into(),
                ports: Some(vec![ContainerPort {
                    name: Some("http".into()),
                    container_port: 8080,
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            pod_ip: Some(ip.clone()),
            pod_ips: Some(vec![PodIP { ip }]),
            conditions: if ready { ready_since(Some(1)) } else { None },
            ..Default::default()
        }),
    }
}

/// An annotation's value.
pub fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// The first way `cmp` fails to be a total order over `items` (reflexive, antisymmetric,
/// transitive), as a message naming the items' indices; `None` when it is one. Rust's sorts
/// need a total order and may panic without one.
pub fn total_order_violation<T>(
    items: &[T],
    cmp: impl Fn(&T, &T) -> std::cmp::Ordering,
) -> Option<String> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let n = items.len();
    for a in 0..n {
        if cmp(&items[a], &items[a]) != Equal {
            return Some(format!("{a} is not equal to itself"));
        }
        for b in 0..n {
            let ab = cmp(&items[a], &items[b]);
            if ab != cmp(&items[b], &items[a]).reverse() {
                return Some(format!("{a} vs {b} is {ab:?} both ways round"));
            }
            for c in 0..n {
                let (bc, ac) = (cmp(&items[b], &items[c]), cmp(&items[a], &items[c]));
                let broken = match (ab, bc) {
                    (Less, Less) | (Less, Equal) | (Equal, Less) => ac != Less,
                    (Greater, Greater) | (Greater, Equal) | (Equal, Greater) => ac != Greater,
                    (Equal, Equal) => ac != Equal,
                    _ => false,
                };
                if broken {
                    return Some(format!("{a} {ab:?} {b} {bc:?} {c} but {a} {ac:?} {c}"));
                }
            }
        }
    }
    None
}
