//! core/v1 Pod (`pkg/registry/core/pod/strategy.go`, `pkg/apis/core/v1/defaults.go`
//! `SetDefaults_Pod`, `pkg/apis/core/validation/validation.go` `ValidatePodCreate`,
//! `ValidatePodUpdate`, and the admission plugins that fill in every pod in a real cluster:
//! `plugin/pkg/admission/serviceaccount`, `.../defaulttolerationseconds`, `.../priority`).
//!
//! On create a pod gets, besides the pod spec defaults: requests copied from limits,
//! `enableServiceLinks: true`, priority 0 with `PreemptLowerPriority`, tolerations of the
//! `not-ready`/`unreachable` taints for 300 s, and a status of `phase: Pending` with its QoS
//! class. The `default` service account and the token volume (`kube-api-access-xxxxx`) come
//! before, from the ServiceAccount admission plugin (`crate::admission::serviceaccount`),
//! which needs to read the ServiceAccount and so is not part of the strategy.
//!
//! After creation a pod's spec is nearly frozen: only container images, `activeDeadlineSeconds`,
//! added tolerations and a negative `terminationGracePeriodSeconds` raised to 1 may change;
//! ephemeral containers are added only through `pods/{name}/ephemeralcontainers`
//! (`crate::strategy::pod_spec::ephemeral`, `podEphemeralContainersStrategy`).

use super::field::FieldPath;
use super::pod_printer::{pod_columns, pod_row};
use super::pod_spec::ephemeral::{
    validate_ephemeral_containers, validate_none_on_create, validate_only_additions,
};
use super::pod_spec::{default_pod_spec, validate_pod_spec};
use super::typed::KindRules;
use super::{FieldError, TableColumn};
use apimachinery::qos::pod_qos;
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus, Toleration};
use serde_json::Value;
use std::borrow::Cow;

/// The Pod rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct PodRules;

/// The message of a forbidden pod spec update (`ValidatePodUpdate`).
pub const POD_UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// The pod fields a field selector may name besides `metadata.name`/`metadata.namespace`
/// (`ToSelectableFields` in `pkg/registry/core/pod/strategy.go`).
const POD_SELECTABLE_FIELDS: [&str; 8] = [
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];

/// One selectable field of a pod read straight from its JSON (`None`: not a selectable
/// field). Evaluated for every pod watch event of every watcher with a field selector: plain
/// `get`s (a JSON pointer allocates for each of its tokens), and only the field asked for.
fn pod_selectable_field<'a>(obj: &'a Value, field: &str) -> Option<Cow<'a, str>> {
    let text = |part: Option<&'a Value>, key: &str| {
        Cow::Borrowed(
            part.and_then(|p| p.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default(),
        )
    };
    let spec = || obj.get("spec");
    let status = || obj.get("status");
    Some(match field {
        "spec.nodeName" => text(spec(), "nodeName"),
        "spec.restartPolicy" => text(spec(), "restartPolicy"),
        "spec.schedulerName" => text(spec(), "schedulerName"),
        "spec.serviceAccountName" => text(spec(), "serviceAccountName"),
        "spec.hostNetwork" => spec()
            .and_then(|s| s.get("hostNetwork"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
            .to_string()
            .into(),
        "status.phase" => text(status(), "phase"),
        // The first of `status.podIPs`, as the printer reads it.
        "status.podIP" => text(
            status()
                .and_then(|s| s.get("podIPs"))
                .and_then(|ips| ips.get(0)),
            "ip",
        ),
        "status.nominatedNodeName" => text(status(), "nominatedNodeName"),
        _ => return None,
    })
}

impl KindRules for PodRules {
    type Object = Pod;
    const STATUS_SUBRESOURCE: bool = true;

    fn reset_status(&self, obj: &mut Pod) -> bool {
        obj.status = Some(Default::default());
        true
    }

    fn set_defaults(&self, obj: &mut Pod) {
        let spec = obj.spec.get_or_insert_with(Default::default);
        default_pod_spec(spec);
        default_requests_from_limits(spec);
        spec.enable_service_links.get_or_insert(true);
        if spec.host_network == Some(true) {
            for c in spec
                .containers
                .iter_mut()
                .chain(spec.init_containers.iter_mut().flatten())
            {
                for p in c.ports.iter_mut().flatten() {
                    if p.host_port.unwrap_or(0) == 0 {
                        p.host_port = Some(p.container_port);
                    }
                }
            }
        }
        // The v1 conversion: `serviceAccount` is the deprecated name of `serviceAccountName`
        // (the `default` account is the ServiceAccount admission plugin's, `crate::admission`).
        if spec
            .service_account_name
            .as_deref()
            .unwrap_or("")
            .is_empty()
        {
            spec.service_account_name = spec.service_account.clone().filter(|s| !s.is_empty());
        }
        if spec.service_account.as_deref().unwrap_or("").is_empty() {
            spec.service_account = spec.service_account_name.clone();
        }
        // Admission: DefaultTolerationSeconds; and Priority's outcome for a pod it did not
        // see (`crate::admission::priority` fills these in on a POST create).
        if spec.priority_class_name.as_deref().unwrap_or("").is_empty() {
            spec.priority.get_or_insert(0);
        }
        spec.preemption_policy
            .get_or_insert_with(|| "PreemptLowerPriority".to_owned());
        add_default_tolerations(spec);

        let qos = pod_qos(spec).as_str().to_owned();
        let status = obj.status.get_or_insert_with(PodStatus::default);
        if status.phase.as_deref().unwrap_or("").is_empty() {
            status.phase = Some("Pending".to_owned());
        }
        status.qos_class.get_or_insert(qos);
    }

    fn prepare_for_create(&self, obj: &mut Pod) {
        // The status was reset: a new pod is `Pending` with its QoS class.
        self.set_defaults(obj);
    }

    fn validate(&self, obj: &Pod) -> Vec<FieldError> {
        let spec = spec_of(obj);
        let path = FieldPath::new("spec");
        let mut errs = validate_pod_spec(spec.as_ref(), &path);
        errs.extend(validate_ephemeral_containers(
            spec.as_ref(),
            &path.child("ephemeralContainers"),
        ));
        errs
    }

    /// `ValidatePodCreate`: the spec's rules, and no ephemeral containers yet.
    fn validate_create(&self, obj: &Pod) -> Vec<FieldError> {
        let mut errs = self.validate(obj);
        errs.extend(validate_none_on_create(spec_of(obj).as_ref()));
        errs
    }

    fn has_subresource_rules(&self, subresource: &str) -> bool {
        subresource == "ephemeralcontainers"
    }

    /// `podEphemeralContainersStrategy`: the defaults of the new ephemeral containers, then
    /// `ValidatePodEphemeralContainersUpdate` (the pod's spec, with them, and only additions).
    fn admit_subresource_update(&self, _: &str, new: &mut Pod, old: &Pod) -> Vec<FieldError> {
        self.set_defaults(new);
        let mut errs = self.validate(new);
        errs.extend(validate_only_additions(new, old));
        errs
    }

    /// `ValidatePodUpdate`'s spec checks. A spec equal to the stored one passed these same
    /// checks when it was stored, so it is not validated again: a status write (whose spec
    /// is the stored one, and which Kubernetes' `ValidatePodStatusUpdate` does not validate
    /// either) or a metadata-only update. Kubernetes revalidates the unchanged spec of a main
    /// update; only rules that changed since the pod was stored could tell the two apart.
    fn validate_update(&self, new: &Pod, old: &Pod) -> Vec<FieldError> {
        if new.spec == old.spec {
            return Vec::new();
        }
        let mut errs = self.validate(new);
        if let Some(err) = validate_spec_update(spec_of(new).as_ref(), spec_of(old).as_ref()) {
            errs.push(err);
        }
        errs
    }

    fn bumps_generation(&self, _: &Pod, _: &Pod, _: (&Value, &Value)) -> bool {
        false
    }

    fn graceful_delete_period(&self, obj: &Pod, requested: Option<i64>) -> Option<i64> {
        Some(graceful_delete_period(obj, requested))
    }

    fn selectable_fields_json(&self, obj: &Value) -> Option<Vec<(&'static str, String)>> {
        Some(
            POD_SELECTABLE_FIELDS
                .iter()
                .map(|&name| {
                    let value = pod_selectable_field(obj, name).unwrap_or_default();
                    (name, value.into_owned())
                })
                .collect(),
        )
    }

    fn selectable_field_json<'a>(
        &self,
        obj: &'a Value,
        field: &str,
    ) -> Option<Option<Cow<'a, str>>> {
        Some(pod_selectable_field(obj, field))
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        pod_columns()
    }

    fn table_row(&self, obj: &Pod, now: jiff::Timestamp) -> Vec<Value> {
        pod_row(obj, now)
    }
}

/// `SetDefaults_Pod`: a container with limits but no request for a resource requests its limit.
fn default_requests_from_limits(spec: &mut PodSpec) {
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        let Some(res) = c.resources.as_mut() else {
            continue;
        };
        let Some(limits) = res.limits.clone() else {
            continue;
        };
        let requests = res.requests.get_or_insert_with(Default::default);
        for (k, v) in limits {
            requests.entry(k).or_insert(v);
        }
    }
}

/// The `DefaultTolerationSeconds` admission plugin: tolerate `not-ready` and `unreachable`
/// nodes for 300 s unless the pod already tolerates those taints.
fn add_default_tolerations(spec: &mut PodSpec) {
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = tolerations.iter().any(|t| {
            let key_ok = match t.key.as_deref().unwrap_or("") {
                "" => t.operator.as_deref() == Some("Exists"),
                k => k == key,
            };
            let effect_ok = matches!(t.effect.as_deref().unwrap_or(""), "" | "NoExecute");
            key_ok && effect_ok
        });
        if !tolerated {
            tolerations.push(Toleration {
                key: Some(key.to_owned()),
                operator: Some("Exists".to_owned()),
                effect: Some("NoExecute".to_owned()),
                toleration_seconds: Some(300),
                value: None,
            });
        }
    }
}

/// The pod's spec, or the default spec for a pod without one (borrowed when it has one).
fn spec_of(pod: &Pod) -> std::borrow::Cow<'_, PodSpec> {
    match &pod.spec {
        Some(spec) => std::borrow::Cow::Borrowed(spec),
        None => std::borrow::Cow::Owned(PodSpec::default()),
    }
}

/// `ValidatePodUpdate`'s spec rule: mask the fields that may change, then the rest must be
/// equal. Returns the `spec: Forbidden: ...` error with a short list of what differs.
fn validate_spec_update(new: &PodSpec, old: &PodSpec) -> Option<FieldError> {
    let mut masked = new.clone();
    for (m, o) in masked.containers.iter_mut().zip(&old.containers) {
        m.image.clone_from(&o.image);
    }
    if let (Some(ms), Some(os)) = (
        masked.init_containers.as_mut(),
        old.init_containers.as_ref(),
    ) {
        for (m, o) in ms.iter_mut().zip(os) {
            m.image.clone_from(&o.image);
        }
    }
    // activeDeadlineSeconds may be set, or lowered, but not removed or raised.
    let deadline_ok = match (new.active_deadline_seconds, old.active_deadline_seconds) {
        (Some(n), Some(o)) => n <= o,
        (Some(_), None) => true,
        (None, None) => true,
        (None, Some(_)) => false,
    };
    if deadline_ok {
        masked.active_deadline_seconds = old.active_deadline_seconds;
    }
    // Tolerations may only be added.
    let old_tol = old.tolerations.clone().unwrap_or_default();
    let new_tol = new.tolerations.clone().unwrap_or_default();
    if old_tol.iter().all(|t| new_tol.contains(t)) {
        masked.tolerations.clone_from(&old.tolerations);
    }
    // A negative grace period may be raised to 1.
    if old.termination_grace_period_seconds.is_some_and(|g| g < 0)
        && new.termination_grace_period_seconds == Some(1)
    {
        masked.termination_grace_period_seconds = old.termination_grace_period_seconds;
    }
    if masked == *old {
        return None;
    }
    let (m, o) = (
        serde_json::to_value(&masked).unwrap_or_default(),
        serde_json::to_value(old).unwrap_or_default(),
    );
    let mut diff = String::from("\n  core.PodSpec{");
    let keys: std::collections::BTreeSet<&String> = m
        .as_object()
        .into_iter()
        .chain(o.as_object())
        .flat_map(|map| map.keys())
        .collect();
    for k in keys {
        if m.get(k) != o.get(k) {
            let show = |v: Option<&Value>| v.map_or_else(|| "nil".to_owned(), Value::to_string);
            diff.push_str(&format!("\n- \t{k}: {},", show(o.get(k))));
            diff.push_str(&format!("\n+ \t{k}: {},", show(m.get(k))));
        }
    }
    diff.push_str("\n  }\n");
    Some(FieldError::forbidden(
        &FieldPath::new("spec"),
        &format!("{POD_UPDATE_FORBIDDEN}{diff}"),
    ))
}

/// The grace period of a pod deletion (`podStrategy.CheckGracefulDelete`): the requested
/// period, else the pod's `terminationGracePeriodSeconds`; 0 (delete now) for a pod that was
/// never scheduled or has finished; negative periods become 1.
pub fn graceful_delete_period(pod: &Pod, requested: Option<i64>) -> i64 {
    let spec = spec_of(pod);
    let mut period = requested
        .or(spec.termination_grace_period_seconds)
        .unwrap_or(0);
    if spec.node_name.as_deref().unwrap_or("").is_empty() {
        period = 0;
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Failed" | "Succeeded")) {
        period = 0;
    }
    if period < 0 { 1 } else { period }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use crate::strategy::typed::Typed;
    use serde_json::json;

    fn minimal() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nginx", "namespace": "default"},
               "spec": {"containers": [{"name": "nginx", "image": "nginx", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}})
    }

    #[test]
    fn a_minimal_pod_is_defaulted_like_kube_apiserver_with_priority_admission() {
        let mut obj = minimal();
        Typed(PodRules).default(&mut obj).unwrap();
        assert_eq!(
            obj,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "nginx", "namespace": "default"},
                "spec": {
                    "containers": [{
                        "image": "nginx", "imagePullPolicy": "Always", "name": "nginx",
                        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}},
                        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"
                    }],
                    "dnsPolicy": "ClusterFirst",
                    "enableServiceLinks": true,
                    "preemptionPolicy": "PreemptLowerPriority",
                    "priority": 0,
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                    "securityContext": {},
                    "terminationGracePeriodSeconds": 30,
                    "tolerations": [
                        {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
                        {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300}
                    ]
                },
                "status": {"phase": "Pending", "qosClass": "Guaranteed"}
            })
        );
        // Defaulting twice changes nothing (it runs on every update too).
        let again = {
            let mut o = obj.clone();
            Typed(PodRules).default(&mut o).unwrap();
            o
        };
        assert_eq!(again, obj);
        assert!(Typed(PodRules).validate_create(&obj).is_empty());
        // The deprecated `serviceAccount` and `serviceAccountName` mirror each other.
        let mut named = minimal();
        named["spec"]["serviceAccount"] = json!("builder");
        Typed(PodRules).default(&mut named).unwrap();
        assert_eq!(named["spec"]["serviceAccountName"], "builder");
        // A status sent on create is replaced.
        let mut running = obj.clone();
        running["status"] = json!({"phase": "Running"});
        Typed(PodRules).prepare_for_create(&mut running);
        assert_eq!(
            running["status"],
            json!({"phase": "Pending", "qosClass": "Guaranteed"})
        );
    }

    #[test]
    fn updates_may_change_images_only() {
        let s = Typed(PodRules);
        let mut old = minimal();
        s.default(&mut old).unwrap();
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = json!("nginx:1.25");
        new["spec"]["activeDeadlineSeconds"] = json!(100);
        assert!(s.validate_update(&new, &old).is_empty());
        new["spec"]["nodeName"] = json!("node-1");
        let errs = s.validate_update(&new, &old);
        assert_eq!(errs.len(), 1);
        let msg = errs[0].to_string();
        assert!(
            msg.starts_with(&format!("spec: Forbidden: {POD_UPDATE_FORBIDDEN}\n")),
            "{msg}"
        );
        assert!(msg.contains("+ \tnodeName: \"node-1\","), "{msg}");
        // A changed spec is validated whole: an invalid image is reported with the allowed
        // change; the same spec with only the status changed (a status write) is not.
        let mut invalid = old.clone();
        invalid["spec"]["containers"][0]["image"] = json!("");
        let errs = s.validate_update(&invalid, &old);
        assert!(
            errs.iter()
                .any(|e| e.to_string() == "spec.containers[0].image: Required value"),
            "{errs:?}"
        );
        let mut status = old.clone();
        status["status"] = json!({"phase": "Running", "podIP": "10.244.0.5"});
        assert!(s.validate_update(&status, &old).is_empty());
    }

    #[test]
    fn selectable_fields_and_grace_period() {
        let mut obj = minimal();
        Typed(PodRules).default(&mut obj).unwrap();
        let fields = Typed(PodRules).selectable_fields(&obj);
        assert!(fields.contains(&("status.phase", "Pending".to_owned())));
        assert!(fields.contains(&("spec.nodeName", String::new())));
        assert!(fields.contains(&("spec.hostNetwork", "false".to_owned())));
        obj["status"]["podIPs"] = json!([{"ip": "10.244.0.5"}, {"ip": "fd00::5"}]);
        obj["spec"]["schedulerName"] = json!("default-scheduler");
        let fields = Typed(PodRules).selectable_fields(&obj);
        assert!(fields.contains(&("status.podIP", "10.244.0.5".to_owned())));
        // One field by name (what a watch's field selector reads) agrees with the list.
        assert_eq!(fields.len(), POD_SELECTABLE_FIELDS.len());
        for (name, value) in &fields {
            assert_eq!(
                Typed(PodRules).selectable_field(&obj, name).as_deref(),
                Some(value.as_str())
            );
        }
        assert_eq!(Typed(PodRules).selectable_field(&obj, "spec.nope"), None);
        assert!(fields.contains(&("spec.schedulerName", "default-scheduler".to_owned())));
        let s = Typed(PodRules);
        assert_eq!(s.graceful_delete_period(&obj, None), Some(0));
        obj["spec"]["nodeName"] = json!("node-1");
        assert_eq!(s.graceful_delete_period(&obj, None), Some(30));
        assert_eq!(s.graceful_delete_period(&obj, Some(5)), Some(5));
        assert_eq!(s.graceful_delete_period(&obj, Some(-3)), Some(1));
        obj["status"]["phase"] = json!("Succeeded");
        assert_eq!(s.graceful_delete_period(&obj, None), Some(0));
        assert!(!s.bumps_generation(&obj, &minimal()));
    }

    /// `PodRules` without its typed status reset: [`Typed`] resets the status on the JSON.
    struct PodRulesResettingJson;

    impl KindRules for PodRulesResettingJson {
        type Object = Pod;
        const STATUS_SUBRESOURCE: bool = true;

        fn set_defaults(&self, obj: &mut Pod) {
            PodRules.set_defaults(obj)
        }

        fn prepare_for_create(&self, obj: &mut Pod) {
            PodRules.prepare_for_create(obj)
        }

        fn validate(&self, obj: &Pod) -> Vec<FieldError> {
            PodRules.validate(obj)
        }
    }

    #[test]
    fn the_typed_status_reset_on_create_is_the_json_one() {
        let mut with_status = minimal();
        with_status["status"] = json!({"phase": "Running", "podIP": "10.0.0.9",
            "conditions": [{"type": "Ready", "status": "True"}]});
        let mut invalid = minimal();
        invalid["spec"]["containers"][0]["name"] = json!("Not_A_Name");
        for body in [minimal(), with_status, invalid] {
            let (mut typed, mut json) = (body.clone(), body.clone());
            let typed_errors = Typed(PodRules).admit_create(&mut typed).unwrap();
            let json_errors = Typed(PodRulesResettingJson)
                .admit_create(&mut json)
                .unwrap();
            assert_eq!(typed, json);
            assert_eq!(typed_errors, json_errors);
            assert_eq!(typed["status"]["phase"], "Pending", "{typed}");
            assert!(typed["status"].get("podIP").is_none(), "{typed}");
        }
    }
}
