use super::*;

#[test]
fn reserve_selects_the_node_and_the_next_decision_sees_it() {
    let nodes = nodes();
    let pod = pod_with_claims("db-0", &["data"]);
    let mut volumes = cache(
        vec![claim("data", "standard", "1Gi")],
        vec![],
        vec![standard()],
    );
    let reserved = reserve(&info(pod.clone()), snapshot(&nodes, &volumes), "node-2")
        .expect("reserve")
        .expect("a claim to provision");
    let [pvc] = reserved.dynamic_provisions.as_slice() else {
        panic!("one claim: {reserved:?}");
    };
    assert_eq!(
        pvc.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANN_SELECTED_NODE))
            .map(String::as_str),
        Some("node-2")
    );
    assume(&mut volumes, &reserved);
    // A second pod sharing the claim goes to the same node.
    let other = pod_with_claims("db-1", &["data"]);
    assert_eq!(
        verdicts(&other, &nodes, &volumes),
        vec![
            fails(&[ERR_REASON_BIND_CONFLICT]),
            fails(&[ERR_REASON_BIND_CONFLICT]),
            Ok(())
        ]
    );
    // Unreserve forgets the assumption.
    unreserve(&mut volumes, &reserved);
    assert_eq!(verdicts(&other, &nodes, &volumes), vec![Ok(()); 3]);
}

#[test]
fn the_api_object_replaces_an_assumed_one_only_when_newer() {
    let mut volumes = cache(
        vec![claim("data", "standard", "1Gi")],
        vec![],
        vec![standard()],
    );
    let assumed = Arc::new(super::binder::with_selected_node(
        &claim("data", "standard", "1Gi"),
        "node-1",
    ));
    volumes.assume_pvc(assumed.clone());
    // An older event (resync of an earlier version) keeps the assumption.
    let mut older = claim("data", "standard", "1Gi");
    older.metadata.resource_version = Some("9".into());
    volumes.set_pvc(Arc::new(older));
    assert_eq!(volumes.pvc("default", "data"), Some(&assumed));
    assert_ne!(volumes.api_pvc("default", "data"), Some(&assumed));
    // The PATCH comes back with a newer version: that is what decisions see now.
    let mut patched =
        super::binder::with_selected_node(&claim("data", "standard", "1Gi"), "node-1");
    patched.metadata.resource_version = Some("11".into());
    let patched = Arc::new(patched);
    volumes.set_pvc(patched.clone());
    assert_eq!(volumes.pvc("default", "data"), Some(&patched));
}

#[test]
fn pre_bind_waits_until_the_pv_controller_bound_every_claim() {
    let node_labels = labels(&[(HOSTNAME, "node-1")]);
    let mut patched =
        super::binder::with_selected_node(&claim("data", "standard", "1Gi"), "node-1");
    patched.metadata.resource_version = Some("11".into());
    let volumes = PodVolumes {
        static_bindings: vec![],
        dynamic_provisions: vec![Arc::new(patched.clone())],
    };
    // The informer has not delivered our PATCH yet.
    let cache_now = cache(
        vec![claim("data", "standard", "1Gi")],
        vec![],
        vec![standard()],
    );
    assert_eq!(
        check_bindings("node-1", Some(&node_labels), &volumes, &cache_now),
        Ok(false)
    );
    // Delivered, not provisioned yet.
    let mut cache_now = VolumeCache::new();
    cache_now.set_pvc(Arc::new(patched.clone()));
    assert_eq!(
        check_bindings("node-1", Some(&node_labels), &volumes, &cache_now),
        Ok(false)
    );
    // Provisioned and bound, its volume on node-1.
    let mut done = bound(patched.clone(), "pvc-uid-data");
    done.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(ANN_SELECTED_NODE.into(), "node-1".into());
    done.metadata.resource_version = Some("12".into());
    cache_now.set_pvc(Arc::new(done.clone()));
    cache_now.set_pv(Arc::new(volume(
        "pvc-uid-data",
        "standard",
        "1Gi",
        HOSTNAME,
        "node-1",
    )));
    assert_eq!(
        check_bindings("node-1", Some(&node_labels), &volumes, &cache_now),
        Ok(true)
    );
    // The provisioner gave up and removed selected-node: scheduling is retried.
    let mut failed = patched;
    failed.metadata.resource_version = Some("13".into());
    if let Some(a) = failed.metadata.annotations.as_mut() {
        a.remove(ANN_SELECTED_NODE);
    }
    cache_now.set_pvc(Arc::new(failed));
    assert_eq!(
        check_bindings("node-1", Some(&node_labels), &volumes, &cache_now).map_err(|e| e.0),
        Err("provisioning failed for PVC \"data\"".to_owned())
    );
    // The node went away.
    assert_eq!(
        check_bindings("node-1", None, &volumes, &cache_now).map_err(|e| e.0),
        Err("failed to get node \"node-1\": node \"node-1\" not found".to_owned())
    );
}

#[test]
fn pre_bind_of_a_static_volume_waits_for_the_claim() {
    let node_labels = labels(&[(HOSTNAME, "node-1")]);
    let pvc = claim("data", "local", "1Gi");
    let mut pv = super::binder::bind_volume_to_claim(
        &volume("pv-1", "local", "1Gi", HOSTNAME, "node-1"),
        &pvc,
    );
    pv.metadata.resource_version = Some("6".into());
    let volumes = PodVolumes {
        static_bindings: vec![BindingInfo {
            pvc: Arc::new(pvc.clone()),
            pv: Arc::new(pv.clone()),
        }],
        dynamic_provisions: vec![],
    };
    let mut cache_now = cache(vec![pvc.clone()], vec![pv.clone()], vec![local()]);
    assert_eq!(
        check_bindings("node-1", Some(&node_labels), &volumes, &cache_now),
        Ok(false)
    );
    cache_now.set_pvc(Arc::new(bound(pvc, "pv-1")));
    assert_eq!(
        check_bindings("node-1", Some(&node_labels), &volumes, &cache_now),
        Ok(true)
    );
    // The PV controller dropped the claimRef.
    let mut reset = pv;
    if let Some(spec) = reset.spec.as_mut() {
        spec.claim_ref = None;
    }
    reset.metadata.resource_version = Some("7".into());
    cache_now.set_pv(Arc::new(reset));
    assert_eq!(
        check_bindings("node-1", Some(&node_labels), &volumes, &cache_now).map_err(|e| e.0),
        Err("ClaimRef got reset for pv \"pv-1\"".to_owned())
    );
}

#[test]
fn queueing_hints() {
    let claims = vec!["data".to_owned()];
    let data = claim("data", "standard", "1Gi");
    assert!(claim_change_may_help("default", &claims, &data));
    assert!(!claim_change_may_help("other", &claims, &data));
    assert!(!claim_change_may_help(
        "default",
        &claims,
        &claim("logs", "standard", "1Gi")
    ));
    let zoned = class(
        "standard",
        "WaitForFirstConsumer",
        "miniplane.io/simulated",
        "b",
    );
    assert!(class_change_may_help(None, &standard()));
    assert!(class_change_may_help(Some(&standard()), &zoned));
    let mut relabelled = standard();
    relabelled.metadata.labels = Some(labels(&[("team", "a")]));
    assert!(!class_change_may_help(Some(&standard()), &relabelled));
}
