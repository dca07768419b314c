//! A test kind with rules (`widgets.example.com`), so registry behaviour that depends on a
//! strategy is tested independently of the built-in strategies, and shared sample objects.

use super::Harness;
use apiserver::GroupVersionKind;
use apiserver::ResourceInfo;
use apiserver::Subresource;
use apiserver::{FieldError, FieldErrorKind, Strategy, TableColumn};
use serde_json::{Value, json};
use std::sync::Arc;

pub const PODS: &str = "/api/v1/namespaces/default/pods";
pub const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
pub const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

/// A kind with rules, so registry behaviour that depends on a strategy can be tested before
/// (and independently of) the built-in strategies.
pub struct WidgetStrategy;

impl Strategy for WidgetStrategy {
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::new("example.com", "v1", "Widget")
    }
    fn has_status_subresource(&self) -> bool {
        true
    }
    fn unknown_fields(&self, obj: &Value) -> Vec<String> {
        obj.get("spec")
            .and_then(Value::as_object)
            .map(|s| {
                s.keys()
                    .filter(|k| *k != "size" && *k != "color")
                    .map(|k| format!("spec.{k}"))
                    .collect()
            })
            .unwrap_or_default()
    }
    fn default(&self, obj: &mut Value) -> Result<(), String> {
        if let Some(s) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            s.retain(|k, _| k == "size" || k == "color");
            if s.get("size").is_some_and(|v| !v.is_i64()) {
                return Err("json: cannot unmarshal string into Go struct field WidgetSpec.spec.size of type int32".into());
            }
        }
        Ok(())
    }
    fn validate_create(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let Some(size) = obj.pointer("/spec/size").and_then(Value::as_i64)
            && size < 0
        {
            errs.push(FieldError {
                kind: FieldErrorKind::Invalid,
                field: "spec.size".into(),
                value: Some(size.to_string()),
                detail: "must be greater than or equal to 0".into(),
            });
        }
        errs
    }
    fn selectable_fields(&self, obj: &Value) -> Vec<(&'static str, String)> {
        vec![(
            "spec.color",
            obj.pointer("/spec/color")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        )]
    }
    fn table_columns(&self) -> Vec<TableColumn> {
        vec![TableColumn {
            name: "Color".into(),
            type_: "string".into(),
            format: "".into(),
            description: "c".into(),
            priority: 0,
        }]
    }
    fn table_row(&self, obj: &Value, _now: jiff::Timestamp) -> Vec<Value> {
        vec![obj.pointer("/spec/color").cloned().unwrap_or(Value::Null)]
    }
}

pub async fn with_widgets() -> Harness {
    let h = Harness::new().await;
    let mut row = ResourceInfo::new("example.com", "v1", "Widget", "widgets", true);
    row.subresources = vec![Subresource::Status, Subresource::Scale];
    row.reset_status_on_create = true;
    row.strategy = Arc::new(WidgetStrategy);
    h.state.registry().add(row);
    h
}

pub fn widget(name: &str, color: &str, labels: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "labels": labels}, "spec": {"size": 1, "color": color}})
}

pub fn pod(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
}

pub fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}
