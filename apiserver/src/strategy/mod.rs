//! Per-kind strategies: defaulting, validation, the spec/status split and table columns
//! (Kubernetes' `pkg/registry/<group>/<resource>/strategy.go`, `pkg/apis/<group>/v1/defaults.go`,
//! `pkg/apis/<group>/validation/validation.go`, and `pkg/printers/internalversion/printers.go`).
//!
//! The generic registry does everything that is the same for every kind (metadata, revisions,
//! watch, patch, delete); a [`Strategy`] adds only what differs per kind. Objects cross this
//! boundary as JSON values so custom resources can use the same path; built-in strategies decode
//! into `k8s-openapi` types where that is convenient, which drops unknown fields exactly as
//! Kubernetes' Go decoding does.

pub mod config_data;
pub mod configmap;
pub mod cron_schedule;
pub mod cronjob;
pub mod daemonset;
pub mod decode;
pub mod deployment;
pub mod endpoints;
pub mod event;
pub mod events_v1;
pub mod field;
pub mod human_duration;
pub mod job;
pub mod lease;
pub mod meta;
pub mod names;
pub mod namespace;
pub mod node;
pub mod pod;
pub mod pod_printer;
pub mod pod_spec;
pub mod qos;
pub mod quantity;
pub mod replicaset;
pub mod secret;
pub mod selector;
pub mod service;
pub mod serviceaccount;
pub mod statefulset;
pub mod table;
pub mod typed;
pub mod workload;

use crate::gvk::GroupVersionKind;
use serde_json::Value;
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
    /// Header, e.g. `Ready`.
    pub name: &'static str,
    /// OpenAPI type: `string`, `integer`, `date`, ...
    pub type_: &'static str,
    /// OpenAPI format, e.g. `name` for the name column, or empty.
    pub format: &'static str,
    /// Description shown by `kubectl explain`-like tools.
    pub description: &'static str,
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

    /// `PrepareForUpdate`: what the kind carries over from `old` on an update of the main
    /// resource, e.g. a Service's allocated cluster IP and node ports when the new object omits
    /// them, a Namespace's `spec.finalizers` (changed only through `/finalize`). Call it after
    /// [`Strategy::default`], before [`Strategy::validate_update`].
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let _ = (new, old);
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

    /// Validation on create (metadata is validated by the registry; this is the kind's part).
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

    /// Table columns after `Name` (kubectl's familiar columns for the kind). The registry adds
    /// `Name` first; `Age` is listed by the strategy where kubectl shows it.
    fn table_columns(&self) -> Vec<TableColumn> {
        vec![TableColumn {
            name: "Age",
            type_: "string",
            format: "",
            description: "CreationTimestamp is a timestamp representing the server time when this object was created.",
            priority: 0,
        }]
    }

    /// One table row's cells after `Name`, matching [`Strategy::table_columns`]. `now` is the
    /// server's time, for ages.
    fn table_row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let _ = (obj, now);
        vec![Value::String(String::from("<unknown>"))]
    }
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
        Arc::new(Typed(serviceaccount::ServiceAccountRules)),
        Arc::new(Typed(lease::LeaseRules)),
        Arc::new(Typed(event::EventRules)),
        Arc::new(Typed(events_v1::EventsV1Rules)),
        Arc::new(Typed(deployment::DeploymentRules)),
        Arc::new(Typed(replicaset::ReplicaSetRules)),
        Arc::new(Typed(daemonset::DaemonSetRules)),
        Arc::new(Typed(statefulset::StatefulSetRules)),
        Arc::new(Typed(job::JobRules)),
        Arc::new(Typed(cronjob::CronJobRules)),
    ]
}
