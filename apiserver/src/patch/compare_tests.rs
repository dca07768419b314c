//! Tests that [`compare`] (the side-by-side walk) gives exactly what [`compare_by_sets`] (the
//! definition over whole field sets) gives, on representative objects and on many random edits
//! of them, with and without a schema.

use super::*;
use crate::gvk::GroupVersionKind;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

fn schema(kind: &str) -> OptSchema<'static> {
    let gvk = match kind {
        "Deployment" => GroupVersionKind::new("apps", "v1", "Deployment"),
        other => GroupVersionKind::new("", "v1", other),
    };
    Schema::builtin(&gvk)
}

fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web", "tier": "fe"},
            "annotations": {"a": "b"}, "finalizers": ["x/y"], "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u1", "controller": true}]},
        "spec": {"nodeName": "n1", "containers": [
            {"name": "nginx", "image": "nginx:1", "ports": [{"containerPort": 80, "protocol": "TCP"}],
             "resources": {}, "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
            {"name": "side", "image": "busybox", "args": ["sleep", "1"]}],
            "tolerations": [{"key": "k", "operator": "Exists"}], "volumes": []},
        "status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "nginx", "ready": true, "restartCount": 0, "image": "nginx:1", "imageID": "", "state": {"running": {}}}],
            "podIP": "10.0.0.1", "hostIP": null}})
}

fn deployment() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                {"name": "nginx", "image": "nginx:1", "ports": [{"containerPort": 80}]}]}}},
        "status": {"replicas": 3, "conditions": [{"type": "Available", "status": "True"}]}})
}

fn configmap() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "default", "labels": {"app": "bench"}},
        "data": {"config.yaml": "x", "other": "y"}, "binaryData": {}})
}

/// The objects the random tests edit, each with its schema (and a pod without one).
fn bases() -> [(Value, OptSchema<'static>); 4] {
    [
        (pod(), schema("Pod")),
        (deployment(), schema("Deployment")),
        (configmap(), schema("ConfigMap")),
        (pod(), None),
    ]
}

fn assert_same(old: &Value, new: &Value, schema: OptSchema<'_>) {
    let fast = compare(old, new, schema);
    let slow = compare_by_sets(old, new, schema);
    let show = |c: &Comparison| {
        format!(
            "added {:?}\nremoved {:?}\nmodified {:?}",
            c.added.paths(),
            c.removed.paths(),
            c.modified.paths()
        )
    };
    assert!(
        fast.added == slow.added && fast.removed == slow.removed && fast.modified == slow.modified,
        "old {old}\nnew {new}\nwalk:\n{}\nsets:\n{}",
        show(&fast),
        show(&slow)
    );
}

/// A random value of a random JSON shape (small).
fn random_value(rng: &mut StdRng, depth: u32) -> Value {
    match rng.random_range(0..if depth > 2 { 5 } else { 8 }) {
        0 => Value::Null,
        1 => json!(rng.random_range(0..3)),
        2 => json!(["a", "b", "c"][rng.random_range(0..3)]),
        3 => json!(rng.random_bool(0.5)),
        4 => json!({}),
        5 => json!([]),
        6 => {
            let mut map = Map::new();
            for _ in 0..rng.random_range(1..4) {
                let key = ["name", "image", "type", "x", "containerPort"][rng.random_range(0..5)];
                map.insert(key.into(), random_value(rng, depth + 1));
            }
            Value::Object(map)
        }
        _ => Value::Array(
            (0..rng.random_range(1..4))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
    }
}

/// Changes one random node of `value`: replaces it, removes it, adds a member or element, or
/// duplicates a list element (two elements with one key).
fn mutate(value: &mut Value, rng: &mut StdRng) {
    let descend = rng.random_bool(0.75);
    match value {
        Value::Object(map) if !map.is_empty() && descend => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = &keys[rng.random_range(0..keys.len())];
            if let Some(child) = map.get_mut(key) {
                mutate(child, rng);
            }
        }
        Value::Array(list) if !list.is_empty() && descend => {
            let i = rng.random_range(0..list.len());
            mutate(&mut list[i], rng);
        }
        Value::Object(map) => match rng.random_range(0..3) {
            0 if !map.is_empty() => {
                let keys: Vec<String> = map.keys().cloned().collect();
                map.remove(&keys[rng.random_range(0..keys.len())]);
            }
            1 => {
                let key = ["name", "image", "new", "resources", "type"][rng.random_range(0..5)];
                map.insert(key.into(), random_value(rng, 1));
            }
            _ => *value = random_value(rng, 1),
        },
        Value::Array(list) => match rng.random_range(0..4) {
            0 if !list.is_empty() => {
                list.remove(rng.random_range(0..list.len()));
            }
            1 if !list.is_empty() => {
                let copy = list[rng.random_range(0..list.len())].clone();
                list.push(copy);
            }
            2 => {
                let i = rng.random_range(0..=list.len());
                list.insert(i, random_value(rng, 1));
            }
            _ => list.reverse(),
        },
        _ => *value = random_value(rng, 1),
    }
}

#[test]
fn representative_writes_compare_as_by_sets() {
    let s = schema("Pod");
    let mut status = pod();
    status["status"]["phase"] = json!("Succeeded");
    status["status"]["conditions"][0]["status"] = json!("False");
    assert_same(&pod(), &status, s);
    let mut image = pod();
    image["spec"]["containers"][0]["image"] = json!("nginx:2");
    image["metadata"]["labels"]["new"] = json!("x");
    assert_same(&pod(), &image, s);
    assert_same(&json!({}), &pod(), s);
    assert_same(&pod(), &json!({}), s);
    assert_same(&pod(), &pod(), s);
    let mut scaled = deployment();
    scaled["spec"]["replicas"] = json!(5);
    assert_same(&deployment(), &scaled, schema("Deployment"));
    assert_same(&json!({}), &configmap(), schema("ConfigMap"));
    let mut data = configmap();
    data["data"]["config.yaml"] = json!("z");
    data["data"].as_object_mut().map(|d| d.remove("other"));
    assert_same(&configmap(), &data, schema("ConfigMap"));
    assert_same(&configmap(), &data, None);
}

#[test]
fn random_edits_compare_as_by_sets() {
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let bases = bases();
    for _ in 0..400 {
        for (base, s) in &bases {
            let mut old = base.clone();
            for _ in 0..rng.random_range(0..3) {
                mutate(&mut old, &mut rng);
            }
            let mut new = old.clone();
            for _ in 0..rng.random_range(1..4) {
                mutate(&mut new, &mut rng);
            }
            assert_same(&old, &new, *s);
            assert_same(&new, &old, *s);
        }
    }
}

#[test]
fn set_operations_match_their_path_by_path_definitions() {
    let mut rng = StdRng::seed_from_u64(7);
    for _ in 0..200 {
        let mut a = pod();
        let mut b = pod();
        for _ in 0..rng.random_range(1..5) {
            mutate(&mut a, &mut rng);
            mutate(&mut b, &mut rng);
        }
        let a = field_set_lenient(&a, schema("Pod"));
        let b = field_set_lenient(&b, schema("Pod"));
        let rebuilt = |paths: Vec<Path>| {
            let mut set = Set::new();
            for p in paths {
                set.insert(&p);
            }
            set
        };
        let (ap, bp) = (a.paths(), b.paths());
        let union: Vec<Path> = ap.iter().chain(&bp).cloned().collect();
        assert_eq!(a.union(&b), rebuilt(union));
        let diff: Vec<Path> = ap.iter().filter(|p| !b.has(p)).cloned().collect();
        assert_eq!(a.difference(&b), rebuilt(diff));
        let both: Vec<Path> = ap.iter().filter(|p| b.has(p)).cloned().collect();
        assert_eq!(a.intersection(&b), rebuilt(both));
        let short: Vec<Path> = ap.iter().filter(|p| p.len() < 4).cloned().collect();
        assert_eq!(a.filter(|p| p.len() < 4), rebuilt(short));
    }
}

/// The field set by its definition, path by path (what [`walk`] built before it built sets
/// bottom-up): every leaf, map entry, list element and (in compare mode) empty value inserts
/// its whole path from the root.
fn paths_by_definition(
    value: &Value,
    schema: OptSchema<'_>,
    mode: Mode,
    path: &mut Path,
    out: &mut Set,
) {
    match value {
        Value::Object(_) if is_atomic_map(schema) => out.insert(path),
        Value::Object(map) => {
            for (name, child) in map {
                path.push(PathElement::Field(name.clone()));
                paths_by_definition(child, field(schema, name), mode, path, out);
                let map_entry = schema.is_some_and(|s| !s.declares(name));
                let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                if map_entry || (mode == Mode::Compare && empty) {
                    out.insert(path);
                }
                path.pop();
            }
        }
        Value::Array(list) if !list_is_atomic(schema) => {
            let kind = list_type(schema);
            for (index, item) in list.iter().enumerate() {
                path.push(item_element_lenient(item, index, &kind, schema));
                paths_by_definition(item, items(schema), mode, path, out);
                out.insert(path);
                path.pop();
            }
        }
        _ => out.insert(path),
    }
}

#[test]
fn field_sets_built_bottom_up_equal_their_path_by_path_definition() {
    let mut rng = StdRng::seed_from_u64(11);
    let bases = bases();
    // Two elements of one name share one node, whose members merge.
    let mut duplicated = pod();
    duplicated["spec"]["containers"][1]["name"] = json!("nginx");
    let mut checked = 0;
    for round in 0..300 {
        for (base, s) in &bases {
            let mut value = if round == 0 {
                duplicated.clone()
            } else {
                base.clone()
            };
            for _ in 0..rng.random_range(0..4) {
                mutate(&mut value, &mut rng);
            }
            for mode in [Mode::Apply, Mode::Compare] {
                let mut expected = Set::new();
                paths_by_definition(&value, *s, mode, &mut Vec::new(), &mut expected);
                match walk(&value, *s, mode) {
                    Ok((_, built)) => {
                        assert_eq!(built, expected, "{value}");
                        checked += 1;
                    }
                    // Only an applied configuration must name its elements by their keys.
                    Err(e) => assert!(mode == Mode::Apply, "{}", e.describe()),
                }
            }
        }
    }
    assert!(checked > 1_500, "only {checked} walks compared");
    // The leaf flag is the root's own membership: a scalar is a leaf, an object is not.
    assert!(walk(&json!(3), None, Mode::Compare).is_ok_and(|(leaf, set)| leaf && set.is_empty()));
    assert!(walk(&pod(), schema("Pod"), Mode::Compare).is_ok_and(|(leaf, _)| !leaf));
}

#[test]
fn moving_set_operations_match_their_path_by_path_definitions() {
    let mut rng = StdRng::seed_from_u64(13);
    for _ in 0..200 {
        let (mut a, mut b) = (pod(), pod());
        for _ in 0..rng.random_range(1..5) {
            mutate(&mut a, &mut rng);
            mutate(&mut b, &mut rng);
        }
        let a = field_set_lenient(&a, schema("Pod"));
        let b = field_set_lenient(&b, schema("Pod"));
        let mut owned = a.clone();
        owned.union_with_owned(b.clone());
        assert_eq!(owned, a.union(&b));
        for prefix in [
            vec![],
            vec![PathElement::Field("spec".into())],
            vec![
                PathElement::Field("status".into()),
                PathElement::Field("new".into()),
            ],
        ] {
            for member in [false, true] {
                let mut moved = a.clone();
                moved.insert_moved_under(&prefix, member, b.clone());
                // By definition: each path of `b` below `prefix`, and `prefix` itself.
                let mut inserted = a.clone();
                for path in b.paths() {
                    inserted.insert(&[prefix.as_slice(), path.as_slice()].concat());
                }
                if member {
                    inserted.insert(&prefix);
                }
                assert_eq!(moved, inserted, "prefix {prefix:?}, member {member}");
            }
        }
    }
    // Nothing to add adds no node, not even an empty one.
    let mut set = Set::new();
    set.insert_moved_under(&[PathElement::Field("a".into())], false, Set::new());
    set.add_child(PathElement::Field("b".into()), false, Set::new());
    assert!(set.is_empty());
}
