//! core/v1 Event (`pkg/registry/core/event/strategy.go` with its field selectors,
//! `ValidateEventCreate`/`legacyValidateEvent` in `pkg/apis/core/validation/events.go`, and
//! `printEvent`).
//!
//! Kubernetes keeps one internal Event type behind both `v1` and `events.k8s.io/v1`; here the
//! two kinds share [`EventView`], the fields the table and the field selectors read.
//!
//! The events table has no leading NAME column: it starts with LAST SEEN, and the name is a
//! `-o wide` column at the end (`table_has_name_column` is false).
//!
//! ```text
//! LAST SEEN   TYPE     REASON              OBJECT             MESSAGE
//! 5s          Normal   ScalingReplicaSet   deployment/nginx   Scaled up replica set nginx-7c5ddbdf54 from 0 to 3
//! ```

use super::field::FieldPath;
use super::table::{column, int, text};
use super::typed::KindRules;
use super::{FieldError, TableColumn};
use apimachinery::duration::since;
use apimachinery::validation::{NameRule, is_dns1123_subdomain, is_qualified_name};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, ObjectReference};
use serde_json::Value;

/// The Event rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct EventRules;

/// What the events table and field selectors read, whichever API version wrote the event.
#[derive(Debug, Clone, Default)]
pub struct EventView {
    /// `metadata.name`.
    pub name: String,
    /// `involvedObject` / `regarding`.
    pub regarding: ObjectReference,
    /// `type`: `Normal` or `Warning`.
    pub type_: String,
    /// `reason`.
    pub reason: String,
    /// `message` / `note`.
    pub message: String,
    /// `source.component` or else `reportingComponent`/`reportingController`.
    pub component: String,
    /// `source.host` or else `reportingInstance`.
    pub instance: String,
    /// `reportingComponent` / `reportingController`.
    pub reporting_controller: String,
    /// `firstTimestamp` / `deprecatedFirstTimestamp`.
    pub first_timestamp: Option<Timestamp>,
    /// `lastTimestamp` / `deprecatedLastTimestamp`.
    pub last_timestamp: Option<Timestamp>,
    /// `eventTime`.
    pub event_time: Option<Timestamp>,
    /// `count` / `deprecatedCount`.
    pub count: i32,
    /// `series.count` and `series.lastObservedTime`, for an event series.
    pub series: Option<(i32, Option<Timestamp>)>,
}

impl EventView {
    /// The view of a core/v1 Event.
    pub fn of_core(e: &Event) -> Self {
        let source = e.source.clone().unwrap_or_default();
        let reporting = e.reporting_component.clone().unwrap_or_default();
        EventView {
            name: e.metadata.name.clone().unwrap_or_default(),
            regarding: e.involved_object.clone(),
            type_: e.type_.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            message: e.message.clone().unwrap_or_default(),
            component: source
                .component
                .filter(|c| !c.is_empty())
                .unwrap_or_else(|| reporting.clone()),
            instance: source
                .host
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| e.reporting_instance.clone().unwrap_or_default()),
            reporting_controller: reporting,
            first_timestamp: e.first_timestamp.as_ref().map(|t| t.0),
            last_timestamp: e.last_timestamp.as_ref().map(|t| t.0),
            event_time: e.event_time.as_ref().map(|t| t.0),
            count: e.count.unwrap_or(0),
            series: e.series.as_ref().map(|s| {
                (
                    s.count.unwrap_or(0),
                    s.last_observed_time.as_ref().map(|t| t.0),
                )
            }),
        }
    }

    /// `printEvent`'s cells, in column order (the server prints wide; kubectl hides the
    /// priority-1 columns).
    pub fn row(&self, now: Timestamp) -> Vec<Value> {
        let first = match self.first_timestamp {
            Some(ts) => since(Some(ts), now),
            None => since(self.event_time, now),
        };
        let mut last = match self.last_timestamp {
            Some(ts) => since(Some(ts), now),
            None => first.clone(),
        };
        let mut count = self.count;
        if let Some((series_count, last_observed)) = self.series {
            last = since(last_observed, now);
            count = series_count;
        } else if count == 0 {
            count = 1;
        }
        let kind = self
            .regarding
            .kind
            .clone()
            .unwrap_or_default()
            .to_lowercase();
        let target = match self.regarding.name.as_deref().unwrap_or("") {
            "" => kind,
            name => format!("{kind}/{name}"),
        };
        let source = if self.instance.is_empty() {
            self.component.clone()
        } else {
            format!("{}, {}", self.component, self.instance)
        };
        vec![
            text(last),
            text(self.type_.clone()),
            text(self.reason.clone()),
            text(target),
            text(self.regarding.field_path.clone().unwrap_or_default()),
            text(source),
            text(self.message.trim()),
            text(first),
            int(count),
            text(self.name.clone()),
        ]
    }
}

/// The field-selector names of an API version's Event: the object reference's seven fields
/// (`kind`, `namespace`, `name`, `uid`, `apiVersion`, `resourceVersion`, `fieldPath`), the
/// reporter field, and `source` where the version has it.
#[derive(Debug, Clone, Copy)]
pub struct EventFieldNames {
    /// `involvedObject.kind`, ... or `regarding.kind`, ...
    pub reference: [&'static str; 7],
    /// `reportingComponent` or `reportingController`.
    pub reporting: &'static str,
    /// `source` (core/v1 only).
    pub source: Option<&'static str>,
}

/// core/v1's names (`pkg/registry/core/event/strategy.go` `ToSelectableFields`).
pub const CORE_FIELD_NAMES: EventFieldNames = EventFieldNames {
    reference: [
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
    ],
    reporting: "reportingComponent",
    source: Some("source"),
};

impl EventView {
    /// The field-selector fields under `names`.
    pub fn selectable_fields(&self, names: &EventFieldNames) -> Vec<(&'static str, String)> {
        let r = &self.regarding;
        let values = [
            &r.kind,
            &r.namespace,
            &r.name,
            &r.uid,
            &r.api_version,
            &r.resource_version,
            &r.field_path,
        ];
        let mut fields: Vec<(&'static str, String)> = names
            .reference
            .iter()
            .zip(values)
            .map(|(name, v)| (*name, v.clone().unwrap_or_default()))
            .collect();
        fields.push(("reason", self.reason.clone()));
        fields.push((names.reporting, self.reporting_controller.clone()));
        if let Some(source) = names.source {
            fields.push((source, self.component.clone()));
        }
        fields.push(("type", self.type_.clone()));
        fields
    }
}

/// The events table's columns (no leading Name; the name is the last, wide, column).
pub fn event_columns() -> Vec<TableColumn> {
    let mut name = column(
        "Name",
        "string",
        "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
        1,
    );
    name.format = "name".into();
    vec![
        column(
            "Last Seen",
            "string",
            "The time at which the most recent occurrence of this event was recorded.",
            0,
        ),
        column(
            "Type",
            "string",
            "Type of this event (Normal, Warning), new types could be added in the future",
            0,
        ),
        column(
            "Reason",
            "string",
            "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            0,
        ),
        column(
            "Object",
            "string",
            "The object that this event is about.",
            0,
        ),
        column(
            "Subobject",
            "string",
            "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2].",
            1,
        ),
        column(
            "Source",
            "string",
            "The component reporting this event. Should be a short machine understandable string.",
            1,
        ),
        column(
            "Message",
            "string",
            "A human-readable description of the status of this operation.",
            0,
        ),
        column(
            "First Seen",
            "string",
            "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
            1,
        ),
        column(
            "Count",
            "string",
            "The number of times this event has occurred.",
            1,
        ),
        name,
    ]
}

/// `legacyValidateEvent`: the namespace of the event and of its object agree, and an event
/// with `eventTime` (the new API's shape) names its reporter, action and reason.
pub fn validate_event_view(
    view: &EventView,
    namespace: &str,
    reporting_field: &str,
    action: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let involved_ns = view.regarding.namespace.clone().unwrap_or_default();
    let ns_path = FieldPath::new("involvedObject").child("namespace");
    if view.event_time.is_none() {
        let ok = if involved_ns.is_empty() {
            namespace.is_empty() || namespace == "default"
        } else {
            namespace == involved_ns
        };
        if !ok {
            errs.push(FieldError::invalid(
                &ns_path,
                involved_ns.as_str(),
                "does not match event.namespace",
            ));
        }
    } else {
        if involved_ns.is_empty() && namespace != "default" && namespace != "kube-system" {
            errs.push(FieldError::invalid(
                &ns_path,
                "",
                "does not match event.namespace",
            ));
        }
        let reporting = FieldPath::new(reporting_field);
        if view.reporting_controller.is_empty() {
            errs.push(FieldError::required(&reporting, ""));
        }
        for msg in is_qualified_name(&view.reporting_controller) {
            errs.push(FieldError::invalid(
                &reporting,
                view.reporting_controller.as_str(),
                &msg,
            ));
        }
        for (field, value, limit) in [
            ("reportingInstance", view.instance.as_str(), 128),
            ("action", action, 128),
            ("reason", view.reason.as_str(), 128),
        ] {
            if value.is_empty() {
                errs.push(FieldError::required(&FieldPath::new(field), ""));
            }
            if value.len() > limit {
                errs.push(FieldError::invalid(
                    &FieldPath::new(field),
                    "",
                    &format!("can have at most {limit} characters"),
                ));
            }
        }
        if view.message.len() > 1024 {
            errs.push(FieldError::invalid(
                &FieldPath::new("message"),
                "",
                "can have at most 1024 characters",
            ));
        }
    }
    for msg in is_dns1123_subdomain(namespace) {
        errs.push(FieldError::invalid(
            &FieldPath::new("namespace"),
            namespace,
            &msg,
        ));
    }
    errs
}

impl KindRules for EventRules {
    type Object = Event;
    // core/v1 events keep their legacy, lenient names (`nginx.17f3c2a1b2c3d4e5`, anything a URL
    // can carry).
    const NAME_RULE: NameRule = NameRule::PathSegment;
    const TABLE_HAS_NAME_COLUMN: bool = false;

    fn validate(&self, obj: &Event) -> Vec<FieldError> {
        validate_event_view(
            &EventView::of_core(obj),
            obj.metadata.namespace.as_deref().unwrap_or(""),
            "reportingComponent",
            obj.action.as_deref().unwrap_or(""),
        )
    }

    fn selectable_fields(&self, obj: &Event) -> Vec<(&'static str, String)> {
        EventView::of_core(obj).selectable_fields(&CORE_FIELD_NAMES)
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        event_columns()
    }

    fn table_row(&self, obj: &Event, now: Timestamp) -> Vec<Value> {
        EventView::of_core(obj).row(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use crate::strategy::typed::Typed;
    use serde_json::json;

    fn recorded() -> Value {
        json!({"apiVersion": "v1", "kind": "Event",
               "metadata": {"name": "nginx.17f3c2a1b2c3d4e5", "namespace": "default"},
               "involvedObject": {"kind": "Deployment", "namespace": "default", "name": "nginx", "uid": "u1", "apiVersion": "apps/v1", "resourceVersion": "1007"},
               "reason": "ScalingReplicaSet", "message": "Scaled up replica set nginx-7c5ddbdf54 from 0 to 3\n",
               "source": {"component": "deployment-controller"},
               "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:04:00Z", "count": 2, "type": "Normal",
               "eventTime": null, "reportingComponent": "deployment-controller", "reportingInstance": ""})
    }

    #[test]
    fn table_row_like_kubectl_get_events() {
        let s = Typed(EventRules);
        let now: Timestamp = "2024-01-01T00:05:00Z".parse().unwrap();
        assert!(!s.table_has_name_column());
        let cols = s.table_columns();
        let names: Vec<&str> = cols.iter().map(|c| c.name.as_ref()).collect();
        assert_eq!(
            names,
            [
                "Last Seen",
                "Type",
                "Reason",
                "Object",
                "Subobject",
                "Source",
                "Message",
                "First Seen",
                "Count",
                "Name"
            ]
        );
        assert_eq!(
            s.table_row(&recorded(), now),
            vec![
                json!("60s"),
                json!("Normal"),
                json!("ScalingReplicaSet"),
                json!("deployment/nginx"),
                json!(""),
                json!("deployment-controller"),
                json!("Scaled up replica set nginx-7c5ddbdf54 from 0 to 3"),
                json!("5m"),
                json!(2),
                json!("nginx.17f3c2a1b2c3d4e5")
            ]
        );
    }

    #[test]
    fn field_selectors_used_by_describe() {
        let fields = Typed(EventRules).selectable_fields(&recorded());
        for want in [
            ("involvedObject.name", "nginx"),
            ("involvedObject.namespace", "default"),
            ("involvedObject.kind", "Deployment"),
            ("involvedObject.uid", "u1"),
            ("source", "deployment-controller"),
            ("type", "Normal"),
        ] {
            assert!(fields.contains(&(want.0, want.1.to_owned())), "{want:?}");
        }
    }

    #[test]
    fn namespace_must_match_the_object() {
        let mut e = recorded();
        e["involvedObject"]["namespace"] = json!("other");
        let errs: Vec<String> = crate::strategy::messages(&Typed(EventRules).validate_create(&e));
        assert_eq!(
            errs,
            vec![
                "involvedObject.namespace: Invalid value: \"other\": does not match event.namespace"
            ]
        );
        assert!(Typed(EventRules).validate_create(&recorded()).is_empty());
    }
}
