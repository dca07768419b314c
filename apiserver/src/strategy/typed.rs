//! The bridge from JSON to typed per-kind rules: [`KindRules`] is what a built-in kind writes
//! (over its `k8s-openapi` type), [`Typed`] turns it into a [`Strategy`] the registry calls
//! with JSON.
//!
//! ```text
//!  registry ──JSON──▶ Typed<R>: Strategy ──decode──▶ R::Object ──▶ R::set_defaults / R::validate / R::table_row
//!                                  ◀──encode──
//! ```
//!
//! Kubernetes does the same split: the generic store (`registry/generic/registry/store.go`)
//! calls a `RESTCreateStrategy` per kind, which works on the typed internal object. Every
//! built-in kind also gets `metadata` validation here (`ValidateObjectMeta` with the kind's
//! [`NameRule`]), so kind files hold only their own rules.

use super::decode::{decode, decode_noting_unknown, encode, encode_over};
use super::meta::{validate_object_meta, validate_object_meta_update};
use super::table::age_column;
use super::{FieldError, FieldErrorKind, Strategy, TableColumn};
use crate::gvk::GroupVersionKind;
use apimachinery::duration::since;
use apimachinery::validation::NameRule;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{Metadata, NamespaceResourceScope, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::any::TypeId;
use std::borrow::Cow;

/// The rules of one built-in kind, over its typed object. Every method but the object type has
/// a default for a kind without special rules.
pub trait KindRules: Send + Sync + 'static {
    /// The `k8s-openapi` type of the kind.
    type Object: Resource + Metadata<Ty = ObjectMeta> + Serialize + DeserializeOwned;

    /// The syntax `metadata.name` must have.
    const NAME_RULE: NameRule = NameRule::Dns1123Subdomain;

    /// Whether the kind has a `status` subresource.
    const STATUS_SUBRESOURCE: bool = false;

    /// Whether a new object keeps the `status` its creator sent. Kinds with a status subresource
    /// start with an empty status (their `PrepareForCreate` resets it) unless this is true, as for
    /// Nodes, whose kubelet registers them with a status.
    const KEEP_STATUS_ON_CREATE: bool = false;

    /// `SetDefaults_<Kind>` plus what the kind's `PrepareForCreate` fills in.
    fn set_defaults(&self, obj: &mut Self::Object) {
        let _ = obj;
    }

    /// `PrepareForCreate` (see [`Strategy::prepare_for_create`]).
    fn prepare_for_create(&self, obj: &mut Self::Object) {
        let _ = obj;
    }

    /// Resets the status of a new object to empty (`{}`) on the typed object, as the
    /// `PrepareForCreate` of a kind with a status subresource does first; `false` leaves it to
    /// [`Typed`], which does it on the JSON (an encoding and a decoding more). Kinds created
    /// at volume implement it.
    fn reset_status(&self, obj: &mut Self::Object) -> bool {
        let _ = obj;
        false
    }

    /// `PrepareForUpdate` (see [`Strategy::prepare_for_update`]).
    fn prepare_for_update(&self, new: &mut Self::Object, old: &Self::Object) {
        let _ = (new, old);
    }

    /// See [`Strategy::bumps_generation`].
    fn bumps_generation(
        &self,
        new: &Self::Object,
        old: &Self::Object,
        json: (&Value, &Value),
    ) -> bool {
        let _ = (new, old);
        json.0.get("spec") != json.1.get("spec")
    }

    /// See [`Strategy::graceful_delete_period`].
    fn graceful_delete_period(&self, obj: &Self::Object, requested: Option<i64>) -> Option<i64> {
        let _ = (obj, requested);
        None
    }

    /// Whether tables lead with the registry's `Name` column.
    const TABLE_HAS_NAME_COLUMN: bool = true;

    /// Validation of the kind's own fields on create (metadata is checked by [`Typed`]).
    fn validate(&self, obj: &Self::Object) -> Vec<FieldError> {
        let _ = obj;
        Vec::new()
    }

    /// Validation on update; by default the create rules on the new object.
    fn validate_update(&self, new: &Self::Object, old: &Self::Object) -> Vec<FieldError> {
        let _ = old;
        self.validate(new)
    }

    /// Validation on create; by default [`KindRules::validate`] (Pods also refuse ephemeral
    /// containers there).
    fn validate_create(&self, obj: &Self::Object) -> Vec<FieldError> {
        self.validate(obj)
    }

    /// Whether a write to `subresource` follows the kind's own rules
    /// ([`KindRules::admit_subresource_update`]); false (the default): the generic ones.
    fn has_subresource_rules(&self, subresource: &str) -> bool {
        let _ = subresource;
        false
    }

    /// `PrepareForUpdate` then `ValidateUpdate` of the subresource's own strategy, over `new`
    /// as the generic split left it and the stored `old` (metadata is checked by [`Typed`]);
    /// called only when [`KindRules::has_subresource_rules`]. Returns the validation errors.
    fn admit_subresource_update(
        &self,
        subresource: &str,
        new: &mut Self::Object,
        old: &Self::Object,
    ) -> Vec<FieldError> {
        let _ = (subresource, new, old);
        Vec::new()
    }

    /// Field-selector fields besides `metadata.name`/`metadata.namespace`.
    fn selectable_fields(&self, obj: &Self::Object) -> Vec<(&'static str, String)> {
        let _ = obj;
        Vec::new()
    }

    /// The same fields read straight from the stored JSON, for kinds watched with field
    /// selectors at volume (pods: the scheduler's `spec.nodeName=`, each kubelet's
    /// `spec.nodeName=<node>`): a watch evaluates them on every event, for the object and its
    /// previous version, and decoding a whole typed object for that was most of its cost.
    /// `None` (the default): decode and call [`KindRules::selectable_fields`].
    fn selectable_fields_json(&self, obj: &Value) -> Option<Vec<(&'static str, String)>> {
        let _ = obj;
        None
    }

    /// One of [`KindRules::selectable_fields_json`] by name, without the others: `None` to
    /// fall back to the whole list (the default), `Some(None)` for a field the kind does not
    /// have.
    fn selectable_field_json<'a>(
        &self,
        obj: &'a Value,
        field: &str,
    ) -> Option<Option<Cow<'a, str>>> {
        let _ = (obj, field);
        None
    }

    /// Table columns after `Name`.
    fn table_columns(&self) -> Vec<TableColumn> {
        vec![age_column()]
    }

    /// Table cells after `Name`, matching [`KindRules::table_columns`].
    fn table_row(&self, obj: &Self::Object, now: Timestamp) -> Vec<Value> {
        vec![Value::String(age(obj.metadata(), now))]
    }
}

/// The `Age` cell: time since `metadata.creationTimestamp`.
pub fn age(meta: &ObjectMeta, now: Timestamp) -> String {
    since(meta.creation_timestamp.as_ref().map(|t| t.0), now)
}

/// A [`Strategy`] made of a kind's [`KindRules`].
#[derive(Debug, Default, Clone, Copy)]
pub struct Typed<R>(pub R);

impl<R: KindRules> Typed<R> {
    fn namespaced() -> bool {
        TypeId::of::<<R::Object as Resource>::Scope>() == TypeId::of::<NamespaceResourceScope>()
    }

    /// What an update runs once `new` is decoded (as `typed`): defaults, `PrepareForUpdate`
    /// (when `prepare`), the encoding back into `new`, validation against `old` and whether
    /// the generation moves.
    fn admit_decoded_update(
        &self,
        mut typed: R::Object,
        new: &mut Value,
        old: &Value,
        prepare: bool,
    ) -> Result<(Vec<FieldError>, bool), String> {
        self.0.set_defaults(&mut typed);
        let old_typed = Self::decode_or_error(old);
        if prepare && let Ok(old_typed) = &old_typed {
            self.0.prepare_for_update(&mut typed, old_typed);
        }
        encode_over(&typed, new)?;
        Ok(match &old_typed {
            Ok(old_typed) => {
                let mut errs = validate_object_meta_update(typed.metadata(), old_typed.metadata());
                errs.extend(self.0.validate_update(&typed, old_typed));
                let bumps = self.0.bumps_generation(&typed, old_typed, (new, old));
                (errs, bumps)
            }
            Err(errs) => (errs.clone(), new.get("spec") != old.get("spec")),
        })
    }

    fn decode_or_error(obj: &Value) -> Result<R::Object, Vec<FieldError>> {
        decode::<R::Object>(obj).map_err(|detail| {
            vec![FieldError {
                kind: FieldErrorKind::TypeInvalid,
                field: String::new(),
                value: None,
                detail,
            }]
        })
    }
}

impl<R: KindRules> Strategy for Typed<R> {
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::of::<R::Object>()
    }

    fn has_status_subresource(&self) -> bool {
        R::STATUS_SUBRESOURCE
    }

    fn default(&self, obj: &mut Value) -> Result<(), String> {
        let mut typed = decode::<R::Object>(obj)?;
        self.0.set_defaults(&mut typed);
        encode_over(&typed, obj)
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if R::STATUS_SUBRESOURCE
            && !R::KEEP_STATUS_ON_CREATE
            && let Some(map) = obj.as_object_mut()
        {
            map.insert("status".to_owned(), Value::Object(Default::default()));
        }
        if let Ok(mut typed) = decode::<R::Object>(obj) {
            self.0.prepare_for_create(&mut typed);
            if let Ok(v) = encode(&typed) {
                *obj = v;
            }
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if let (Ok(mut typed), Ok(old)) = (decode::<R::Object>(new), decode::<R::Object>(old)) {
            self.0.prepare_for_update(&mut typed, &old);
            // A failed encoding leaves `new` as it was.
            let _ = encode_over(&typed, new);
        }
    }

    fn table_has_name_column(&self) -> bool {
        R::TABLE_HAS_NAME_COLUMN
    }

    fn bumps_generation(&self, new: &Value, old: &Value) -> bool {
        match (decode::<R::Object>(new), decode::<R::Object>(old)) {
            (Ok(n), Ok(o)) => self.0.bumps_generation(&n, &o, (new, old)),
            _ => new.get("spec") != old.get("spec"),
        }
    }

    fn graceful_delete_period(&self, obj: &Value, requested: Option<i64>) -> Option<i64> {
        decode::<R::Object>(obj)
            .ok()
            .and_then(|typed| self.0.graceful_delete_period(&typed, requested))
    }

    fn unknown_fields(&self, obj: &Value) -> Vec<String> {
        decode_noting_unknown::<R::Object>(obj)
            .map(|(_, unknown)| unknown)
            .unwrap_or_default()
    }

    fn check_body(&self, obj: &Value) -> (Vec<String>, Result<(), String>) {
        match decode_noting_unknown::<R::Object>(obj) {
            Ok((_, unknown)) => (unknown, Ok(())),
            Err(e) => (Vec::new(), Err(e)),
        }
    }

    /// One decode and one encode instead of `default`'s, `prepare_for_create`'s and
    /// `validate_create`'s (which each decoded what the step before had encoded).
    fn admit_create(&self, obj: &mut Value) -> Result<Vec<FieldError>, String> {
        let mut typed = decode::<R::Object>(obj)?;
        self.0.set_defaults(&mut typed);
        if R::STATUS_SUBRESOURCE && !R::KEEP_STATUS_ON_CREATE && !self.0.reset_status(&mut typed) {
            // `prepare_for_create` resets the status of the defaulted object to `{}`.
            let mut defaulted = encode(&typed)?;
            if let Some(map) = defaulted.as_object_mut() {
                map.insert("status".to_owned(), Value::Object(Default::default()));
            }
            match decode::<R::Object>(&defaulted) {
                Ok(reset) => typed = reset,
                Err(_) => {
                    *obj = defaulted;
                    return Ok(self.validate_create(obj));
                }
            }
        }
        self.0.prepare_for_create(&mut typed);
        let mut errs = validate_object_meta(typed.metadata(), Self::namespaced(), R::NAME_RULE);
        errs.extend(self.0.validate_create(&typed));
        *obj = encode(&typed)?;
        Ok(errs)
    }

    /// One decode of each object instead of one per step.
    fn admit_update(
        &self,
        new: &mut Value,
        old: &Value,
        prepare: bool,
    ) -> Result<(Vec<FieldError>, bool), String> {
        let typed = decode::<R::Object>(new)?;
        self.admit_decoded_update(typed, new, old, prepare)
    }

    /// [`Strategy::admit_update`] noting the unknown fields in its one decoding of `new`.
    fn admit_update_noting_unknown(
        &self,
        new: &mut Value,
        old: &Value,
        prepare: bool,
    ) -> Result<(Vec<FieldError>, bool, Vec<String>), String> {
        let (typed, unknown) = decode_noting_unknown::<R::Object>(new)?;
        let (errors, bumps) = self.admit_decoded_update(typed, new, old, prepare)?;
        Ok((errors, bumps, unknown))
    }

    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        match Self::decode_or_error(obj) {
            Ok(typed) => {
                let mut errs =
                    validate_object_meta(typed.metadata(), Self::namespaced(), R::NAME_RULE);
                errs.extend(self.0.validate_create(&typed));
                errs
            }
            Err(errs) => errs,
        }
    }

    fn admit_subresource_update(
        &self,
        subresource: &str,
        new: &mut Value,
        old: &Value,
        now: Timestamp,
    ) -> Option<Result<Vec<FieldError>, String>> {
        let _ = now;
        if !self.0.has_subresource_rules(subresource) {
            return None;
        }
        let admitted = (|| {
            let mut typed = decode::<R::Object>(new)?;
            let stored = decode::<R::Object>(old)?;
            let mut errs = validate_object_meta_update(typed.metadata(), stored.metadata());
            errs.extend(
                self.0
                    .admit_subresource_update(subresource, &mut typed, &stored),
            );
            encode_over(&typed, new)?;
            Ok(errs)
        })();
        Some(admitted)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let (new, old) = match (Self::decode_or_error(new), Self::decode_or_error(old)) {
            (Ok(n), Ok(o)) => (n, o),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        let mut errs = validate_object_meta_update(new.metadata(), old.metadata());
        errs.extend(self.0.validate_update(&new, &old));
        errs
    }

    fn selectable_field<'a>(&self, obj: &'a Value, field: &str) -> Option<Cow<'a, str>> {
        if let Some(value) = self.0.selectable_field_json(obj, field) {
            return value;
        }
        super::field_named(self.selectable_fields(obj), field).map(Cow::Owned)
    }

    fn selectable_fields(&self, obj: &Value) -> Vec<(&'static str, String)> {
        if let Some(fields) = self.0.selectable_fields_json(obj) {
            return fields;
        }
        decode::<R::Object>(obj)
            .map(|typed| self.0.selectable_fields(&typed))
            .unwrap_or_default()
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        self.0.table_columns()
    }

    fn table_row(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        match decode::<R::Object>(obj) {
            Ok(typed) => self.0.table_row(&typed, now),
            // A stored object always decodes; keep the row as wide as the header regardless.
            Err(_) => vec![Value::String("<unknown>".to_owned()); self.0.table_columns().len()],
        }
    }
}
