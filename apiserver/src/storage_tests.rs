//! Tests of `storage.rs`: keys, encodings, the guaranteed-update loop and the handoff of
//! written objects to the watch caches.

use super::*;
use crate::gvk::GroupVersion;
use crate::registry::Registry;
use serde_json::json;
use store::MemoryBackend;

/// `changes` as it was: the stored encodings compared, the stamp normalized on a copy.
fn changes_by_encoding(traced: bool, old: &Value, new: &Value) -> bool {
    let mut normalized = new.clone();
    if traced {
        request_trace::set_annotation(&mut normalized, request_trace::annotation(old));
    }
    encode(old).expect("encode") != encode(&normalized).expect("encode")
}

#[test]
fn keys_follow_kube_apiservers_layout_and_no_two_resources_share_a_prefix() {
    let registry = Registry::builtin();
    let key = |api_version: &str, plural: &str, ns: Option<&str>| {
        let info = registry
            .lookup(&GroupVersion::parse_api_version(api_version), plural)
            .unwrap_or_else(|| panic!("{api_version} {plural} is built in"));
        prefix(&info, ns)
    };
    assert_eq!(
        key("apps/v1", "deployments", Some("default")),
        "/registry/deployments/default/"
    );
    assert_eq!(key("v1", "pods", None), "/registry/pods/");
    assert_eq!(key("v1", "nodes", Some("ignored")), "/registry/minions/");
    assert_eq!(
        key("v1", "services", Some("a")),
        "/registry/services/specs/a/"
    );
    assert_eq!(
        key("v1", "endpoints", None),
        "/registry/services/endpoints/"
    );
    assert_eq!(
        key("v1", "replicationcontrollers", None),
        "/registry/controllers/"
    );
    assert_eq!(
        key("rbac.authorization.k8s.io/v1", "clusterroles", None),
        "/registry/clusterroles/"
    );
    assert_eq!(
        key("autoscaling/v1", "horizontalpodautoscalers", None),
        key("autoscaling/v2", "horizontalpodautoscalers", None),
        "one storage for every version"
    );
    // Distinct (group, resource) pairs, distinct prefixes, none inside another.
    let mut seen: std::collections::BTreeMap<String, (String, String)> = Default::default();
    for info in registry.snapshot().iter() {
        let gr = (info.gvr.group.clone(), info.gvr.resource.clone());
        let p = prefix(info, None);
        if let Some(other) = seen.get(&p) {
            assert_eq!(other, &gr, "{p} is shared");
        }
        seen.insert(p, gr);
    }
    let prefixes: Vec<&String> = seen.keys().collect();
    for a in &prefixes {
        for b in &prefixes {
            assert!(a == b || !b.starts_with(a.as_str()), "{b} lies inside {a}");
        }
    }
}

#[test]
fn changes_agree_with_comparing_stored_encodings_and_leave_the_object_as_it_was() {
    let stamp = |id: &str| format!("00-{id:0>32}-00f067aa0ba902b7-01");
    let base = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "resourceVersion": "7",
            "annotations": {"a": "b", trace::TRACEPARENT_ANNOTATION: stamp("1")}},
        "spec": {"nodeName": "n1"}, "status": {"phase": "Pending"}
    });
    type Change = Box<dyn Fn(&mut Value)>;
    let variants: Vec<(&str, Change)> = vec![
        ("same", Box::new(|_| {})),
        (
            "another resourceVersion",
            Box::new(|v| v["metadata"]["resourceVersion"] = json!("8")),
        ),
        (
            "no resourceVersion",
            Box::new(|v| {
                v["metadata"]
                    .as_object_mut()
                    .expect("map")
                    .remove("resourceVersion");
            }),
        ),
        (
            "another stamp",
            Box::new(move |v| {
                v["metadata"]["annotations"][trace::TRACEPARENT_ANNOTATION] = json!(stamp("2"));
            }),
        ),
        (
            "no stamp",
            Box::new(|v| {
                v["metadata"]["annotations"]
                    .as_object_mut()
                    .expect("map")
                    .remove(trace::TRACEPARENT_ANNOTATION);
            }),
        ),
        (
            "a status change",
            Box::new(|v| v["status"]["phase"] = json!("Running")),
        ),
        (
            "a status change and another stamp",
            Box::new(move |v| {
                v["status"]["phase"] = json!("Running");
                v["metadata"]["annotations"][trace::TRACEPARENT_ANNOTATION] = json!(stamp("3"));
            }),
        ),
        (
            "another annotation",
            Box::new(|v| v["metadata"]["annotations"]["a"] = json!("c")),
        ),
        ("a new spec field", Box::new(|v| v["spec"]["x"] = json!(0))),
    ];
    let plain = Storage::new(Arc::new(MemoryBackend::new()));
    let traced = plain.traced(Some(Arc::new(request_trace::WriteTrace::for_tests(
        &stamp("9"),
    ))));
    for (name, change) in &variants {
        let mut new = base.clone();
        change(&mut new);
        for (storage, is_traced) in [(&plain, false), (&traced, true)] {
            let mut compared = new.clone();
            let got = storage.changes(&base, &mut compared).expect("compare");
            assert_eq!(
                got,
                changes_by_encoding(is_traced, &base, &new),
                "{name}, traced {is_traced}"
            );
            assert_eq!(compared, new, "{name}: the object is left as it was");
        }
    }
    // The cases above do tell writes apart: a real change is one, a new stamp is not.
    let mut new = base.clone();
    new["metadata"]["annotations"][trace::TRACEPARENT_ANNOTATION] = json!(stamp("2"));
    assert!(!traced.changes(&base, &mut new).expect("compare"));
    assert!(plain.changes(&base, &mut new).expect("compare"));
    new["status"]["phase"] = json!("Running");
    assert!(traced.changes(&base, &mut new).expect("compare"));
}

fn pod(name: &str) -> ObjectRef {
    let info = Registry::builtin()
        .lookup(&GroupVersion::parse_api_version("v1"), "pods")
        .expect("pods are built in");
    ObjectRef {
        info,
        namespace: Some("default".into()),
        name: name.into(),
    }
}

/// A cache holding one object for every key, as of one revision.
struct FixedCache {
    revision: Revision,
    object: Arc<Value>,
}

impl crate::decoded_objects::CurrentObjects for FixedCache {
    fn current(&self, _key: &[u8], revision: Revision) -> Option<Arc<Value>> {
        (revision == self.revision).then(|| self.object.clone())
    }
}

/// The object a (dry-run) update of pod `a` starts from, with `cache` holding the pods.
async fn starting_object(
    storage: &Storage,
    cache: &Arc<dyn crate::decoded_objects::CurrentObjects>,
) -> Value {
    storage
        .handoff()
        .watch_prefix_with("/registry/pods/", Arc::downgrade(cache));
    let mut seen = None;
    storage
        .guaranteed_update(&pod("a"), true, |cur| {
            seen = cur.cloned();
            Ok(Update::Keep(cur.expect("exists").clone()))
        })
        .await
        .expect("update");
    seen.expect("seen")
}

#[tokio::test]
async fn an_update_starts_from_the_cached_object_of_the_revision_it_read() {
    let storage = Storage::new(Arc::new(MemoryBackend::new()));
    let created = storage
        .create(
            &pod("a"),
            json!({"metadata": {"name": "a", "namespace": "default"}, "v": 1}),
        )
        .await
        .expect("create");
    let rev = Revision(
        meta::resource_version(&created)
            .expect("rv")
            .parse()
            .expect("n"),
    );
    // The "cached" object differs from the stored one (no cache would) to show which of
    // the two the update starts from.
    let marked = |v: &str| {
        let mut o = created.clone();
        o["cached"] = json!(v);
        Arc::new(o)
    };
    let at_rev: Arc<dyn crate::decoded_objects::CurrentObjects> = Arc::new(FixedCache {
        revision: rev,
        object: marked("yes"),
    });
    assert_eq!(starting_object(&storage, &at_rev).await["cached"], "yes");
    // A cache at another revision (lagging) is not used: the stored bytes are decoded.
    let stale: Arc<dyn crate::decoded_objects::CurrentObjects> = Arc::new(FixedCache {
        revision: Revision(rev.0 - 1),
        object: marked("stale"),
    });
    assert_eq!(starting_object(&storage, &stale).await, created);
}

#[tokio::test]
async fn a_shared_list_takes_the_cached_objects_of_the_revisions_it_read_only() {
    let storage = Storage::new(Arc::new(MemoryBackend::new()));
    let mut created = Vec::new();
    for name in ["a", "b"] {
        let obj = json!({"metadata": {"name": name, "namespace": "default"}, "v": 1});
        created.push(storage.create(&pod(name), obj).await.expect("create"));
    }
    let rev_of = |o: &Value| Revision(meta::resource_version(o).expect("rv").parse().expect("n"));
    // The cache holds a marked object as of `a`'s revision (no cache would mark it) to show
    // which objects the list took from it; `b` was written later.
    let mut marked = created[0].clone();
    marked["cached"] = json!("yes");
    let cache: Arc<dyn crate::decoded_objects::CurrentObjects> = Arc::new(FixedCache {
        revision: rev_of(&created[0]),
        object: Arc::new(marked.clone()),
    });
    storage
        .handoff()
        .watch_prefix_with("/registry/pods/", Arc::downgrade(&cache));
    let info = pod("a").info;
    let all = |_: &Value| true;
    let page = storage
        .list_shared(&info, "/registry/pods/default/", None, None, 0, &all)
        .await
        .expect("list");
    let items: Vec<Value> = page.items.iter().map(|o| (**o).clone()).collect();
    assert_eq!(items, vec![marked, created[1].clone()]);
    // Continued from `b` at the same revision: only `b`, decoded.
    let page = storage
        .list_shared(
            &info,
            "/registry/pods/default/",
            Some(Bytes::from_static(b"/registry/pods/default/b")),
            Some(page.revision),
            1,
            &all,
        )
        .await
        .expect("list");
    assert_eq!(page.items.len(), 1);
    assert_eq!(*page.items[0], created[1]);
    // The plain list decodes every object.
    let plain = storage
        .list("/registry/pods/default/", None, None, 0, &all)
        .await
        .expect("list");
    assert_eq!(plain.items, created);
}

/// A `decide` that sets `v` on the existing object.
fn set_v(v: i64) -> impl FnMut(Option<&Value>) -> Result<Update> {
    move |cur| {
        let mut cur = cur.expect("exists").clone();
        cur["v"] = json!(v);
        Ok(Update::Put(cur))
    }
}

#[tokio::test]
async fn writes_under_a_watched_prefix_offer_their_object_and_failed_ones_withdraw_it() {
    let storage = Storage::new(Arc::new(MemoryBackend::new()));
    let obj = |v: i64| json!({"metadata": {"name": "a", "namespace": "default"}, "v": v});
    storage.create(&pod("a"), obj(1)).await.expect("create");
    assert_eq!(storage.handoff().held(), 0, "nothing watches pods");

    storage.handoff().watch_prefix("/registry/pods/");
    storage.create(&pod("b"), obj(1)).await.expect("create");
    assert_eq!(storage.handoff().held(), 1, "the create offered its object");
    // An AlreadyExists create withdraws its offer.
    assert!(storage.create(&pod("b"), obj(2)).await.is_err());
    assert_eq!(storage.handoff().held(), 1);
    // An update offers the object it writes.
    let updated = storage
        .guaranteed_update(&pod("a"), false, set_v(3))
        .await
        .expect("update");
    assert_eq!(updated.object["v"], 3);
    assert_eq!(storage.handoff().held(), 2, "the update offered its object");
    // A dry run writes nothing and offers nothing.
    storage
        .guaranteed_update(&pod("a"), true, set_v(4))
        .await
        .expect("dry run");
    assert_eq!(storage.handoff().held(), 2);
}

#[tokio::test]
async fn a_traced_delete_offers_its_trace_context_for_the_deleted_event() {
    let plain = Storage::new(Arc::new(MemoryBackend::new()));
    let tp = "00-0000000000000000000000000000000a-00f067aa0ba902b7-01";
    let traced = plain.traced(Some(Arc::new(request_trace::WriteTrace::for_tests(tp))));
    let obj = json!({"metadata": {"name": "a", "namespace": "default"}});
    plain.create(&pod("a"), obj.clone()).await.expect("create");
    plain.create(&pod("b"), obj).await.expect("create");
    plain.handoff().watch_prefix("/registry/pods/");
    let delete = |cur: Option<&Value>| Ok(Update::Delete(cur.cloned().unwrap_or_default()));
    traced
        .guaranteed_update(&pod("a"), true, delete)
        .await
        .expect("dry run");
    assert_eq!(
        plain.handoff().take_delete(&pod("a").key()),
        None,
        "a dry run offers nothing"
    );
    traced
        .guaranteed_update(&pod("a"), false, delete)
        .await
        .expect("delete");
    assert_eq!(
        plain.handoff().take_delete(&pod("a").key()).as_deref(),
        Some(tp)
    );
    plain
        .guaranteed_update(&pod("b"), false, delete)
        .await
        .expect("delete");
    assert_eq!(
        plain.handoff().take_delete(&pod("b").key()),
        None,
        "not traced"
    );
}

#[tokio::test]
async fn a_json_only_write_returns_the_object_as_json_and_moves_it_to_the_watch_cache() {
    let storage = Storage::new(Arc::new(MemoryBackend::new()));
    let obj = |v: i64| {
        json!({"apiVersion": "v1", "kind": "Pod", "v": v,
               "metadata": {"name": "a", "namespace": "default", "uid": "u"}})
    };
    let stored_bytes = |storage: &Storage| {
        let storage = storage.clone();
        async move {
            let kv = storage.backend().get(&pod("a").key(), None).await;
            kv.expect("get").kv.expect("stored")
        }
    };
    // Nothing watches pods: the object is returned (there is no cache to move it to).
    let json_only = storage.answering_with_json();
    let (object, json) = json_only.create_with_json(&pod("a"), obj(1)).await.unwrap();
    let json: Value = serde_json::from_slice(&json.expect("json")).expect("JSON");
    assert_eq!(object, json, "the JSON is the created object");
    assert!(
        meta::resource_version(&json).is_some(),
        "with its resourceVersion"
    );
    // Watched: the object is moved to the cache, the JSON is the object with its version.
    storage.handoff().watch_prefix("/registry/pods/");
    let updated = json_only
        .guaranteed_update(&pod("a"), false, set_v(2))
        .await
        .expect("update");
    assert_eq!(updated.object, Value::Null, "moved");
    let kv = stored_bytes(&storage).await;
    let (mut offered, _) = storage.handoff().take(&kv.value).expect("offered");
    meta::set_meta_str(
        &mut offered,
        MetaField::ResourceVersion,
        Some(&kv.mod_revision.0.to_string()),
    );
    let json = updated.json.expect("json");
    assert_eq!(crate::wire::to_vec(&offered), json.to_vec());
    assert_eq!(offered["v"], 2);
    // A storage that needs the object keeps it, and answers with the same JSON.
    let updated = storage
        .guaranteed_update(&pod("a"), false, set_v(3))
        .await
        .expect("update");
    assert_eq!(updated.object["v"], 3);
    assert_eq!(
        crate::wire::to_vec(&updated.object),
        updated.json.expect("json").to_vec()
    );
    assert_eq!(storage.handoff().held(), 1, "and offers a copy");
}
