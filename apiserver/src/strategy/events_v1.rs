//! events.k8s.io/v1 Event (`pkg/registry/core/event/strategy.go` serves it too;
//! `ValidateEventCreate` applies the strict rules to this API version; field selectors are
//! converted in `pkg/apis/events/v1/conversion.go`).
//!
//! The new API's field names map onto the core ones: `regarding` ↔ `involvedObject`, `note` ↔
//! `message`, `reportingController` ↔ `reportingComponent`, `deprecatedCount` ↔ `count`
//! ([`to_core`]). It shares the core Event's table through [`EventView`].

use super::FieldError;
use super::TableColumn;
use super::event::{EventFieldNames, EventView, event_columns, validate_event_view};
use super::field::FieldPath;
use super::typed::KindRules;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSeries as CoreEventSeries};
use k8s_openapi::api::events::v1::Event;
use serde_json::Value;

/// The events.k8s.io/v1 Event rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct EventsV1Rules;

/// The conversion to the core Event (`pkg/apis/events/v1/conversion.go`), the shape Kubernetes
/// keeps internally for both versions.
pub fn to_core(e: &Event) -> CoreEvent {
    CoreEvent {
        metadata: e.metadata.clone(),
        involved_object: e.regarding.clone().unwrap_or_default(),
        related: e.related.clone(),
        type_: e.type_.clone(),
        reason: e.reason.clone(),
        message: e.note.clone(),
        action: e.action.clone(),
        source: e.deprecated_source.clone(),
        first_timestamp: e.deprecated_first_timestamp.clone(),
        last_timestamp: e.deprecated_last_timestamp.clone(),
        count: e.deprecated_count,
        event_time: e.event_time.clone(),
        series: e.series.as_ref().map(|s| CoreEventSeries {
            count: Some(s.count),
            last_observed_time: Some(s.last_observed_time.clone()),
        }),
        reporting_component: e.reporting_controller.clone(),
        reporting_instance: e.reporting_instance.clone(),
    }
}

fn view(e: &Event) -> EventView {
    EventView::of_core(&to_core(e))
}

impl KindRules for EventsV1Rules {
    type Object = Event;
    const TABLE_HAS_NAME_COLUMN: bool = false;

    fn validate(&self, obj: &Event) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if obj.event_time.is_none() {
            errs.push(FieldError::required(&FieldPath::new("eventTime"), ""));
        }
        if let Some(t) = obj.type_.as_deref()
            && t != "Normal"
            && t != "Warning"
        {
            errs.push(FieldError::invalid(
                &FieldPath::new("type"),
                t,
                "has invalid value: must be Normal or Warning",
            ));
        }
        errs.extend(validate_event_view(
            &view(obj),
            obj.metadata.namespace.as_deref().unwrap_or(""),
            "reportingController",
            obj.action.as_deref().unwrap_or(""),
        ));
        errs
    }

    fn selectable_fields(&self, obj: &Event) -> Vec<(&'static str, String)> {
        view(obj).selectable_fields(&EventFieldNames {
            reference: [
                "regarding.kind",
                "regarding.namespace",
                "regarding.name",
                "regarding.uid",
                "regarding.apiVersion",
                "regarding.resourceVersion",
                "regarding.fieldPath",
            ],
            reporting: "reportingController",
            source: None,
        })
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        event_columns()
    }

    fn table_row(&self, obj: &Event, now: Timestamp) -> Vec<Value> {
        view(obj).row(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use crate::strategy::typed::Typed;
    use serde_json::json;

    fn event() -> Value {
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
               "metadata": {"name": "web.1", "namespace": "default"},
               "eventTime": "2024-01-01T00:00:00.000000Z", "reportingController": "example.com/ctl", "reportingInstance": "ctl-1",
               "action": "Sync", "reason": "Synced", "note": "ok", "type": "Normal",
               "regarding": {"kind": "Pod", "namespace": "default", "name": "web"}})
    }

    #[test]
    fn strict_rules_and_row() {
        let s = Typed(EventsV1Rules);
        assert!(s.validate_create(&event()).is_empty());
        let mut bad = event();
        bad["action"] = json!("");
        bad.as_object_mut().map(|o| o.remove("eventTime"));
        let errs: Vec<String> = crate::strategy::messages(&s.validate_create(&bad));
        assert_eq!(errs, vec!["eventTime: Required value"]);
        let mut no_action = event();
        no_action["action"] = json!("");
        let errs: Vec<String> = crate::strategy::messages(&s.validate_create(&no_action));
        assert_eq!(errs, vec!["action: Required value"]);
        let now: Timestamp = "2024-01-01T00:00:07Z".parse().unwrap();
        let row = s.table_row(&event(), now);
        assert_eq!(row[0], json!("7s"));
        assert_eq!(row[3], json!("pod/web"));
        assert_eq!(row[5], json!("example.com/ctl, ctl-1"));
        assert_eq!(row[8], json!(1));
        assert!(
            s.selectable_fields(&event())
                .contains(&("regarding.name", "web".to_owned()))
        );
    }
}
