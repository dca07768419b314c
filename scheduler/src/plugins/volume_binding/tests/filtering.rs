use super::*;

#[test]
fn a_pod_without_claims_skips_the_plugin() {
    let nodes = nodes();
    let pod = info(labelled_pod("web", &[]));
    let state = CycleState::pre_filter(&pod, snapshot(&nodes, &VolumeCache::new()));
    assert_eq!(state.volume_binding, PreFilterResult::Skip);
    assert!(nodes.iter().all(|n| run_filters(&pod, n, &state).is_ok()));
    assert_eq!(
        reserve(&pod, snapshot(&nodes, &VolumeCache::new()), "node-0"),
        Ok(None)
    );
}

#[test]
fn a_missing_claim_rejects_the_pod_at_pre_filter() {
    let nodes = nodes();
    let pod = pod_with_claims("db", &["data"]);
    let state = CycleState::pre_filter(&info(pod.clone()), snapshot(&nodes, &VolumeCache::new()));
    assert_eq!(
        state.pre_filter_rejection(),
        Some(&Status::new(
            NAME,
            Code::UnschedulableAndUnresolvable,
            "persistentvolumeclaim \"data\" not found"
        ))
    );
    assert_eq!(
        fit_message(&pod, &nodes, &VolumeCache::new()),
        "0/3 nodes are available: persistentvolumeclaim \"data\" not found. preemption: 0/3 \
         nodes are available: 3 Preemption is not helpful for scheduling."
    );
}

#[test]
fn claims_being_deleted_or_lost_reject_the_pod() {
    let nodes = nodes();
    let pod = pod_with_claims("db", &["data"]);
    let mut deleting = claim("data", "standard", "1Gi");
    deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    let volumes = cache(vec![deleting], vec![], vec![standard()]);
    assert!(
        fit_message(&pod, &nodes, &volumes).starts_with(
            "0/3 nodes are available: persistentvolumeclaim \"data\" is being deleted. "
        )
    );
    let mut lost = bound(claim("data", "standard", "1Gi"), "pv-gone");
    lost.status = Some(PersistentVolumeClaimStatus {
        phase: Some("Lost".into()),
        ..Default::default()
    });
    let volumes = cache(vec![lost], vec![], vec![standard()]);
    assert!(fit_message(&pod, &nodes, &volumes).starts_with(
        "0/3 nodes are available: persistentvolumeclaim \"data\" bound to non-existent \
         persistentvolume \"pv-gone\". "
    ));
}

#[test]
fn unbound_immediate_claims_wait_for_the_pv_controller() {
    let nodes = nodes();
    let pod = pod_with_claims("db", &["data"]);
    let immediate = class("fast", "Immediate", "miniplane.io/simulated", "");
    for volumes in [
        cache(vec![claim("data", "fast", "1Gi")], vec![], vec![immediate]),
        // A class that does not exist binds immediately too; so does no class at all.
        cache(vec![claim("data", "missing", "1Gi")], vec![], vec![]),
        cache(vec![claim("data", "", "1Gi")], vec![], vec![]),
    ] {
        assert_eq!(
            fit_message(&pod, &nodes, &volumes),
            "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. \
             preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        );
    }
    // A pre-bound claim (volumeName set, not yet bound) counts as immediate as well.
    let mut pre_bound = claim("data", "standard", "1Gi");
    if let Some(spec) = pre_bound.spec.as_mut() {
        spec.volume_name = Some("pv-1".into());
    }
    let volumes = cache(vec![pre_bound], vec![], vec![standard()]);
    let pod = info(pod);
    let state = CycleState::pre_filter(&pod, snapshot(&nodes, &volumes));
    assert!(state.pre_filter_rejection().is_some());
}

#[test]
fn a_bound_claim_needs_its_volume_node_affinity() {
    let nodes = nodes();
    let pod = pod_with_claims("db", &["data"]);
    let pv = volume("pv-1", "local", "10Gi", HOSTNAME, "node-1");
    let volumes = cache(
        vec![bound(claim("data", "local", "1Gi"), "pv-1")],
        vec![pv],
        vec![local()],
    );
    assert_eq!(
        verdicts(&pod, &nodes, &volumes),
        vec![
            fails(&[ERR_REASON_NODE_CONFLICT]),
            Ok(()),
            fails(&[ERR_REASON_NODE_CONFLICT])
        ]
    );
    assert_eq!(
        fit_message(&pod, &nodes[..1], &volumes),
        "0/1 nodes are available: 1 node(s) had volume node affinity conflict. preemption: \
         0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    );
    // Bound everywhere already: Reserve has nothing to write.
    assert_eq!(
        reserve(&info(pod.clone()), snapshot(&nodes, &volumes), "node-1"),
        Ok(None)
    );
    // Its volume is gone: no node.
    let volumes = cache(
        vec![bound(claim("data", "local", "1Gi"), "pv-1")],
        vec![],
        vec![local()],
    );
    assert_eq!(
        verdicts(&pod, &nodes, &volumes),
        vec![fails(&[ERR_REASON_PV_NOT_EXIST]); 3]
    );
}

#[test]
fn a_wait_for_first_consumer_claim_is_provisioned_where_the_class_allows() {
    let nodes = nodes();
    let pod = pod_with_claims("db", &["data"]);
    let volumes = cache(
        vec![claim("data", "standard", "1Gi")],
        vec![],
        vec![standard()],
    );
    assert_eq!(verdicts(&pod, &nodes, &volumes), vec![Ok(()); 3]);
    // allowedTopologies: zone b only.
    let zoned = class(
        "standard",
        "WaitForFirstConsumer",
        "miniplane.io/simulated",
        "b",
    );
    let volumes = cache(vec![claim("data", "standard", "1Gi")], vec![], vec![zoned]);
    assert_eq!(
        verdicts(&pod, &nodes, &volumes),
        vec![
            fails(&[ERR_REASON_BIND_CONFLICT]),
            fails(&[ERR_REASON_BIND_CONFLICT]),
            Ok(())
        ]
    );
    // A class without a provisioner and no volume: nowhere.
    let volumes = cache(vec![claim("data", "local", "1Gi")], vec![], vec![local()]);
    assert_eq!(
        fit_message(&pod, &nodes, &volumes),
        "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind. \
         preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
}

#[test]
fn a_claim_with_a_selected_node_stays_on_that_node() {
    let nodes = nodes();
    let pod = pod_with_claims("db", &["data"]);
    let mut selected = claim("data", "standard", "1Gi");
    selected.metadata.annotations = Some(labels(&[(ANN_SELECTED_NODE, "node-2")]));
    let volumes = cache(vec![selected], vec![], vec![standard()]);
    assert_eq!(
        verdicts(&pod, &nodes, &volumes),
        vec![
            fails(&[ERR_REASON_BIND_CONFLICT]),
            fails(&[ERR_REASON_BIND_CONFLICT]),
            Ok(())
        ]
    );
}

#[test]
fn static_volumes_match_by_size_class_modes_selector_and_node() {
    let nodes = nodes();
    let pod = pod_with_claims("db", &["data"]);
    let mut taken = volume("pv-taken", "local", "5Gi", "", "");
    if let Some(spec) = taken.spec.as_mut() {
        spec.claim_ref = Some(k8s_openapi::api::core::v1::ObjectReference {
            namespace: Some("default".into()),
            name: Some("other".into()),
            ..Default::default()
        });
    }
    let mut read_many = volume("pv-rox", "local", "5Gi", "", "");
    if let Some(spec) = read_many.spec.as_mut() {
        spec.access_modes = Some(vec!["ReadOnlyMany".into()]);
    }
    let mut released = volume("pv-released", "local", "5Gi", "", "");
    released.status = Some(PersistentVolumeStatus {
        phase: Some("Released".into()),
        ..Default::default()
    });
    let pvs = vec![
        taken,
        read_many,
        released,
        volume("pv-small", "local", "500Mi", "", ""),
        volume("pv-other-class", "standard", "5Gi", "", ""),
        // The only candidates: local volumes on node-1 (20Gi and 2Gi).
        volume("pv-big-node-1", "local", "20Gi", HOSTNAME, "node-1"),
        volume("pv-node-1", "local", "2Gi", HOSTNAME, "node-1"),
    ];
    let volumes = cache(vec![claim("data", "local", "1Gi")], pvs, vec![local()]);
    assert_eq!(
        verdicts(&pod, &nodes, &volumes),
        vec![
            fails(&[ERR_REASON_BIND_CONFLICT]),
            Ok(()),
            fails(&[ERR_REASON_BIND_CONFLICT])
        ]
    );
    // Reserve picks the smallest fitting volume and binds it to the claim.
    let reserved = reserve(&info(pod.clone()), snapshot(&nodes, &volumes), "node-1")
        .expect("reserve")
        .expect("volumes to bind");
    assert!(reserved.dynamic_provisions.is_empty());
    let [binding] = reserved.static_bindings.as_slice() else {
        panic!("one binding: {reserved:?}");
    };
    assert_eq!(binding.pv.metadata.name.as_deref(), Some("pv-node-1"));
    let claim_ref = binding.pv.spec.as_ref().and_then(|s| s.claim_ref.clone());
    assert_eq!(
        claim_ref
            .as_ref()
            .map(|r| (r.name.as_deref(), r.uid.as_deref(), r.kind.as_deref())),
        Some((
            Some("data"),
            Some("uid-data"),
            Some("PersistentVolumeClaim")
        ))
    );
    assert_eq!(
        binding
            .pv
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANN_BOUND_BY_CONTROLLER))
            .map(String::as_str),
        Some("yes")
    );
    // A selector narrows the candidates to labelled volumes.
    let mut picky = claim("data", "local", "1Gi");
    if let Some(spec) = picky.spec.as_mut() {
        spec.selector = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: Some(labels(&[("tier", "gold")])),
                match_expressions: None,
            },
        );
    }
    let mut gold = volume("pv-gold", "local", "1Gi", HOSTNAME, "node-0");
    gold.metadata.labels = Some(labels(&[("tier", "gold")]));
    let volumes = cache(
        vec![picky],
        vec![gold, volume("pv-plain", "local", "1Gi", "", "")],
        vec![local()],
    );
    assert_eq!(
        verdicts(&pod, &nodes, &volumes),
        vec![
            Ok(()),
            fails(&[ERR_REASON_BIND_CONFLICT]),
            fails(&[ERR_REASON_BIND_CONFLICT])
        ]
    );
}

#[test]
fn two_claims_do_not_share_one_static_volume() {
    let nodes = nodes();
    let pod = pod_with_claims("db", &["data", "logs"]);
    let one = cache(
        vec![claim("data", "local", "1Gi"), claim("logs", "local", "1Gi")],
        vec![volume("pv-1", "local", "1Gi", "", "")],
        vec![local()],
    );
    assert_eq!(
        verdicts(&pod, &nodes, &one),
        vec![fails(&[ERR_REASON_BIND_CONFLICT]); 3]
    );
    let two = cache(
        vec![claim("data", "local", "1Gi"), claim("logs", "local", "1Gi")],
        vec![
            volume("pv-1", "local", "1Gi", "", ""),
            volume("pv-2", "local", "1Gi", "", ""),
        ],
        vec![local()],
    );
    assert_eq!(verdicts(&pod, &nodes, &two), vec![Ok(()); 3]);
}

#[test]
fn ephemeral_volumes_wait_for_their_claim() {
    let nodes = nodes();
    let mut pod = labelled_pod("web", &[]);
    if let Some(spec) = pod.spec.as_mut() {
        spec.volumes = Some(vec![Volume {
            name: "scratch".into(),
            ephemeral: Some(EphemeralVolumeSource::default()),
            ..Default::default()
        }]);
    }
    assert_eq!(claim_names(&pod), vec!["web-scratch".to_owned()]);
    assert!(fit_message(&pod, &nodes, &VolumeCache::new()).starts_with(
        "0/3 nodes are available: waiting for ephemeral volume controller to create the \
         persistentvolumeclaim \"web-scratch\". "
    ));
    // A claim of that name the pod does not own is refused.
    let volumes = cache(
        vec![claim("web-scratch", "standard", "1Gi")],
        vec![],
        vec![standard()],
    );
    assert!(fit_message(&pod, &nodes, &volumes).starts_with(
        "0/3 nodes are available: PVC default/web-scratch was not created for pod default/web \
         (pod is not owner). "
    ));
}

#[test]
fn topology_terms_match_like_kubernetes() {
    let node = labels(&[(ZONE, "a")]);
    assert!(match_topology_selector_terms(&[], &node));
    let term = |key: &str, values: &[&str]| TopologySelectorTerm {
        match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
            key: key.into(),
            values: values.iter().map(|v| (*v).to_owned()).collect(),
        }]),
    };
    assert!(match_topology_selector_terms(
        &[term(ZONE, &["b", "a"])],
        &node
    ));
    assert!(!match_topology_selector_terms(&[term(ZONE, &["b"])], &node));
    assert!(match_topology_selector_terms(
        &[term(ZONE, &["b"]), term(ZONE, &["a"])],
        &node
    ));
    // An empty term selects nothing.
    let empty = TopologySelectorTerm {
        match_label_expressions: None,
    };
    assert!(!match_topology_selector_terms(&[empty], &node));
}

#[test]
fn the_decision_trace_names_a_pre_filter_rejection_once() {
    let nodes = nodes();
    let pod = pod_with_claims("db", &["data"]);
    let decision =
        Algorithm::new(1).schedule_pod(&info(pod), snapshot(&nodes, &VolumeCache::new()));
    let (summary, attributes) = crate::decision_trace::describe("default/db", &decision);
    assert!(
        summary.ends_with(
            "; rejected at PreFilter by VolumeBinding: persistentvolumeclaim \"data\" not found"
        ),
        "{summary}"
    );
    assert!(attributes.iter().any(|(k, _)| k == "prefilter"));
    assert!(!attributes.iter().any(|(k, _)| k.starts_with("filter.")));
}

#[test]
fn filter_verdicts_appear_per_node_in_the_decision() {
    let nodes = nodes();
    let pod = pod_with_claims("db", &["data"]);
    let zoned = class(
        "standard",
        "WaitForFirstConsumer",
        "miniplane.io/simulated",
        "b",
    );
    let volumes = cache(vec![claim("data", "standard", "1Gi")], vec![], vec![zoned]);
    let result = Algorithm::new(1)
        .schedule_pod(&info(pod), snapshot(&nodes, &volumes))
        .expect("node-2 fits");
    assert_eq!(result.suggested_host, "node-2");
    let rejected: Vec<_> = result
        .nodes
        .iter()
        .filter_map(|v| {
            v.filter
                .as_ref()
                .err()
                .map(|s| (v.node.to_string(), s.plugin))
        })
        .collect();
    assert_eq!(
        rejected,
        vec![("node-0".to_owned(), NAME), ("node-1".to_owned(), NAME)]
    );
}
