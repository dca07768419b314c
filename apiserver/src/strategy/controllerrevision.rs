//! apps/v1 ControllerRevision (`pkg/registry/apps/controllerrevision/strategy.go`,
//! `ValidateControllerRevision` and `ValidateControllerRevisionUpdate` in
//! `pkg/apis/apps/validation/validation.go`, and `printControllerRevision` in
//! `pkg/printers/internalversion/printers.go`).
//!
//! A ControllerRevision is an immutable snapshot of a controller's state: the DaemonSet and
//! StatefulSet controllers keep one per pod template they have run, and `kubectl rollout
//! history|undo` read them back.
//!
//! ```text
//!   NAME              CONTROLLER             REVISION   AGE
//!   fluentd-6d7f8b9c  daemonset.apps/fluentd   2         5m
//! ```
//!
//! Unlike Kubernetes, the value in the `data: ... field is immutable` message prints the new
//! data as compact JSON inside Go's `%#v` of a `runtime.RawExtension`, which matches the bytes
//! kube-apiserver prints when the client sent compact JSON.

use super::field::{FIELD_IMMUTABLE, FieldPath, validate_nonnegative};
use super::table::{age_column, column, int, text};
use super::typed::{KindRules, age};
use super::{FieldError, TableColumn};
use k8s_openapi::api::apps::v1::ControllerRevision;
use serde_json::Value;

/// The ControllerRevision rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct ControllerRevisionRules;

impl KindRules for ControllerRevisionRules {
    type Object = ControllerRevision;

    fn validate(&self, obj: &ControllerRevision) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if obj.data.is_none() {
            errs.push(FieldError::required(
                &FieldPath::new("data"),
                "data is mandatory",
            ));
        }
        errs.extend(validate_nonnegative(
            obj.revision,
            &FieldPath::new("revision"),
        ));
        errs
    }

    fn validate_update(
        &self,
        new: &ControllerRevision,
        old: &ControllerRevision,
    ) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if new.data != old.data {
            errs.push(FieldError::invalid(
                &FieldPath::new("data"),
                super::field::Rendered(go_raw_extension(new.data.as_ref().map(|d| &d.0))),
                FIELD_IMMUTABLE,
            ));
        }
        errs
    }

    fn bumps_generation(
        &self,
        _new: &ControllerRevision,
        _old: &ControllerRevision,
        json: (&Value, &Value),
    ) -> bool {
        // The kind has no `spec`: its content is `data` and `revision`.
        json.0.get("data") != json.1.get("data") || json.0.get("revision") != json.1.get("revision")
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![
            column("Controller", "string", "Controller of the object", 0),
            column(
                "Revision",
                "number",
                "Revision indicates the revision of the state represented by Data.",
                0,
            ),
            age_column(),
        ]
    }

    fn table_row(&self, obj: &ControllerRevision, now: jiff::Timestamp) -> Vec<Value> {
        vec![
            text(controller_name(obj)),
            int(obj.revision),
            text(age(&obj.metadata, now)),
        ]
    }
}

/// The `Controller` cell: `<kind>.<group>/<name>` of the controlling owner, lower-cased as
/// `formatResourceName` prints a `GroupKind`, or `<none>`.
fn controller_name(obj: &ControllerRevision) -> String {
    let Some(owner) = obj
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
    else {
        return "<none>".to_owned();
    };
    let group = match owner.api_version.split_once('/') {
        Some((group, _)) => group,
        None => "",
    };
    let group_kind = if group.is_empty() {
        owner.kind.clone()
    } else {
        format!("{}.{group}", owner.kind)
    };
    if group_kind.is_empty() {
        return owner.name.clone();
    }
    format!("{}/{}", group_kind.to_lowercase(), owner.name)
}

/// Go's `%#v` of a `runtime.RawExtension` holding `data` (compact JSON bytes).
fn go_raw_extension(data: Option<&Value>) -> String {
    let raw = match data {
        Some(v) => {
            let bytes = serde_json::to_vec(v).unwrap_or_default();
            let hex: Vec<String> = bytes.iter().map(|b| format!("0x{b:x}")).collect();
            format!("[]uint8{{{}}}", hex.join(", "))
        }
        None => "[]uint8(nil)".to_owned(),
    };
    format!("runtime.RawExtension{{Raw:{raw}, Object:runtime.Object(nil)}}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use crate::strategy::typed::Typed;
    use serde_json::json;

    fn revision() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": "fluentd-5b8c7d", "namespace": "default", "creationTimestamp": "2024-01-01T00:00:00Z",
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "fluentd", "uid": "u-1", "controller": true}]},
            "data": {"spec": {"template": {"$patch": "replace", "spec": {"containers": [{"name": "f", "image": "fluentd:v1"}]}}}},
            "revision": 2
        })
    }

    #[test]
    fn table_prints_controller_and_revision() {
        let s = Typed(ControllerRevisionRules);
        let now: jiff::Timestamp = "2024-01-01T00:05:00Z".parse().unwrap();
        let names: Vec<String> = s
            .table_columns()
            .iter()
            .map(|c| c.name.to_string())
            .collect();
        assert_eq!(names, ["Controller", "Revision", "Age"]);
        assert_eq!(
            s.table_row(&revision(), now),
            vec![json!("daemonset.apps/fluentd"), json!(2), json!("5m")]
        );
        let mut orphan = revision();
        orphan["metadata"]["ownerReferences"] = json!([]);
        assert_eq!(s.table_row(&orphan, now)[0], json!("<none>"));
    }

    #[test]
    fn revision_nonnegative_data_required_and_immutable() {
        let s = Typed(ControllerRevisionRules);
        assert!(s.validate_create(&revision()).is_empty());
        let mut bad = revision();
        bad["revision"] = json!(-1);
        bad.as_object_mut().map(|o| o.remove("data"));
        assert_eq!(
            crate::strategy::messages(&s.validate_create(&bad)),
            vec![
                "data: Required value: data is mandatory",
                "revision: Invalid value: -1: must be greater than or equal to 0",
            ]
        );
        let mut changed = revision();
        changed["data"] = json!({});
        assert_eq!(
            crate::strategy::messages(&s.validate_update(&changed, &revision())),
            vec![
                "data: Invalid value: runtime.RawExtension{Raw:[]uint8{0x7b, 0x7d}, Object:runtime.Object(nil)}: field is immutable"
            ]
        );
        let mut relabeled = revision();
        relabeled["metadata"]["labels"] = json!({"controller-revision-hash": "5b8c7d"});
        relabeled["revision"] = json!(3);
        assert!(s.validate_update(&relabeled, &revision()).is_empty());
    }
}
