//! What happens to an object before it is written: type checks, unknown-field validation,
//! defaulting, server-owned metadata, the spec/status split, generation and managedFields.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/registry/rest/create.go` (`BeforeCreate`),
//! `rest/update.go` (`BeforeUpdate`), the decoding steps of `endpoints/handlers/create.go` and
//! `update.go`, and `storage/names/generate.go`. Everything here is a synchronous function over
//! JSON values: the handlers call them inside the store's read-modify-write loop.
//!
//! ```text
//! create: check_type → unknown_fields → default → before_create (name, uid, timestamps,
//!         generation=1, status reset, validate_create, managedFields)
//! update: check_type → unknown_fields → before_update (resourceVersion/uid checks, copy
//!         server-owned metadata, keep status | take only status, default, validate_update,
//!         generation+1 on spec change, managedFields)
//! ```

use crate::error::{ApiError, Result};
use crate::meta::{self, MetaField};
use crate::patch;
use crate::registry::{DeletePolicy, ResourceInfo};
use crate::request::FieldValidation;
use crate::service_alloc::Requested;
use crate::storage::{ObjectRef, target};
use crate::strategy::{FieldError, FieldErrorKind};
use serde_json::Value;

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WritePart {
    /// The main resource: everything but `status` (for kinds with a status subresource).
    Main,
    /// The `/status` subresource: only `status`.
    Status,
    /// The `/scale` subresource: `spec.replicas` of the parent, written as a main update.
    Scale,
    /// `namespaces/{name}/finalize`: `spec.finalizers`, which main updates may not change.
    Finalize,
    /// `certificatesigningrequests/{name}/approval`: like `/status`, only `status` is taken
    /// from the request; the kind's strategy keeps only its conditions.
    Approval,
    /// `pods/{name}/ephemeralcontainers`: only `spec.ephemeralContainers` is taken from the
    /// request (`dropNonEphemeralContainerUpdates`); the kind's strategy validates the change.
    EphemeralContainers,
}

impl WritePart {
    /// The subresource recorded in managedFields.
    pub fn subresource(self) -> Option<&'static str> {
        match self {
            WritePart::Main => None,
            WritePart::Status => Some("status"),
            WritePart::Scale => Some("scale"),
            WritePart::Finalize => Some("finalize"),
            WritePart::Approval => Some("approval"),
            WritePart::EphemeralContainers => Some("ephemeralcontainers"),
        }
    }

    /// Whether the strategy's `prepare_for_update` (main-resource rules) applies.
    fn prepares_main_update(self) -> bool {
        matches!(self, WritePart::Main | WritePart::Scale)
    }
}

/// The per-request facts a write needs.
#[derive(Debug, Clone)]
pub struct WriteContext {
    /// The field manager recorded in managedFields; `None` when server-side apply already did.
    pub manager: Option<String>,
    /// The server's time for this request.
    pub now: jiff::Timestamp,
    /// Where a new object's generated name and UID come from (random, or the server's seed).
    pub ids: std::sync::Arc<crate::ids::Ids>,
    /// Which part is written.
    pub part: WritePart,
    /// The privilege-escalation check of a write of an RBAC object by a user outside
    /// `system:masters` under RBAC (`crate::auth::rbac::escalation`); `None` otherwise.
    pub escalation: Option<std::sync::Arc<crate::auth::rbac::escalation::EscalationCheck>>,
    /// The `ServiceAccount` admission plugin, with the pod's ServiceAccount looked up, for a
    /// create of a pod while the plugin is on (`crate::admission::serviceaccount`); `None`
    /// otherwise.
    pub service_account:
        Option<std::sync::Arc<crate::admission::serviceaccount::ServiceAccountAdmission>>,
    /// Who writes (after impersonation), for the kinds whose `PrepareForCreate` records it
    /// ([`crate::strategy::Strategy::set_requester`]); `None` for the server's own writes.
    pub user: Option<crate::auth::user::UserInfo>,
    /// The CSR approval and signing admission checks of a write by a user outside
    /// `system:masters` under RBAC (`crate::auth::signer`); `None` otherwise.
    pub signer_check: Option<std::sync::Arc<crate::auth::signer::SignerCheck>>,
}

impl WriteContext {
    /// A write of the API server's own (a controller inside it, as `kube-apiserver` field
    /// manager): the main resource, no user, no admission checks.
    pub fn server_own(
        manager: &str,
        now: jiff::Timestamp,
        ids: std::sync::Arc<crate::ids::Ids>,
    ) -> WriteContext {
        WriteContext {
            manager: Some(manager.to_string()),
            now,
            ids,
            part: WritePart::Main,
            escalation: None,
            service_account: None,
            user: None,
            signer_check: None,
        }
    }
}

/// Checks `apiVersion`/`kind` of a body against the resource, filling them in when absent
/// (Kubernetes defaults them from the URL).
pub fn check_type(info: &ResourceInfo, obj: &mut Value) -> Result<()> {
    let expected_av = info.api_version();
    let av = meta::api_version(obj).map(str::to_string);
    let kind = meta::kind(obj).map(str::to_string);
    if let Some(av) = &av
        && *av != expected_av
    {
        return Err(ApiError::BadRequest(format!(
            "the API version in the data ({av}) does not match the expected API version ({expected_av})"
        )));
    }
    if let Some(k) = &kind
        && *k != info.kind
    {
        let version = info.gvr.version.clone();
        return Err(ApiError::BadRequest(format!(
            "{k} in version \"{version}\" cannot be handled as a {}: the object provided is of kind {k}, not {}",
            info.kind, info.kind
        )));
    }
    meta::set_type(obj, &expected_av, &info.kind);
    Ok(())
}

/// Unknown fields per `?fieldValidation=`: `Strict` refuses (400), `Warn` returns the
/// `Warning` header texts, `Ignore` returns nothing. Defaulting drops the fields afterwards.
pub fn unknown_fields(
    info: &ResourceInfo,
    obj: &Value,
    mode: FieldValidation,
) -> Result<Vec<String>> {
    if mode == FieldValidation::Ignore {
        return Ok(Vec::new());
    }
    render_unknown(info, info.strategy.unknown_fields(obj), mode)
}

/// Unknown fields per `?fieldValidation=` (see [`unknown_fields`]): none under `Ignore`, a
/// 400 under `Strict`, else the warnings.
pub fn render_unknown(
    info: &ResourceInfo,
    unknown: Vec<String>,
    mode: FieldValidation,
) -> Result<Vec<String>> {
    render_strict(info, &[], unknown, mode)
}

/// Duplicated keys and unknown fields per `?fieldValidation=` ([`render_unknown`]), reported
/// as `duplicate field "<path>"` before the `unknown field "<path>"` errors.
pub fn render_strict(
    info: &ResourceInfo,
    duplicates: &[String],
    unknown: Vec<String>,
    mode: FieldValidation,
) -> Result<Vec<String>> {
    if mode == FieldValidation::Ignore || (unknown.is_empty() && duplicates.is_empty()) {
        return Ok(Vec::new());
    }
    let mut rendered = crate::json_strict::duplicate_errors(duplicates);
    rendered.extend(unknown.iter().map(|f| format!("unknown field \"{f}\"")));
    match mode {
        FieldValidation::Strict => Err(ApiError::BadRequest(format!(
            "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
            info.kind,
            info.gvr.version,
            info.kind,
            rendered.join(", ")
        ))),
        _ => Ok(rendered),
    }
}

/// Runs the strategy's defaulting; a decode failure is a 400 worded as Kubernetes'
/// `transformDecodeError`.
pub fn default(info: &ResourceInfo, obj: &mut Value) -> Result<()> {
    info.strategy
        .default(obj)
        .map_err(|msg| decode_error(info, &msg))
}

/// The 400 for a body that does not decode into the kind.
fn decode_error(info: &ResourceInfo, msg: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "{} in version \"{}\" cannot be handled as a {}: {msg}",
        info.kind, info.gvr.version, info.kind
    ))
}

/// What a create checks in its body before [`before_create`] defaults it: duplicated keys and
/// [`unknown_fields`]
/// (a 400 under `Strict`, else the warnings) and that it decodes (the 400 [`default`] gives) —
/// in one decoding of the body where the kind can.
pub fn check_body(
    info: &ResourceInfo,
    obj: &Value,
    duplicates: &[String],
    mode: FieldValidation,
) -> Result<Vec<String>> {
    let (unknown, decodes) = info.strategy.check_body(obj);
    let warnings = render_strict(info, duplicates, unknown, mode)?;
    decodes.map_err(|msg| decode_error(info, &msg))?;
    Ok(warnings)
}

fn invalid(info: &ResourceInfo, name: &str, errors: Vec<FieldError>) -> ApiError {
    ApiError::Invalid {
        target: target(info, name),
        errors,
    }
}

fn field_error(
    kind: FieldErrorKind,
    field: &str,
    value: Option<String>,
    detail: &str,
) -> FieldError {
    FieldError {
        kind,
        field: field.to_string(),
        value,
        detail: detail.to_string(),
    }
}

/// Prepares a new object: namespace from the URL, name (or a generated one), uid,
/// creationTimestamp, generation 1, status reset where the kind does so, validation, and a
/// managedFields entry. `obj` has passed [`check_type`] and [`default`].
pub fn before_create(
    info: &ResourceInfo,
    namespace: Option<&str>,
    obj: &mut Value,
    ctx: &WriteContext,
) -> Result<()> {
    if info.namespaced {
        match (meta::namespace(obj), namespace) {
            (Some(body), Some(url)) if body != url => {
                return Err(ApiError::BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request".into(),
                ));
            }
            _ => meta::set_meta_str(obj, MetaField::Namespace, namespace),
        }
    } else {
        meta::set_meta_str(obj, MetaField::Namespace, None);
    }
    // Admission runs before the name is generated: a refusal names the `generateName`.
    if let Some(admission) = &ctx.service_account {
        let volume = format!(
            "{}-",
            crate::admission::serviceaccount::SERVICE_ACCOUNT_VOLUME_NAME
        );
        admission.admit(info, obj, || ctx.ids.name(&volume))?;
    }
    if meta::name(obj).is_none() {
        match meta::generate_name(obj).map(str::to_string) {
            Some(base) => meta::set_meta_str(obj, MetaField::Name, Some(&ctx.ids.name(&base))),
            None => {
                return Err(invalid(
                    info,
                    "",
                    vec![field_error(
                        FieldErrorKind::Required,
                        "metadata.name",
                        None,
                        "name or generateName is required",
                    )],
                ));
            }
        }
    }
    meta::drop_empty_meta_lists(obj);
    if let Some(check) = &ctx.escalation {
        check.check(&info.gvr.resource, namespace, obj, None)?;
    }
    let name = meta::name(obj).unwrap_or_default().to_string();
    check_path_segment(info, &name)?;
    // What the client asked for itself, before defaulting picks the rest.
    let requested = info.allocations.as_ref().map(|_| Requested::of(obj));
    let uid = ctx.ids.uid(&format!(
        "{}/{}/{name}",
        info.gvr.resource,
        namespace.unwrap_or_default()
    ));
    meta::set_meta_str(obj, MetaField::Uid, Some(&uid));
    meta::set_meta_str(
        obj,
        MetaField::CreationTimestamp,
        Some(&meta::format_time(ctx.now)),
    );
    meta::set_meta_str(obj, MetaField::ResourceVersion, None);
    meta::set_meta_str(obj, MetaField::DeletionTimestamp, None);
    meta::set_meta_i64(obj, MetaField::DeletionGracePeriodSeconds, None);
    meta::set_meta_i64(obj, MetaField::Generation, Some(1));
    if info.reset_status_on_create {
        meta::set_status(obj, None);
    }
    info.strategy.set_requester(obj, ctx.user.as_ref());
    // default → prepare_for_create → validate_create, in one decoding of the object.
    let errors = info
        .strategy
        .admit_create(obj)
        .map_err(|msg| decode_error(info, &msg))?;
    if !errors.is_empty() {
        return Err(invalid(info, &name, errors));
    }
    // A valid Service takes its cluster IP and node ports (`BeginCreate`'s allocation).
    if let (Some(allocations), Some(requested)) = (&info.allocations, &requested) {
        let owner = format!("{}/{name}", namespace.unwrap_or_default());
        allocations.reserve(&owner, &name, requested, obj)?;
    }
    if let Some(manager) = &ctx.manager {
        patch::update_managed_fields(None, obj, &info.gvk(), manager, None, ctx.now);
    }
    Ok(())
}

/// A name must be usable as one URL path segment and one store key segment
/// (`path.ValidatePathSegmentName`), whatever the kind's own name rules are.
fn check_path_segment(info: &ResourceInfo, name: &str) -> Result<()> {
    let problem = match name {
        "." | ".." => Some(format!("may not be '{name}'")),
        n if n.contains('/') => Some("may not contain '/'".to_string()),
        n if n.contains('%') => Some("may not contain '%'".to_string()),
        _ => None,
    };
    match problem {
        Some(detail) => Err(invalid(
            info,
            name,
            vec![field_error(
                FieldErrorKind::Invalid,
                "metadata.name",
                Some(format!("{name:?}")),
                &detail,
            )],
        )),
        None => Ok(()),
    }
}

/// Prepares an update of `old` to `new`. Checks the resourceVersion and uid the client sent
/// (409 on mismatch), keeps server-owned metadata, applies the spec/status split, defaults,
/// validates, bumps generation on spec changes (kinds with status) and records managedFields.
pub fn before_update(r: &ObjectRef, old: &Value, new: Value, ctx: &WriteContext) -> Result<Value> {
    before_update_noting_unknown(r, old, new, ctx, false).map(|(prepared, _)| prepared)
}

/// [`before_update`], also returning the unknown fields of `new` as sent (what
/// [`Strategy::unknown_fields`](crate::strategy::Strategy::unknown_fields) gives) when
/// `note_unknown`. They are noted while `new` is decoded for defaulting; only when the
/// spec/status split replaced a part of `new` that differs from `old` is `new` decoded once
/// more for them, as sent.
pub fn before_update_noting_unknown(
    r: &ObjectRef,
    old: &Value,
    new: Value,
    ctx: &WriteContext,
    note_unknown: bool,
) -> Result<(Value, Vec<String>)> {
    let info = &r.info;
    if let Some(rv) = meta::resource_version(&new)
        && Some(rv) != meta::resource_version(old)
    {
        return Err(r.modified());
    }
    if let (Some(uid), Some(old_uid)) = (meta::uid(&new), meta::uid(old))
        && uid != old_uid
    {
        return Err(ApiError::Conflict {
            target: r.target(),
            detail: format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {old_uid}"
            ),
        });
    }
    // The part of `new` a write of one part does not change is `old`'s. When that part of
    // `new` already equals `old`'s, the object decoded below holds every field `new` was sent
    // with (the metadata copied from `old` after this are scalars, with no fields inside).
    let requested = info
        .allocations
        .as_ref()
        .filter(|_| ctx.part == WritePart::Main)
        .map(|_| Requested::of(&new));
    let (mut new, sent_unknown) = match ctx.part {
        WritePart::Main | WritePart::Scale | WritePart::Finalize => {
            let sent_unknown =
                (note_unknown && info.has_status() && meta::status(&new) != meta::status(old))
                    .then(|| info.strategy.unknown_fields(&new));
            let mut n = new;
            if info.has_status() {
                meta::set_status(&mut n, meta::status(old).cloned());
            }
            (n, sent_unknown)
        }
        WritePart::Status | WritePart::Approval => {
            // Usually (a status PATCH) only the status was sent different: then `new` is
            // already what the write keeps, and it is compared with `old` once.
            let differs = !equal_but_status(&new, old);
            let sent_unknown =
                (note_unknown && differs).then(|| info.strategy.unknown_fields(&new));
            let kept = if differs {
                with_status_of(old, new)
            } else {
                new
            };
            (kept, sent_unknown)
        }
        WritePart::EphemeralContainers => {
            let sent_unknown = note_unknown.then(|| info.strategy.unknown_fields(&new));
            (with_ephemeral_containers_of(old, &new), sent_unknown)
        }
    };
    for f in MetaField::SERVER_OWNED {
        meta::copy_meta(old, &mut new, f);
    }
    meta::copy_meta(old, &mut new, MetaField::Name);
    meta::copy_meta(old, &mut new, MetaField::Namespace);
    meta::copy_meta(old, &mut new, MetaField::ResourceVersion);
    meta::drop_empty_meta_lists(&mut new);
    if let Some(check) = &ctx.escalation {
        check.check(&info.gvr.resource, r.namespace.as_deref(), &new, Some(old))?;
    }
    if let (Some(check), Some(sub)) = (&ctx.signer_check, ctx.part.subresource()) {
        check.check(&r.info, sub, &new, old)?;
    }
    // default → prepare_for_update → validate_update (and whether the generation moves), in
    // one decoding of each object; the results are used in Kubernetes' order below.
    // managedFields sent back as stored (by a patch that does not touch them) were checked when
    // they were stored: they skip the typed round trip below and are put back as they are.
    let stored_managed_fields = take_stored_managed_fields(&mut new, old);
    let prepare = ctx.part.prepares_main_update();
    let own_rules = match ctx.part.subresource() {
        Some(sub) if !prepare => info
            .strategy
            .admit_subresource_update(sub, &mut new, old, ctx.now),
        _ => None,
    };
    let (errors, bumps_generation, unknown) = if let Some(own) = own_rules {
        let errors = own.map_err(|msg| decode_error(info, &msg))?;
        let unknown = match sent_unknown {
            Some(unknown) => unknown,
            None if note_unknown => info.strategy.unknown_fields(&new),
            None => Vec::new(),
        };
        (errors, false, unknown)
    } else if note_unknown && sent_unknown.is_none() {
        info.strategy
            .admit_update_noting_unknown(&mut new, old, prepare)
            .map_err(|msg| decode_error(info, &msg))?
    } else {
        let (errors, bumps) = info
            .strategy
            .admit_update(&mut new, old, prepare)
            .map_err(|msg| decode_error(info, &msg))?;
        (errors, bumps, sent_unknown.unwrap_or_default())
    };
    if let Some(entries) = stored_managed_fields {
        meta::metadata_mut(&mut new).insert(MetaField::ManagedFields.json_name().into(), entries);
    }
    if meta::deletion_timestamp(old).is_some() {
        let before = meta::finalizers(old);
        let added: Vec<String> = meta::finalizers(&new)
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        if !added.is_empty() {
            return Err(invalid(
                info,
                &r.name,
                vec![field_error(
                    FieldErrorKind::Forbidden,
                    "metadata.finalizers",
                    None,
                    &format!(
                        "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                        added
                            .iter()
                            .map(|f| format!("{f:?}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )],
            ));
        }
    }
    if !errors.is_empty() {
        return Err(invalid(info, &r.name, errors));
    }
    // A valid Service update takes what it newly uses (`BeginUpdate`'s allocation); what it
    // stops using is released once the write is stored.
    if let (Some(allocations), Some(requested)) = (&info.allocations, &requested) {
        let owner = format!("{}/{}", r.namespace.as_deref().unwrap_or_default(), r.name);
        allocations.reserve(&owner, &r.name, requested, &mut new)?;
    }
    // Custom resources count generations with or without a status subresource
    // (`customResourceStrategy.PrepareForUpdate`); built-in kinds only with one.
    if (info.has_status() || info.crd.is_some())
        && matches!(ctx.part, WritePart::Main | WritePart::Scale)
        && bumps_generation
    {
        meta::set_meta_i64(
            &mut new,
            MetaField::Generation,
            Some(meta::generation(old) + 1),
        );
    }
    if let Some(manager) = &ctx.manager {
        patch::update_managed_fields(
            Some(old),
            &mut new,
            &info.gvk(),
            manager,
            ctx.part.subresource(),
            ctx.now,
        );
    }
    Ok((new, unknown))
}

/// Takes `metadata.managedFields` out of `new` when they are `old`'s.
fn take_stored_managed_fields(new: &mut Value, old: &Value) -> Option<Value> {
    let field = MetaField::ManagedFields.json_name();
    let stored = old.get("metadata")?.get(field)?;
    let metadata = new.get_mut("metadata")?.as_object_mut()?;
    if metadata.get(field) == Some(stored) {
        metadata.remove(field)
    } else {
        None
    }
}

/// Whether `new` and `old` are equal but for their top-level `status`, and but for `old`'s
/// `metadata.managedFields` when `new` has none (a write that leaves them out keeps the stored
/// ones: a merge patch's result leaves them out, [`crate::patch::json_merge_patch_of_stored`]).
fn equal_but_status(new: &Value, old: &Value) -> bool {
    match (new.as_object(), old.as_object()) {
        (Some(n), Some(o)) => {
            let rest = |m: &'_ serde_json::Map<String, Value>| {
                m.len() - usize::from(m.contains_key("status"))
            };
            rest(n) == rest(o)
                && n.iter()
                    .filter(|(k, _)| k.as_str() != "status")
                    .all(|(k, v)| match o.get(k) {
                        Some(ov) if k == "metadata" => metadata_equal(v, ov),
                        ov => ov == Some(v),
                    })
        }
        _ => new == old,
    }
}

/// Whether `new`'s metadata equals `old`'s, `old`'s managedFields aside when `new` has none.
fn metadata_equal(new: &Value, old: &Value) -> bool {
    let field = MetaField::ManagedFields.json_name();
    match (new.as_object(), old.as_object()) {
        (Some(n), Some(o)) if !n.contains_key(field) && o.contains_key(field) => {
            n.len() + 1 == o.len() && n.iter().all(|(k, v)| o.get(k) == Some(v))
        }
        _ => new == old,
    }
}

/// `old` with the `status` of `new` (none when `new` has none), as a status write keeps it.
/// Built from `new`, whose other members are usually `old`'s already: only those that differ
/// are copied from `old`.
fn with_status_of(old: &Value, mut new: Value) -> Value {
    let (Some(n), Some(o)) = (new.as_object_mut(), old.as_object()) else {
        let mut n = old.clone();
        meta::set_status(&mut n, meta::status(&new).cloned());
        return n;
    };
    n.retain(|k, _| k == "status" || o.contains_key(k));
    for (k, v) in o.iter().filter(|(k, _)| k.as_str() != "status") {
        if n.get(k) != Some(v) {
            n.insert(k.clone(), v.clone());
        }
    }
    new
}

/// `old` with the `spec.ephemeralContainers` of `new` (none when `new` has none): everything
/// else a write to `pods/{name}/ephemeralcontainers` sends is dropped
/// (`dropNonEphemeralContainerUpdates` in `pkg/registry/core/pod/strategy.go`).
fn with_ephemeral_containers_of(old: &Value, new: &Value) -> Value {
    let mut kept = old.clone();
    let sent = new
        .get("spec")
        .and_then(|s| s.get("ephemeralContainers"))
        .filter(|e| !e.is_null())
        .cloned();
    if let Some(spec) = kept.get_mut("spec").and_then(Value::as_object_mut) {
        match sent {
            Some(list) => {
                spec.insert("ephemeralContainers".to_owned(), list);
            }
            None => {
                spec.remove("ephemeralContainers");
            }
        }
    }
    kept
}

/// Whether an object marked for deletion has no finalizers left and must now be removed
/// (for namespaces, `spec.finalizers` must be empty too).
pub fn finalized(info: &ResourceInfo, obj: &Value) -> bool {
    meta::deletion_timestamp(obj).is_some()
        && meta::finalizers(obj).is_empty()
        && (info.delete_policy != DeletePolicy::Namespace || meta::spec_finalizers(obj).is_empty())
        && (info.delete_policy != DeletePolicy::GracefulPod
            || meta::deletion_grace_period_seconds(obj).unwrap_or(0) == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A merge patch's result without the stored managedFields
    /// (`json_merge_patch_of_stored`) is written exactly as the full result with them: the
    /// same object, the same managedFields.
    #[test]
    fn a_merge_patch_without_the_stored_managed_fields_writes_what_one_with_them_does() {
        use crate::gvk::GroupVersion;
        use crate::patch::{json_merge_patch, json_merge_patch_of_stored};
        let info = crate::registry::Registry::builtin()
            .lookup(&GroupVersion::new("", "v1"), "pods")
            .expect("pods are built in");
        let r = ObjectRef {
            info,
            namespace: Some("default".into()),
            name: "web".into(),
        };
        let ctx = |manager: &str, part| WriteContext {
            manager: Some(manager.into()),
            now: "2026-12-02T23:00:00Z".parse().expect("a time"),
            ids: Default::default(),
            part,
            escalation: None,
            service_account: None,
            user: None,
            signer_check: None,
        };
        // A pod created by one manager and bound, then written by the kubelet.
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}});
        before_create(
            &r.info,
            Some("default"),
            &mut pod,
            &ctx("rs", WritePart::Main),
        )
        .expect("creates");
        meta::set_meta_str(&mut pod, MetaField::ResourceVersion, Some("5"));
        let running = json!({"status": {"phase": "Running", "podIP": "10.0.0.5",
            "conditions": [{"type": "Ready", "status": "True"}]}});
        let kubelet = before_update(
            &r,
            &pod,
            json_merge_patch(&pod, &running),
            &ctx("kubelet", WritePart::Status),
        )
        .expect("the kubelet's write");
        let patches = [
            (
                "a status write",
                json!({"status": {"podIP": "10.0.0.6"}}),
                WritePart::Status,
            ),
            (
                "a status write that changes nothing",
                json!({"status": {"phase": "Running"}}),
                WritePart::Status,
            ),
            (
                "a status write with metadata",
                json!({"metadata": {"labels": {"b": "c"}}, "status": {"phase": "Failed"}}),
                WritePart::Status,
            ),
            (
                "a label",
                json!({"metadata": {"labels": {"tier": "web"}}}),
                WritePart::Main,
            ),
            (
                "an image",
                json!({"spec": {"containers": [{"name": "nginx", "image": "nginx:1.28"}]}}),
                WritePart::Main,
            ),
            (
                "managedFields removed",
                json!({"metadata": {"managedFields": null}}),
                WritePart::Main,
            ),
            (
                "managedFields set",
                json!({"metadata": {"managedFields": [{"manager": "x", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {}}}}]}}),
                WritePart::Main,
            ),
        ];
        for (what, patch, part) in patches {
            let full = before_update(
                &r,
                &kubelet,
                json_merge_patch(&kubelet, &patch),
                &ctx("me", part),
            );
            let lean = before_update(
                &r,
                &kubelet,
                json_merge_patch_of_stored(&kubelet, &patch),
                &ctx("me", part),
            );
            match (full, lean) {
                (Ok(full), Ok(lean)) => {
                    assert_eq!(lean, full, "{what}");
                    assert!(
                        lean["metadata"]["managedFields"].is_array(),
                        "{what}: {lean}"
                    );
                }
                (full, lean) => assert_eq!(full.is_ok(), lean.is_ok(), "{what}"),
            }
        }
    }

    #[test]
    fn type_checks_fill_in_and_refuse() {
        let info = ResourceInfo::new("apps", "v1", "Deployment", "deployments", true);
        let mut o = json!({});
        assert!(check_type(&info, &mut o).is_ok());
        assert_eq!(o["apiVersion"], "apps/v1");
        let mut wrong = json!({"apiVersion": "v1", "kind": "Deployment"});
        assert!(matches!(
            check_type(&info, &mut wrong),
            Err(ApiError::BadRequest(_))
        ));
        let mut wrong_kind = json!({"apiVersion": "apps/v1", "kind": "Pod"});
        assert!(matches!(
            check_type(&info, &mut wrong_kind),
            Err(ApiError::BadRequest(_))
        ));
    }
}
