//! The PV controller's binding decisions (`persistentvolume-binder-controller`): plain
//! functions of one claim or volume and the cached volumes, claims and classes.
//!
//! Mirrors `pkg/controller/volume/persistentvolume/pv_controller.go`: [`sync_claim`]
//! (`syncClaim` → `syncUnboundClaim` / `syncBoundClaim`), [`sync_volume`] (`syncVolume`,
//! `reclaimVolume`), `bind` / `bindVolumeToClaim` / `bindClaimToVolume` / `unbindVolume`,
//! `updateClaimStatus(WithEvent)` and `updateVolumePhase`, and `FindMatchingVolume`
//! ([`find_best_match`]).

use apimachinery::labels::Selector;
use apimachinery::resource::quantity::Quantity;
use apimachinery::{EventType, ObjectRef};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{
    ANN_BETA_STORAGE_PROVISIONER, ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER,
    ANN_DYNAMICALLY_PROVISIONED, ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER, Decision,
    VolumeAction, annotation, claim_class, claim_phase, event_on, find_class, has_annotation,
    is_delay_binding_mode, set_annotation, volume_class, volume_phase,
};

/// The message of the event on a delayed claim.
pub const WAIT_FOR_FIRST_CONSUMER: &str = "waiting for first consumer to be created before binding";

fn storage(
    list: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >,
) -> Option<Quantity> {
    list.and_then(|l| l.get("storage"))
        .and_then(|q| Quantity::parse(&q.0).ok())
}

fn requested(claim: &PersistentVolumeClaim) -> Option<Quantity> {
    storage(
        claim
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref()),
    )
}

fn capacity(volume: &PersistentVolume) -> Option<Quantity> {
    storage(volume.spec.as_ref().and_then(|s| s.capacity.as_ref()))
}

fn volume_name(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or("")
}

fn claim_ref(volume: &PersistentVolume) -> Option<&ObjectReference> {
    volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref())
}

fn name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

fn claim_key(claim: &PersistentVolumeClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or(""),
        name(&claim.metadata)
    )
}

/// `IsVolumeBoundToClaim`: the volume's claimRef names the claim (and its UID, when set).
pub fn is_volume_bound_to_claim(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(r) = claim_ref(volume) else {
        return false;
    };
    r.name.as_deref() == claim.metadata.name.as_deref()
        && r.namespace.as_deref() == claim.metadata.namespace.as_deref()
        && r.uid
            .as_deref()
            .is_none_or(|u| u.is_empty() || Some(u) == claim.metadata.uid.as_deref())
}

fn modes(v: Option<&Vec<String>>) -> Vec<String> {
    v.cloned().unwrap_or_default()
}

fn volume_mode_of(mode: Option<&String>) -> &str {
    mode.map_or("Filesystem", String::as_str)
}

/// `FindMatchingVolume` without a node (the controller's call): a volume pre-bound to the
/// claim if it is big enough and of its class; else, unless binding is `delayed`, the smallest
/// Available, unclaimed volume of the claim's class with at least its access modes and
/// requested capacity that its selector matches.
pub fn find_best_match<'a>(
    claim: &PersistentVolumeClaim,
    volumes: &'a [PersistentVolume],
    delayed: bool,
) -> Option<&'a PersistentVolume> {
    let spec = claim.spec.clone().unwrap_or_default();
    let wanted = requested(claim)?;
    let class = claim_class(claim);
    let selector = match &spec.selector {
        Some(s) => Some(Selector::from_label_selector(Some(s)).ok()?),
        None => None,
    };
    let claim_modes = modes(spec.access_modes.as_ref());
    let mut best: Option<(&PersistentVolume, i128, usize)> = None;
    for volume in volumes {
        let vspec = volume.spec.clone().unwrap_or_default();
        let volume_modes = modes(vspec.access_modes.as_ref());
        if !claim_modes.iter().all(|m| volume_modes.contains(m)) {
            continue;
        }
        if volume_mode_of(vspec.volume_mode.as_ref()) != volume_mode_of(spec.volume_mode.as_ref()) {
            continue;
        }
        if volume.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(size) = capacity(volume) else {
            continue;
        };
        if is_volume_bound_to_claim(volume, claim) {
            // Pre-bound to this claim (by the user or a provisioner).
            if size.nanos() < wanted.nanos() || volume_class(volume) != class {
                continue;
            }
            return Some(volume);
        }
        if delayed {
            continue;
        }
        if volume_phase(volume) != "Available" || vspec.claim_ref.is_some() {
            continue;
        }
        if let Some(sel) = &selector {
            let labels = volume.metadata.labels.clone().unwrap_or_default();
            if !sel.matches(&labels) {
                continue;
            }
        }
        if volume_class(volume) != class || size.nanos() < wanted.nanos() {
            continue;
        }
        let candidate = (volume, size.nanos(), volume_modes.len());
        if best.is_none_or(|(_, s, m)| (candidate.1, candidate.2) < (s, m)) {
            best = Some(candidate);
        }
    }
    best.map(|(v, _, _)| v)
}

/// `checkVolumeSatisfyClaim`: why `volume` cannot serve `claim`, if it cannot.
pub fn check_volume_satisfies_claim(
    volume: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> Option<String> {
    let wanted = requested(claim)?;
    let size = capacity(volume)?;
    if size.nanos() < wanted.nanos() {
        return Some("requested PV is too small".to_owned());
    }
    if volume_class(volume) != claim_class(claim) {
        return Some("storageClassName does not match".to_owned());
    }
    let spec = claim.spec.clone().unwrap_or_default();
    let vspec = volume.spec.clone().unwrap_or_default();
    if volume_mode_of(vspec.volume_mode.as_ref()) != volume_mode_of(spec.volume_mode.as_ref()) {
        return Some("incompatible volumeMode".to_owned());
    }
    let volume_modes = modes(vspec.access_modes.as_ref());
    if !modes(spec.access_modes.as_ref())
        .iter()
        .all(|m| volume_modes.contains(m))
    {
        return Some("incompatible accessMode".to_owned());
    }
    None
}

/// `updateVolumePhase`: the status write, when the phase changes (stamping
/// `lastPhaseTransitionTime`).
fn volume_phase_action(
    volume: &PersistentVolume,
    phase: &str,
    now: Timestamp,
) -> Option<VolumeAction> {
    if volume_phase(volume) == phase {
        return None;
    }
    let mut v = volume.clone();
    let status = v.status.get_or_insert_with(Default::default);
    status.phase = Some(phase.to_owned());
    status.message = None;
    status.last_phase_transition_time = Some(Time(now));
    Some(VolumeAction::UpdateVolumeStatus(Box::new(v)))
}

/// `updateClaimStatus`: phase, and the volume's access modes and capacity (none without one).
fn claim_status_action(
    claim: &PersistentVolumeClaim,
    phase: &str,
    volume: Option<&PersistentVolume>,
) -> Option<VolumeAction> {
    let mut c = claim.clone();
    let status = c.status.get_or_insert_with(Default::default);
    status.phase = Some(phase.to_owned());
    match volume {
        None => {
            status.access_modes = None;
            status.capacity = None;
        }
        Some(v) => {
            let spec = v.spec.clone().unwrap_or_default();
            status.access_modes = spec.access_modes;
            status.capacity = spec.capacity;
        }
    }
    (c.status != claim.status).then(|| VolumeAction::UpdateClaimStatus(Box::new(c)))
}

/// `bind`: the volume's claimRef and phase, then the claim's volumeName, annotations and
/// status; each write only when something changes.
pub fn bind(
    volume: &PersistentVolume,
    claim: &PersistentVolumeClaim,
    now: Timestamp,
) -> Vec<VolumeAction> {
    let mut actions = Vec::new();
    // bindVolumeToClaim
    let mut v = volume.clone();
    let should_set_bound_by = !is_volume_bound_to_claim(volume, claim);
    let r = claim_ref(volume);
    let mut dirty = false;
    if r.is_none_or(|r| {
        r.name.as_deref() != claim.metadata.name.as_deref()
            || r.namespace.as_deref() != claim.metadata.namespace.as_deref()
            || r.uid.as_deref() != claim.metadata.uid.as_deref()
    }) {
        v.spec.get_or_insert_with(Default::default).claim_ref = Some(ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("PersistentVolumeClaim".to_owned()),
            namespace: claim.metadata.namespace.clone(),
            name: claim.metadata.name.clone(),
            uid: claim.metadata.uid.clone(),
            resource_version: claim.metadata.resource_version.clone(),
            ..Default::default()
        });
        dirty = true;
    }
    if should_set_bound_by && !has_annotation(&v.metadata, ANN_BOUND_BY_CONTROLLER) {
        set_annotation(&mut v.metadata, ANN_BOUND_BY_CONTROLLER, "yes");
        dirty = true;
    }
    if dirty {
        actions.push(VolumeAction::UpdateVolume(Box::new(v.clone())));
    }
    actions.extend(volume_phase_action(&v, "Bound", now));
    // bindClaimToVolume
    let mut c = claim.clone();
    let mut dirty = false;
    if volume_name(claim) != name(&volume.metadata) {
        c.spec.get_or_insert_with(Default::default).volume_name = volume.metadata.name.clone();
        if !has_annotation(&c.metadata, ANN_BOUND_BY_CONTROLLER) {
            set_annotation(&mut c.metadata, ANN_BOUND_BY_CONTROLLER, "yes");
        }
        dirty = true;
    }
    if !has_annotation(&c.metadata, ANN_BIND_COMPLETED) {
        set_annotation(&mut c.metadata, ANN_BIND_COMPLETED, "yes");
        dirty = true;
    }
    if dirty {
        actions.push(VolumeAction::UpdateClaim(Box::new(c.clone())));
    }
    actions.extend(claim_status_action(&c, "Bound", Some(&v)));
    actions
}

/// `updateClaimStatusWithEvent`: the status and the event, only when the phase changes.
fn claim_lost(claim: &PersistentVolumeClaim, reason: &str, message: &str) -> Vec<VolumeAction> {
    if claim_phase(claim) == "Lost" {
        return Vec::new();
    }
    let mut actions: Vec<VolumeAction> = claim_status_action(claim, "Lost", None)
        .into_iter()
        .collect();
    actions.push(event_on(
        ObjectRef::from_object(claim),
        EventType::Warning,
        reason,
        message,
    ));
    actions
}

/// `syncClaim` for one claim, given every cached volume and class.
pub fn sync_claim(
    claim: &PersistentVolumeClaim,
    volumes: &[PersistentVolume],
    classes: &[StorageClass],
    now: Timestamp,
) -> Decision {
    let key = claim_key(claim);
    if !has_annotation(&claim.metadata, ANN_BIND_COMPLETED) {
        sync_unbound_claim(claim, &key, volumes, classes, now)
    } else {
        sync_bound_claim(claim, &key, volumes, now)
    }
}

fn sync_unbound_claim(
    claim: &PersistentVolumeClaim,
    key: &str,
    volumes: &[PersistentVolume],
    classes: &[StorageClass],
    now: Timestamp,
) -> Decision {
    let me = || ObjectRef::from_object(claim);
    let wanted = volume_name(claim);
    if wanted.is_empty() {
        let selected_node = annotation(&claim.metadata, ANN_SELECTED_NODE);
        let delayed = selected_node.is_none() && is_delay_binding_mode(claim, classes);
        if let Some(volume) = find_best_match(claim, volumes, delayed) {
            return Decision {
                summary: format!(
                    "claim {key}: binding to volume {} (it matches the claim's class, access modes and size)",
                    name(&volume.metadata)
                ),
                actions: bind(volume, claim, now),
            };
        }
        let class = claim_class(claim);
        let mut actions = Vec::new();
        let summary;
        if delayed {
            summary = format!(
                "claim {key}: Pending, class {class} binds on first consumer and no node is selected"
            );
            actions.push(event_on(
                me(),
                EventType::Normal,
                "WaitForFirstConsumer",
                WAIT_FOR_FIRST_CONSUMER,
            ));
        } else if !class.is_empty() {
            match find_class(classes, &class) {
                None => {
                    summary = format!("claim {key}: Pending, its class {class} does not exist");
                    actions.push(event_on(
                        me(),
                        EventType::Warning,
                        "ProvisioningFailed",
                        format!("storageclass.storage.k8s.io {class:?} not found"),
                    ));
                }
                Some(sc) => {
                    let provisioner = sc.provisioner.clone();
                    summary = format!(
                        "claim {key}: Pending, no volume matches; asked provisioner {provisioner} of class {class}"
                    );
                    // setClaimProvisioner
                    if annotation(&claim.metadata, ANN_STORAGE_PROVISIONER)
                        != Some(provisioner.as_str())
                        || annotation(&claim.metadata, ANN_BETA_STORAGE_PROVISIONER)
                            != Some(provisioner.as_str())
                    {
                        let mut c = claim.clone();
                        set_annotation(&mut c.metadata, ANN_BETA_STORAGE_PROVISIONER, &provisioner);
                        set_annotation(&mut c.metadata, ANN_STORAGE_PROVISIONER, &provisioner);
                        actions.push(VolumeAction::UpdateClaim(Box::new(c)));
                    }
                    actions.push(event_on(
                        me(),
                        EventType::Normal,
                        "ExternalProvisioning",
                        format!(
                            "Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."
                        ),
                    ));
                }
            }
        } else {
            summary = format!("claim {key}: Pending, no volume matches and no class is set");
            actions.push(event_on(
                me(),
                EventType::Normal,
                "FailedBinding",
                "no persistent volumes available for this claim and no storage class is set",
            ));
        }
        actions.extend(claim_status_action(claim, "Pending", None));
        return Decision { summary, actions };
    }
    // The user asked for a specific volume.
    let Some(volume) = volumes.iter().find(|v| name(&v.metadata) == wanted) else {
        return Decision {
            summary: format!("claim {key}: Pending, requested volume {wanted} not found"),
            actions: claim_status_action(claim, "Pending", None)
                .into_iter()
                .collect(),
        };
    };
    if claim_ref(volume).is_none() {
        if let Some(why) = check_volume_satisfies_claim(volume, claim) {
            let mut actions = vec![event_on(
                me(),
                EventType::Warning,
                "VolumeMismatch",
                format!("Cannot bind to requested volume {wanted:?}: {why}"),
            )];
            actions.extend(claim_status_action(claim, "Pending", None));
            return Decision {
                summary: format!("claim {key}: Pending, requested volume {wanted}: {why}"),
                actions,
            };
        }
        return Decision {
            summary: format!("claim {key}: binding to the requested volume {wanted}"),
            actions: bind(volume, claim, now),
        };
    }
    if is_volume_bound_to_claim(volume, claim) {
        return Decision {
            summary: format!(
                "claim {key}: volume {wanted} already names it, finishing the binding"
            ),
            actions: bind(volume, claim, now),
        };
    }
    let mut actions = vec![event_on(
        me(),
        EventType::Warning,
        "FailedBinding",
        format!("volume {wanted:?} already bound to a different claim."),
    )];
    actions.extend(claim_status_action(claim, "Pending", None));
    Decision {
        summary: format!(
            "claim {key}: Pending, requested volume {wanted} is bound to another claim"
        ),
        actions,
    }
}

fn sync_bound_claim(
    claim: &PersistentVolumeClaim,
    key: &str,
    volumes: &[PersistentVolume],
    now: Timestamp,
) -> Decision {
    let wanted = volume_name(claim);
    if wanted.is_empty() {
        return Decision {
            summary: format!("claim {key}: Lost, it was bound and has no volumeName"),
            actions: claim_lost(
                claim,
                "ClaimLost",
                "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!",
            ),
        };
    }
    let Some(volume) = volumes.iter().find(|v| name(&v.metadata) == wanted) else {
        return Decision {
            summary: format!("claim {key}: Lost, its volume {wanted} is gone"),
            actions: claim_lost(
                claim,
                "ClaimLost",
                "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
            ),
        };
    };
    match claim_ref(volume).and_then(|r| r.uid.as_deref()) {
        uid if claim_ref(volume).is_none() || uid == claim.metadata.uid.as_deref() => {
            let actions = bind(volume, claim, now);
            let summary = if actions.is_empty() {
                format!("claim {key}: bound to volume {wanted}, nothing to do")
            } else {
                format!("claim {key}: bound to volume {wanted}, completing the binding")
            };
            Decision { summary, actions }
        }
        _ => Decision {
            summary: format!("claim {key}: Lost, volume {wanted} is bound to another claim"),
            actions: claim_lost(
                claim,
                "ClaimMisbound",
                "Two claims are bound to the same volume, this one is bound incorrectly",
            ),
        },
    }
}

/// `syncVolume` for one volume, given its claim from the cache (by the claimRef's
/// namespace and name; `None` if absent).
pub fn sync_volume(
    volume: &PersistentVolume,
    claim: Option<&PersistentVolumeClaim>,
    now: Timestamp,
) -> Decision {
    let vname = name(&volume.metadata).to_owned();
    let Some(r) = claim_ref(volume) else {
        return Decision {
            summary: format!("volume {vname}: unused, Available"),
            actions: volume_phase_action(volume, "Available", now)
                .into_iter()
                .collect(),
        };
    };
    let claim_name = format!(
        "{}/{}",
        r.namespace.as_deref().unwrap_or(""),
        r.name.as_deref().unwrap_or("")
    );
    if r.uid.as_deref().unwrap_or("").is_empty() {
        return Decision {
            summary: format!("volume {vname}: pre-bound to claim {claim_name}, Available"),
            actions: volume_phase_action(volume, "Available", now)
                .into_iter()
                .collect(),
        };
    }
    // A claim of the same name with another UID replaced the one the volume was bound to.
    let claim = claim.filter(|c| c.metadata.uid.as_deref() == r.uid.as_deref());
    let Some(claim) = claim else {
        let mut actions = Vec::new();
        let mut released = volume.clone();
        if !matches!(volume_phase(volume), "Released" | "Failed")
            && let Some(a) = volume_phase_action(volume, "Released", now)
        {
            if let VolumeAction::UpdateVolumeStatus(v) = &a {
                released = (**v).clone();
            }
            actions.push(a);
        }
        let (why, more) = reclaim(&released, now);
        actions.extend(more);
        return Decision {
            summary: format!("volume {vname}: claim {claim_name} is gone, Released; {why}"),
            actions,
        };
    };
    let claim_volume = volume_name(claim);
    if claim_volume.is_empty() {
        return Decision {
            summary: format!(
                "volume {vname}: bound to claim {claim_name}, which is not bound yet; syncing the claim"
            ),
            actions: vec![VolumeAction::EnqueueClaim(
                apimachinery::ObjectKey::from_meta(&claim.metadata),
            )],
        };
    }
    if claim_volume == vname {
        return Decision {
            summary: format!("volume {vname}: bound to claim {claim_name}"),
            actions: volume_phase_action(volume, "Bound", now)
                .into_iter()
                .collect(),
        };
    }
    let policy = volume
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        .unwrap_or("");
    if has_annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED) && policy == "Delete" {
        let mut actions: Vec<VolumeAction> = Vec::new();
        let mut released = volume.clone();
        if !matches!(volume_phase(volume), "Released" | "Failed")
            && let Some(a) = volume_phase_action(volume, "Released", now)
        {
            if let VolumeAction::UpdateVolumeStatus(v) = &a {
                released = (**v).clone();
            }
            actions.push(a);
        }
        let (why, more) = reclaim(&released, now);
        actions.extend(more);
        return Decision {
            summary: format!(
                "volume {vname}: provisioned for claim {claim_name}, which bound to {claim_volume}; Released, {why}"
            ),
            actions,
        };
    }
    // unbindVolume: the controller's own binding is undone; a user's pre-binding is kept
    // without the UID.
    let mut v = volume.clone();
    if has_annotation(&volume.metadata, ANN_BOUND_BY_CONTROLLER) {
        if let Some(spec) = v.spec.as_mut() {
            spec.claim_ref = None;
        }
        if let Some(a) = v.metadata.annotations.as_mut() {
            a.remove(ANN_BOUND_BY_CONTROLLER);
        }
    } else if let Some(r) = v.spec.as_mut().and_then(|s| s.claim_ref.as_mut()) {
        r.uid = Some(String::new());
    }
    let mut actions = vec![VolumeAction::UpdateVolume(Box::new(v.clone()))];
    actions.extend(volume_phase_action(&v, "Available", now));
    Decision {
        summary: format!(
            "volume {vname}: claim {claim_name} is bound to {claim_volume}; unbinding, Available"
        ),
        actions,
    }
}

/// `reclaimVolume` of a Released volume: what happens, and the writes.
fn reclaim(volume: &PersistentVolume, now: Timestamp) -> (String, Vec<VolumeAction>) {
    let policy = volume
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.clone())
        .unwrap_or_default();
    let me = ObjectRef::from_object(volume);
    let vname = name(&volume.metadata);
    let fail = |reason: &str, message: String| {
        let mut actions = vec![event_on(me.clone(), EventType::Warning, reason, message)];
        actions.extend(volume_phase_action(volume, "Failed", now));
        actions
    };
    match policy.as_str() {
        "Retain" => ("reclaim policy Retain: kept".to_owned(), Vec::new()),
        "Delete" => match annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED) {
            Some(p) => (
                format!("reclaim policy Delete: waiting for provisioner {p} to delete it"),
                Vec::new(),
            ),
            None => (
                "reclaim policy Delete: no deleter for a volume no provisioner made, Failed"
                    .to_owned(),
                fail(
                    "VolumeFailedDelete",
                    format!(
                        "error getting deleter volume plugin for volume {vname:?}: no deletable volume plugin matched"
                    ),
                ),
            ),
        },
        "Recycle" => (
            "reclaim policy Recycle: no recycler, Failed".to_owned(),
            fail(
                "VolumeFailedRecycle",
                "No recycler plugin found for the volume!".to_owned(),
            ),
        ),
        other => (format!("unknown reclaim policy {other:?}"), Vec::new()),
    }
}
