//! certificates.k8s.io/v1 CertificateSigningRequest (`pkg/registry/certificates/certificates/
//! strategy.go`, its validation in [`validation`], and `printCertificateSigningRequest` of
//! `pkg/printers/internalversion/printers.go`).
//!
//! A CSR is written in three ways, each with its own rules:
//!
//! ```text
//!  create      spec.username/uid/groups/extra := the requesting user; status := {}
//!  update      metadata only: spec and status stay the stored ones
//!  /status     status.certificate (once) and conditions other than Approved/Denied
//!              (the signer's Failed); the stored Approved/Denied are kept
//!  /approval   the conditions only (`kubectl certificate approve|deny`)
//! ```
//!
//! Who may approve or sign for a signer is checked before (`crate::auth::signer`); a new or
//! changed condition without times gets the server's time as `lastUpdateTime` and
//! `lastTransitionTime` (the latter kept from a stored condition of the same type and status).

pub mod validation;

#[cfg(test)]
pub(crate) mod tests;

use super::decode::{decode, encode_over};
use super::meta::validate_object_meta_update;
use super::table::{age_column, column, text};
use super::typed::{KindRules, Typed, age};
use super::{FieldError, Strategy, TableColumn};
use crate::auth::user::UserInfo;
use crate::gvk::GroupVersionKind;
use apimachinery::validation::NameRule;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;
use std::borrow::Cow;
use validation::Options;

/// The API group.
pub const GROUP: &str = "certificates.k8s.io";

/// The CSR rules that work on the typed object alone.
#[derive(Debug, Default, Clone, Copy)]
pub struct CertificateSigningRequestRules;

impl KindRules for CertificateSigningRequestRules {
    type Object = CertificateSigningRequest;

    /// `ValidateCertificateRequestName` accepts any name a URL path can hold.
    const NAME_RULE: NameRule = NameRule::PathSegment;

    const STATUS_SUBRESOURCE: bool = true;

    fn prepare_for_update(
        &self,
        new: &mut CertificateSigningRequest,
        old: &CertificateSigningRequest,
    ) {
        // The main resource changes metadata only (its status was already kept).
        new.spec = old.spec.clone();
    }

    fn validate(&self, obj: &CertificateSigningRequest) -> Vec<FieldError> {
        validation::validate(obj, Options::default())
    }

    fn validate_update(
        &self,
        new: &CertificateSigningRequest,
        old: &CertificateSigningRequest,
    ) -> Vec<FieldError> {
        validation::validate_update(new, old, Options::of(new, Some(old)))
    }

    fn selectable_fields(&self, obj: &CertificateSigningRequest) -> Vec<(&'static str, String)> {
        vec![("spec.signerName", obj.spec.signer_name.clone())]
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![
            age_column(),
            column(
                "SignerName",
                "string",
                "Requested signer for the request. It is a qualified name in the form: `scope-hostname.io/name`. If empty, it will be defaulted:\n 1. If it's a kubelet client certificate, it is assigned\n    \"kubernetes.io/kube-apiserver-client-kubelet\".\n 2. If it's a kubelet serving certificate, it is assigned\n    \"kubernetes.io/kubelet-serving\".\n 3. Otherwise, it is assigned \"kubernetes.io/legacy-unknown\".\nDistribution of trust for signers happens out of band. You can select on this field using `spec.signerName`.",
                0,
            ),
            column("Requestor", "string", "Base64-encoded PKCS#10 CSR data", 0),
            column(
                "RequestedDuration",
                "string",
                "expirationSeconds is the requested duration of validity of the issued certificate. The certificate signer may issue a certificate with a different validity duration so a client must check the delta between the notBefore and and notAfter fields in the issued certificate to determine the actual duration.",
                0,
            ),
            column(
                "Condition",
                "string",
                "Conditions applied to the request, such as approval or denial.",
                0,
            ),
        ]
    }

    fn table_row(&self, obj: &CertificateSigningRequest, now: jiff::Timestamp) -> Vec<Value> {
        let signer = match obj.spec.signer_name.as_str() {
            "" => "<none>".to_string(),
            s => s.to_string(),
        };
        let duration = obj.spec.expiration_seconds.map_or_else(
            || "<none>".to_string(),
            |s| apimachinery::duration::human_duration(jiff::SignedDuration::from_secs(s.into())),
        );
        vec![
            text(age(&obj.metadata, now)),
            text(signer),
            text(obj.spec.username.clone().unwrap_or_default()),
            text(duration),
            text(condition(obj)),
        ]
    }
}

/// `extractCSRStatus`: `Pending`, `Approved` or `Denied`, then `,Failed` and `,Issued`.
pub fn condition(csr: &CertificateSigningRequest) -> String {
    let conditions = csr
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let has = |t: &str| conditions.iter().any(|c| c.type_ == t);
    let mut out = if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    }
    .to_string();
    if has("Failed") {
        out.push_str(",Failed");
    }
    if !validation::certificate(csr).is_empty() {
        out.push_str(",Issued");
    }
    out
}

/// The CSR strategy: the typed rules plus what needs the request (its user, its
/// subresource, its time).
#[derive(Debug, Default, Clone, Copy)]
pub struct CertificateSigningRequestStrategy(pub Typed<CertificateSigningRequestRules>);

impl CertificateSigningRequestStrategy {
    /// The strategy.
    pub fn new() -> Self {
        CertificateSigningRequestStrategy(Typed(CertificateSigningRequestRules))
    }
}

/// The `/status` subresource's name.
const STATUS: &str = "status";
/// The `/approval` subresource's name.
const APPROVAL: &str = "approval";

impl Strategy for CertificateSigningRequestStrategy {
    fn gvk(&self) -> GroupVersionKind {
        self.0.gvk()
    }

    fn has_status_subresource(&self) -> bool {
        true
    }

    fn default(&self, obj: &mut Value) -> Result<(), String> {
        self.0.default(obj)
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        self.0.prepare_for_create(obj);
    }

    fn set_requester(&self, obj: &mut Value, user: Option<&UserInfo>) {
        let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
            return;
        };
        for field in ["username", "uid", "groups", "extra"] {
            spec.remove(field);
        }
        let Some(user) = user else {
            return;
        };
        if !user.name.is_empty() {
            spec.insert("username".into(), Value::String(user.name.clone()));
        }
        if !user.uid.is_empty() {
            spec.insert("uid".into(), Value::String(user.uid.clone()));
        }
        if !user.groups.is_empty() {
            spec.insert("groups".into(), serde_json::json!(user.groups));
        }
        if !user.extra.is_empty() {
            spec.insert("extra".into(), serde_json::json!(user.extra));
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        self.0.prepare_for_update(new, old);
    }

    fn bumps_generation(&self, new: &Value, old: &Value) -> bool {
        self.0.bumps_generation(new, old)
    }

    fn unknown_fields(&self, obj: &Value) -> Vec<String> {
        self.0.unknown_fields(obj)
    }

    fn check_body(&self, obj: &Value) -> (Vec<String>, Result<(), String>) {
        self.0.check_body(obj)
    }

    fn admit_create(&self, obj: &mut Value) -> Result<Vec<FieldError>, String> {
        self.0.admit_create(obj)
    }

    fn admit_update(
        &self,
        new: &mut Value,
        old: &Value,
        prepare: bool,
    ) -> Result<(Vec<FieldError>, bool), String> {
        self.0.admit_update(new, old, prepare)
    }

    fn admit_update_noting_unknown(
        &self,
        new: &mut Value,
        old: &Value,
        prepare: bool,
    ) -> Result<(Vec<FieldError>, bool, Vec<String>), String> {
        self.0.admit_update_noting_unknown(new, old, prepare)
    }

    fn admit_subresource_update(
        &self,
        subresource: &str,
        new: &mut Value,
        old: &Value,
        now: jiff::Timestamp,
    ) -> Option<Result<Vec<FieldError>, String>> {
        if subresource != STATUS && subresource != APPROVAL {
            return None;
        }
        Some(admit_subresource(subresource, new, old, now))
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        self.0.validate_create(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        self.0.validate_update(new, old)
    }

    fn selectable_fields(&self, obj: &Value) -> Vec<(&'static str, String)> {
        self.0.selectable_fields(obj)
    }

    fn selectable_field<'a>(&self, obj: &'a Value, field: &str) -> Option<Cow<'a, str>> {
        self.0.selectable_field(obj, field)
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        self.0.table_columns()
    }

    fn table_row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        self.0.table_row(obj, now)
    }
}

/// `csrStatusStrategy` and `csrApprovalStrategy`: `PrepareForUpdate` then `ValidateUpdate`
/// of a write to `/status` or `/approval` (`new` already holds the stored spec and metadata).
fn admit_subresource(
    subresource: &str,
    new: &mut Value,
    old: &Value,
    now: jiff::Timestamp,
) -> Result<Vec<FieldError>, String> {
    let mut typed: CertificateSigningRequest = decode(new)?;
    let stored: CertificateSigningRequest = decode(old)?;
    typed.spec = stored.spec.clone();
    let mut opts = Options::of(&typed, Some(&stored));
    if subresource == STATUS {
        preserve_condition_instances(&mut typed, &stored, "Approved");
        preserve_condition_instances(&mut typed, &stored, "Denied");
        populate_condition_timestamps(&mut typed, &stored, now);
        opts.allow_setting_certificate = true;
    } else {
        populate_condition_timestamps(&mut typed, &stored, now);
        let conditions = typed.status.take().and_then(|s| s.conditions);
        let mut status = stored.status.clone().unwrap_or_default();
        status.conditions = conditions;
        typed.status = Some(status);
        opts.allow_setting_approval_conditions = true;
    }
    // The options see the prepared object (`getValidationOptions` runs in `ValidateUpdate`).
    let certificate_unchanged = validation::certificate(&typed) == validation::certificate(&stored);
    opts.allow_arbitrary_certificate = certificate_unchanged
        || validation::validate_certificate(validation::certificate(&stored)).is_err();
    encode_over(&typed, new)?;
    let mut errs = validate_object_meta_update(&typed.metadata, &stored.metadata);
    let mut own = validation::validate_update(&typed, &stored, opts);
    // Kubernetes lists the object's errors before the metadata's.
    own.append(&mut errs);
    Ok(own)
}

fn conditions_mut(
    csr: &mut CertificateSigningRequest,
) -> &mut Vec<CertificateSigningRequestCondition> {
    csr.status
        .get_or_insert_with(CertificateSigningRequestStatus::default)
        .conditions
        .get_or_insert_with(Vec::new)
}

fn conditions(csr: &CertificateSigningRequest) -> &[CertificateSigningRequestCondition] {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
}

/// `preserveConditionInstances`: when `new` has as many conditions of `type_` as `old`, they
/// are `old`'s (a `/status` writer cannot change an approval).
fn preserve_condition_instances(
    new: &mut CertificateSigningRequest,
    old: &CertificateSigningRequest,
    type_: &str,
) {
    let old_of_type: Vec<CertificateSigningRequestCondition> = conditions(old)
        .iter()
        .filter(|c| c.type_ == type_)
        .cloned()
        .collect();
    let new_count = conditions(new).iter().filter(|c| c.type_ == type_).count();
    if new_count != old_of_type.len() {
        return;
    }
    let mut kept = old_of_type.into_iter();
    for c in conditions_mut(new).iter_mut().filter(|c| c.type_ == type_) {
        if let Some(old) = kept.next() {
            *c = old;
        }
    }
}

/// `populateConditionTimestamps`: conditions without times get `now`; a missing
/// `lastTransitionTime` is the stored one of a condition with the same type and status.
fn populate_condition_timestamps(
    new: &mut CertificateSigningRequest,
    old: &CertificateSigningRequest,
    now: jiff::Timestamp,
) {
    let stored: Vec<CertificateSigningRequestCondition> = conditions(old).to_vec();
    let Some(list) = new.status.as_mut().and_then(|s| s.conditions.as_mut()) else {
        return;
    };
    for c in list.iter_mut() {
        if c.last_update_time.is_none() {
            c.last_update_time = Some(Time(now));
        }
        if c.last_transition_time.is_none() {
            let kept = stored
                .iter()
                .find(|o| o.type_ == c.type_ && o.status == c.status)
                .and_then(|o| o.last_transition_time.clone());
            c.last_transition_time = Some(kept.unwrap_or(Time(now)));
        }
    }
}
