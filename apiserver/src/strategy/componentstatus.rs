//! core/v1 ComponentStatus's table, as kube-apiserver's `printComponentStatus`
//! (`pkg/printers/internalversion/printers.go`). The objects themselves are computed on every
//! request by `handlers::component_status`.

use serde_json::{Value, json};

use super::table::column;
use super::{Strategy, TableColumn};
use crate::gvk::GroupVersionKind;

/// The table of `printComponentStatus`: NAME, STATUS, MESSAGE, ERROR.
#[derive(Debug, Clone, Copy)]
pub struct ComponentStatusStrategy;

impl Strategy for ComponentStatusStrategy {
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::new("", "v1", "ComponentStatus")
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![
            column("Status", "string", "Status of the component conditions", 0),
            column(
                "Message",
                "string",
                "Message of the component conditions",
                0,
            ),
            column("Error", "string", "Error of the component conditions", 0),
        ]
    }

    fn table_row(&self, obj: &Value, _now: jiff::Timestamp) -> Vec<Value> {
        let healthy = obj["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Healthy");
        let (status, message, error) = match healthy {
            Some(c) => (
                if c["status"] == "True" {
                    "Healthy"
                } else {
                    "Unhealthy"
                },
                c["message"].as_str().unwrap_or_default(),
                c["error"].as_str().unwrap_or_default(),
            ),
            None => ("Unknown", "", ""),
        };
        vec![json!(status), json!(message), json!(error)]
    }
}
