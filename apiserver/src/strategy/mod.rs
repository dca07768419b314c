//! Per-kind strategies: defaulting, validation, the spec/status split and table columns
//! (Kubernetes' `pkg/registry/<group>/<resource>/strategy.go`, `pkg/apis/<group>/v1/defaults.go`,
//! `pkg/apis/<group>/validation/validation.go`, and `pkg/printers/internalversion/printers.go`).
//!
//! The generic registry does everything that is the same for every kind (metadata, revisions,
//! watch, patch, delete); a [`Strategy`] adds only what differs per kind. Objects cross this
//! boundary as JSON values so custom resources can use the same path; built-in strategies decode
//! into `k8s-openapi` types where that is convenient, which drops unknown fields exactly as
//! Kubernetes' Go decoding does.
//!
//! ```text
//! create:  default → prepare_for_create → [unknown_fields] → validate_create
//! update:  default → prepare_for_update → validate_update(new, old)
//! list:    selectable_fields (field selectors), table_columns/table_row (kubectl get)
//! ```
//!
//! A built-in kind is a [`typed::KindRules`] over its `k8s-openapi` type, wrapped in
//! [`typed::Typed`]; its validation includes `metadata` (the kind's name syntax, labels,
//! annotations, owner references, finalizers, immutable name/namespace), so the registry must not
//! validate metadata again for built-ins. Custom resources have their own strategy
//! (`crate::apiextensions::custom_resource::CustomResourceStrategy`: the CRD's schema, plus
//! [`meta::validate_metadata_value`]). Shared pieces live in their own files: messages
//! ([`field`]), [`meta`], label [`selector`] validation, the [`pod_spec`] every pod template
//! uses, apps [`workload`]s, tables ([`table`]); name syntax, quantities and ages come from the
//! `apimachinery` crate.

pub mod certificates;
pub mod componentstatus;
pub mod config_data;
pub mod configmap;
pub mod controllerrevision;
pub mod cronjob;
pub mod daemonset;
pub mod decode;
pub mod deployment;
pub mod endpoints;
pub mod endpointslice;
pub mod event;
pub mod events_v1;
pub mod field;
pub mod horizontalpodautoscaler;
pub mod job;
pub mod lease;
pub mod meta;
pub mod namespace;
pub mod node;
pub mod persistentvolume;
pub mod persistentvolumeclaim;
pub mod pod;
pub mod pod_printer;
pub mod pod_spec;
pub mod poddisruptionbudget;
pub mod priorityclass;
pub mod rbac;
pub mod replicaset;
pub mod replicationcontroller;
pub mod secret;
pub mod selector;
pub mod service;
pub mod serviceaccount;
pub mod statefulset;
pub mod storageclass;
pub mod table;
pub mod typed;
pub mod unchanged_encoding;
pub mod volume;
pub mod workload;

use crate::gvk::GroupVersionKind;
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

/// Why a field is invalid (apimachinery's `pkg/util/validation/field/errors.go` `ErrorType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// `FieldValueNotFound`: "Not found".
    NotFound,
    /// `FieldValueRequired`: "Required value".
    Required,
    /// `FieldValueDuplicate`: "Duplicate value".
    Duplicate,
    /// `FieldValueInvalid`: "Invalid value".
    Invalid,
    /// `FieldValueNotSupported`: "Unsupported value".
    NotSupported,
    /// `FieldValueForbidden`: "Forbidden".
    Forbidden,
    /// `FieldValueTooLong`: "Too long".
    TooLong,
    /// `FieldValueTooMany`: "Too many".
    TooMany,
    /// `InternalError`: "Internal error".
    Internal,
    /// `FieldValueTypeInvalid`: "Invalid value" (wrong JSON type).
    TypeInvalid,
}

impl FieldErrorKind {
    /// The `reason` Kubernetes puts in `Status.details.causes[].reason`.
    pub fn reason(self) -> &'static str {
        match self {
            FieldErrorKind::NotFound => "FieldValueNotFound",
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Duplicate => "FieldValueDuplicate",
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::TooMany => "FieldValueTooMany",
            FieldErrorKind::Internal => "InternalError",
            FieldErrorKind::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// The words Kubernetes uses for this kind in messages.
    pub fn words(self) -> &'static str {
        match self {
            FieldErrorKind::NotFound => "Not found",
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::Duplicate => "Duplicate value",
            FieldErrorKind::Invalid => "Invalid value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::Forbidden => "Forbidden",
            FieldErrorKind::TooLong => "Too long",
            FieldErrorKind::TooMany => "Too many",
            FieldErrorKind::Internal => "Internal error",
            FieldErrorKind::TypeInvalid => "Invalid value",
        }
    }
}

/// One invalid field, rendered as Kubernetes renders `field.Error`, e.g.
/// `spec.replicas: Invalid value: -1: must be greater than or equal to 0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// What is wrong.
    pub kind: FieldErrorKind,
    /// The field path, e.g. `spec.template.spec.containers[0].image`.
    pub field: String,
    /// The offending value as Kubernetes prints it (quoted for strings), if any.
    pub value: Option<String>,
    /// The explanation, e.g. `must be greater than or equal to 0`.
    pub detail: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.kind.words())?;
        if let Some(v) = &self.value {
            write!(f, ": {v}")?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// A column of a `meta.k8s.io/v1` Table (`TableColumnDefinition`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableColumn {
    /// Header, e.g. `Ready` (owned for the columns a CRD declares).
    pub name: Cow<'static, str>,
    /// OpenAPI type: `string`, `integer`, `date`, ...
    pub type_: Cow<'static, str>,
    /// OpenAPI format, e.g. `name` for the name column, or empty.
    pub format: Cow<'static, str>,
    /// Description shown by `kubectl explain`-like tools.
    pub description: Cow<'static, str>,
    /// 0 for default columns, 1 for `-o wide` only columns.
    pub priority: u32,
}

/// What differs per kind. Every method has the behaviour of a kind with no special rules by
/// default, so a strategy overrides only what its kind needs.
pub trait Strategy: Send + Sync + 'static {
    /// The kind this strategy serves.
    fn gvk(&self) -> GroupVersionKind;

    /// Whether the kind has `spec`/`status` with a status subresource: then writes to the main
    /// resource keep the stored status, writes to `/status` keep everything but status, and
    /// `metadata.generation` is bumped on spec changes only.
    fn has_status_subresource(&self) -> bool {
        false
    }

    /// Decodes, defaults and re-encodes an object on create and update (`SetDefaults_*`).
    /// Returns a 400-style error message when the JSON does not decode into the kind
    /// (a wrong type), e.g. `json: cannot unmarshal string into Go struct field ...`.
    fn default(&self, obj: &mut Value) -> Result<(), String> {
        let _ = obj;
        Ok(())
    }

    /// `PrepareForCreate`: what the kind changes only when an object is created, e.g. a
    /// Namespace's `kubernetes` finalizer, a Job's generated selector, a Service's cluster IP.
    /// Call it after [`Strategy::default`] and after the registry has set the server-owned
    /// metadata (`uid`, `creationTimestamp`), before [`Strategy::validate_create`].
    fn prepare_for_create(&self, obj: &mut Value) {
        let _ = obj;
    }

    /// The part of `PrepareForCreate` that reads the request's user
    /// (`genericapirequest.UserFrom(ctx)`): a CertificateSigningRequest records its requester
    /// in `spec.username`, `uid`, `groups` and `extra`, whatever the client sent. `None` for
    /// the server's own writes. Called before [`Strategy::admit_create`].
    fn set_requester(&self, obj: &mut Value, user: Option<&crate::auth::user::UserInfo>) {
        let _ = (obj, user);
    }

    /// `PrepareForUpdate` and `ValidateUpdate` of a subresource with a strategy of its own (a
    /// CertificateSigningRequest's `status` and `approval`), over `new` as the generic split
    /// left it (the stored object with the sent `status`) and the stored `old`, at the
    /// server's time `now`. `None` (the default): the generic rules apply
    /// ([`Strategy::admit_update`] without `prepare_for_update`). `Err` is a decoding error's
    /// message, `Ok` the validation errors.
    fn admit_subresource_update(
        &self,
        subresource: &str,
        new: &mut Value,
        old: &Value,
        now: jiff::Timestamp,
    ) -> Option<Result<Vec<FieldError>, String>> {
        let _ = (subresource, new, old, now);
        None
    }

    /// `PrepareForUpdate`: what the kind carries over from `old` on an update of the main
    /// resource, e.g. a Service's allocated cluster IP and node ports when the new object omits
    /// them, a Namespace's `spec.finalizers` (changed only through `/finalize`). Call it after
    /// [`Strategy::default`], before [`Strategy::validate_update`].
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let _ = (new, old);
    }

    /// Whether an update of the main resource starts a new `metadata.generation`
    /// (`PrepareForUpdate`): by default when `spec` changed; Deployments also count annotation
    /// changes (a rollback is requested through one), Pods never do.
    fn bumps_generation(&self, new: &Value, old: &Value) -> bool {
        new.get("spec") != old.get("spec")
    }

    /// `CheckGracefulDelete`: the grace period in seconds a deletion of `obj` waits (with
    /// `deletionTimestamp` set) before the object is removed, given the `gracePeriodSeconds` the
    /// client asked for; `None` (the default) or `Some(0)` deletes at once. Only Pods are
    /// deleted gracefully: their kubelet stops the containers first.
    fn graceful_delete_period(&self, obj: &Value, requested: Option<i64>) -> Option<i64> {
        let _ = (obj, requested);
        None
    }

    /// Whether the registry puts its `Name` column first in tables. False for Events, whose
    /// table starts with `Last Seen` and lists the name as a `-o wide` column of its own.
    fn table_has_name_column(&self) -> bool {
        true
    }

    /// Fields of `obj` the kind does not know (`spec.foo`), for `fieldValidation=Strict|Warn`.
    fn unknown_fields(&self, obj: &Value) -> Vec<String> {
        let _ = obj;
        Vec::new()
    }

    /// [`Strategy::unknown_fields`] of a request body, and whether [`Strategy::default`] would
    /// accept it (`Err` is its message), in one pass where the kind can: what a create checks
    /// in its body before [`Strategy::admit_create`] defaults it.
    fn check_body(&self, obj: &Value) -> (Vec<String>, Result<(), String>) {
        let unknown = self.unknown_fields(obj);
        (unknown, self.default(&mut obj.clone()))
    }

    /// [`Strategy::default`], [`Strategy::prepare_for_create`] and
    /// [`Strategy::validate_create`] in turn, as one step: built-in kinds decode the object
    /// once for all three instead of once each. `Err` is `default`'s message; `Ok` holds the
    /// validation errors.
    fn admit_create(&self, obj: &mut Value) -> Result<Vec<FieldError>, String> {
        self.default(obj)?;
        self.prepare_for_create(obj);
        Ok(self.validate_create(obj))
    }

    /// What an update runs over the new object in turn, as one step: [`Strategy::default`],
    /// [`Strategy::prepare_for_update`] when `prepare`, [`Strategy::validate_update`] against
    /// `old`, and [`Strategy::bumps_generation`]. Built-in kinds decode each object once for all
    /// of them. `Err` is `default`'s message; `Ok` holds the validation errors and whether a
    /// spec change bumps the generation.
    fn admit_update(
        &self,
        new: &mut Value,
        old: &Value,
        prepare: bool,
    ) -> Result<(Vec<FieldError>, bool), String> {
        self.default(new)?;
        if prepare {
            self.prepare_for_update(new, old);
        }
        Ok((
            self.validate_update(new, old),
            self.bumps_generation(new, old),
        ))
    }

    /// [`Strategy::admit_update`], also returning [`Strategy::unknown_fields`] of `new` as it
    /// comes in (before defaulting): built-in kinds note them while decoding `new` for the
    /// update instead of decoding it once more.
    #[allow(clippy::type_complexity)]
    fn admit_update_noting_unknown(
        &self,
        new: &mut Value,
        old: &Value,
        prepare: bool,
    ) -> Result<(Vec<FieldError>, bool, Vec<String>), String> {
        let unknown = self.unknown_fields(new);
        let (errors, bumps) = self.admit_update(new, old, prepare)?;
        Ok((errors, bumps, unknown))
    }

    /// Validation on create. Built-in strategies check `metadata` too (see the module docs); the
    /// default checks nothing.
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        let _ = obj;
        Vec::new()
    }

    /// Validation on update, including immutable fields (e.g. a Deployment's selector).
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let _ = old;
        self.validate_create(new)
    }

    /// Field-selector fields of an object besides `metadata.name`/`metadata.namespace`
    /// (e.g. `spec.nodeName`, `status.phase` for pods; `involvedObject.*` for events).
    fn selectable_fields(&self, obj: &Value) -> Vec<(&'static str, String)> {
        let _ = obj;
        Vec::new()
    }

    /// One of [`Strategy::selectable_fields`], by name (`None`: not a selectable field of
    /// the kind). Evaluated for every event of every watch with a field selector; a kind
    /// watched so at volume reads just the field asked for, borrowed from `obj` where it can.
    fn selectable_field<'a>(&self, obj: &'a Value, field: &str) -> Option<Cow<'a, str>> {
        field_named(self.selectable_fields(obj), field).map(Cow::Owned)
    }

    /// How this version is served when another version stores the kind (autoscaling/v1
    /// HorizontalPodAutoscalers are stored as v2): requests to its row are converted to the
    /// storage version's row and answered back in this one (`crate::handlers::converted`).
    /// `None` (the default): the row serves its own objects.
    fn conversion(&self) -> Option<&dyn VersionConversion> {
        None
    }

    /// Table columns after `Name` (kubectl's familiar columns for the kind). The registry adds
    /// `Name` first; `Age` is listed by the strategy where kubectl shows it.
    fn table_columns(&self) -> Vec<TableColumn> {
        vec![table::age_column()]
    }

    /// One table row's cells after `Name`, matching [`Strategy::table_columns`]. `now` is the
    /// server's time, for ages.
    fn table_row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let created = obj["metadata"]["creationTimestamp"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok());
        vec![Value::String(apimachinery::duration::since(created, now))]
    }
}

/// A version of a kind served by converting to and from the version that stores it
/// (`runtime.Scheme.Convert` through the internal type in kube-apiserver).
pub trait VersionConversion: Send + Sync {
    /// The kind objects are stored as; its row serves the requests.
    fn storage_gvk(&self) -> GroupVersionKind;

    /// An object of this version (a request body) as the storage version; `Err` is the
    /// message of a body that does not decode.
    fn to_storage(&self, obj: &Value) -> Result<Value, String>;

    /// A stored object as this version.
    fn to_served(&self, obj: &Value) -> Result<Value, String>;
}

/// The strategy of a kind with no special rules (and the fallback for unknown kinds).
#[derive(Debug, Clone)]
pub struct DefaultStrategy {
    /// The kind served.
    pub gvk: GroupVersionKind,
}

impl Strategy for DefaultStrategy {
    fn gvk(&self) -> GroupVersionKind {
        self.gvk.clone()
    }
}

/// The strategy of each built-in kind miniplane serves.
pub fn builtin_strategies() -> Vec<std::sync::Arc<dyn Strategy>> {
    use std::sync::Arc;
    use typed::Typed;
    vec![
        Arc::new(Typed(namespace::NamespaceRules)),
        Arc::new(Typed(pod::PodRules)),
        Arc::new(Typed(node::NodeRules)),
        Arc::new(Typed(configmap::ConfigMapRules)),
        Arc::new(Typed(secret::SecretRules)),
        Arc::new(Typed(service::ServiceRules)),
        Arc::new(Typed(endpoints::EndpointsRules)),
        Arc::new(Typed(endpointslice::EndpointSliceRules)),
        Arc::new(Typed(serviceaccount::ServiceAccountRules)),
        Arc::new(Typed(lease::LeaseRules)),
        Arc::new(Typed(event::EventRules)),
        Arc::new(Typed(events_v1::EventsV1Rules)),
        Arc::new(Typed(deployment::DeploymentRules)),
        Arc::new(Typed(replicaset::ReplicaSetRules)),
        Arc::new(Typed(replicationcontroller::ReplicationControllerRules)),
        Arc::new(Typed(poddisruptionbudget::PodDisruptionBudgetRules)),
        Arc::new(Typed(daemonset::DaemonSetRules)),
        Arc::new(Typed(controllerrevision::ControllerRevisionRules)),
        Arc::new(Typed(statefulset::StatefulSetRules)),
        Arc::new(Typed(job::JobRules)),
        Arc::new(Typed(cronjob::CronJobRules)),
        Arc::new(Typed(rbac::ClusterRoleBindingRules)),
        Arc::new(Typed(rbac::ClusterRoleRules)),
        Arc::new(Typed(rbac::RoleBindingRules)),
        Arc::new(Typed(rbac::RoleRules)),
        Arc::new(certificates::CertificateSigningRequestStrategy::new()),
        Arc::new(Typed(persistentvolume::PersistentVolumeRules)),
        Arc::new(Typed(persistentvolumeclaim::PersistentVolumeClaimRules)),
        Arc::new(Typed(storageclass::StorageClassRules)),
        Arc::new(Typed(priorityclass::PriorityClassRules)),
        Arc::new(Typed(horizontalpodautoscaler::HorizontalPodAutoscalerRules)),
        Arc::new(horizontalpodautoscaler::v1::HorizontalPodAutoscalerV1Strategy),
    ]
}

/// The value of `field` among `fields` (as [`Strategy::selectable_fields`] lists them).
pub(crate) fn field_named(fields: Vec<(&'static str, String)>, field: &str) -> Option<String> {
    fields
        .into_iter()
        .find(|(name, _)| *name == field)
        .map(|(_, value)| value)
}

/// Test helper: errors rendered as Kubernetes prints them.
#[cfg(test)]
pub(crate) fn messages(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A small but complete object of each built-in kind, as the registry would store it.
    fn sample(gvk: &GroupVersionKind) -> Value {
        let mut obj = json!({
            "apiVersion": gvk.group_version().api_version(),
            "kind": gvk.kind,
            "metadata": {"name": "sample", "namespace": "default", "uid": "u-1", "creationTimestamp": "2024-01-01T00:00:00Z"}
        });
        let template = json!({"metadata": {"labels": {"app": "sample"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        let selector = json!({"matchLabels": {"app": "sample"}});
        let extra = match gvk.kind.as_str() {
            "Namespace" | "Node" => {
                obj["metadata"]
                    .as_object_mut()
                    .map(|m| m.remove("namespace"));
                json!({})
            }
            "PriorityClass" => {
                obj["metadata"]
                    .as_object_mut()
                    .map(|m| m.remove("namespace"));
                json!({"value": 1000})
            }
            "Pod" => json!({"spec": template["spec"]}),
            "Deployment" | "ReplicaSet" | "DaemonSet" | "StatefulSet" => {
                json!({"spec": {"selector": selector, "template": template}})
            }
            "ReplicationController" => {
                json!({"spec": {"selector": {"app": "sample"}, "template": template}})
            }
            "PodDisruptionBudget" => json!({"spec": {"minAvailable": 1, "selector": selector}}),
            "HorizontalPodAutoscaler" => json!({"spec": {"maxReplicas": 3,
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}}),
            "Job" => {
                let mut t = template.clone();
                t["spec"]["restartPolicy"] = json!("Never");
                json!({"spec": {"template": t}})
            }
            "CronJob" => {
                let mut t = template.clone();
                t["spec"]["restartPolicy"] = json!("OnFailure");
                json!({"spec": {"schedule": "@hourly", "jobTemplate": {"spec": {"template": t}}}})
            }
            "Service" => json!({"spec": {"selector": {"app": "sample"}, "ports": [{"port": 80}]}}),
            "EndpointSlice" => {
                json!({"addressType": "IPv4", "endpoints": [{"addresses": ["10.244.0.5"]}],
                                      "ports": [{"name": "", "port": 80, "protocol": "TCP"}]})
            }
            "Lease" => json!({"spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40}}),
            "ControllerRevision" => {
                json!({"data": {"spec": {"template": {"$patch": "replace"}}}, "revision": 1})
            }
            "Role" => {
                json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
            }
            "ClusterRole" => {
                obj["metadata"]
                    .as_object_mut()
                    .map(|m| m.remove("namespace"));
                json!({"rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]})
            }
            "RoleBinding" => {
                json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                       "subjects": [{"kind": "ServiceAccount", "name": "default"}]})
            }
            "ClusterRoleBinding" => {
                obj["metadata"]
                    .as_object_mut()
                    .map(|m| m.remove("namespace"));
                json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                       "subjects": [{"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.k8s.io"}]})
            }
            "CertificateSigningRequest" => {
                obj["metadata"]
                    .as_object_mut()
                    .map(|m| m.remove("namespace"));
                json!({"spec": {"request": certificates::tests::REQUEST_BASE64,
                                "signerName": "kubernetes.io/kube-apiserver-client",
                                "usages": ["client auth"]}})
            }
            "PersistentVolume" => {
                obj["metadata"]
                    .as_object_mut()
                    .map(|m| m.remove("namespace"));
                json!({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                "hostPath": {"path": "/data"}}})
            }
            "PersistentVolumeClaim" => {
                json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
            }
            "StorageClass" => {
                obj["metadata"]
                    .as_object_mut()
                    .map(|m| m.remove("namespace"));
                json!({"provisioner": "miniplane.io/simulated"})
            }
            "Event" if gvk.group.is_empty() => {
                json!({"involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}, "reason": "Started"})
            }
            "Event" => {
                json!({"eventTime": "2024-01-01T00:00:00.000000Z", "reportingController": "c", "reportingInstance": "i",
                              "action": "Act", "reason": "Why", "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}})
            }
            _ => json!({}),
        };
        for (k, v) in extra.as_object().into_iter().flatten() {
            obj[k] = v.clone();
        }
        obj
    }

    #[test]
    fn every_builtin_kind_defaults_validates_and_prints_its_sample() {
        let strategies = builtin_strategies();
        assert_eq!(strategies.len(), 32);
        let now: jiff::Timestamp = "2024-01-01T01:00:00Z".parse().unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for s in &strategies {
            let gvk = s.gvk();
            assert!(seen.insert(gvk.clone()), "{gvk} twice");
            let mut obj = sample(&gvk);
            s.default(&mut obj).unwrap();
            s.prepare_for_create(&mut obj);
            assert_eq!(
                messages(&s.validate_create(&obj)),
                Vec::<String>::new(),
                "{gvk}"
            );
            assert_eq!(
                messages(&s.validate_update(&obj, &obj)),
                Vec::<String>::new(),
                "{gvk}"
            );
            assert_eq!(
                s.table_row(&obj, now).len(),
                s.table_columns().len(),
                "{gvk}"
            );
            assert!(
                s.unknown_fields(&obj).is_empty(),
                "{gvk}: {:?}",
                s.unknown_fields(&obj)
            );
            let status = matches!(
                gvk.kind.as_str(),
                "Pod"
                    | "Node"
                    | "Service"
                    | "Namespace"
                    | "Deployment"
                    | "ReplicaSet"
                    | "DaemonSet"
                    | "StatefulSet"
                    | "Job"
                    | "CronJob"
                    | "CertificateSigningRequest"
                    | "PersistentVolume"
                    | "PersistentVolumeClaim"
                    | "ReplicationController"
                    | "PodDisruptionBudget"
                    | "HorizontalPodAutoscaler"
            );
            assert_eq!(s.has_status_subresource(), status, "{gvk}");
            assert_eq!(
                s.table_has_name_column(),
                !matches!(gvk.kind.as_str(), "Event" | "StorageClass"),
                "{gvk}"
            );
            assert_eq!(
                s.graceful_delete_period(&obj, Some(30)).is_some(),
                gvk.kind == "Pod",
                "{gvk}"
            );
            assert!(!s.bumps_generation(&obj, &obj), "{gvk}");
            // The registry learns the selectable fields from a skeleton object.
            let skeleton = json!({"apiVersion": gvk.group_version().api_version(), "kind": gvk.kind, "metadata": {}});
            let names = |fields: Vec<(&'static str, String)>| {
                fields.into_iter().map(|(f, _)| f).collect::<Vec<_>>()
            };
            assert_eq!(
                names(s.selectable_fields(&skeleton)),
                names(s.selectable_fields(&obj)),
                "{gvk}"
            );
        }
    }

    #[test]
    fn unknown_fields_of_a_deployment() {
        let s = builtin_strategies()
            .into_iter()
            .find(|s| s.gvk().kind == "Deployment")
            .unwrap();
        let mut obj = sample(&s.gvk());
        obj["spec"]["foo"] = json!(1);
        obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = json!("Always");
        assert_eq!(
            s.unknown_fields(&obj),
            vec![
                "spec.foo",
                "spec.template.spec.containers[0].imagePullPolicyy"
            ]
        );
        let mut wrong = sample(&s.gvk());
        wrong["spec"]["replicas"] = json!("three");
        assert_eq!(
            s.default(&mut wrong),
            Err("json: cannot unmarshal string into Go struct field Deployment.spec.replicas of type int32".to_owned())
        );
    }

    #[test]
    fn default_strategy_prints_an_age() {
        let s = DefaultStrategy {
            gvk: GroupVersionKind::new("example.com", "v1", "Widget"),
        };
        let now: jiff::Timestamp = "2024-01-01T00:01:00Z".parse().unwrap();
        let obj = json!({"metadata": {"creationTimestamp": "2024-01-01T00:00:00Z"}});
        assert_eq!(s.table_row(&obj, now), vec![json!("60s")]);
        assert_eq!(s.table_row(&json!({}), now), vec![json!("<unknown>")]);
    }
}
