//! The `metrics.k8s.io/v1beta1` objects as metrics-server writes them: NodeMetrics and
//! PodMetrics (with their lists and `meta.k8s.io/v1` Tables), the quantities in them, the
//! discovery documents of the group, and the selectors a list takes.
//!
//! Mirrors `k8s.io/metrics/pkg/apis/metrics/v1beta1` (field names), metrics-server's
//! `pkg/storage/types.go` (`uint64Quantity`: CPU as a DecimalSI quantity of nanocores, memory
//! as a BinarySI quantity of bytes, both canonical: `123456789n`, `400m`, `65536Ki`),
//! `pkg/api/table.go` (columns `Name`, `cpu`, `memory`, `Window`) and `pkg/api/filter.go`
//! with the generic server's field-label conversion (only `metadata.name` and, for pods,
//! `metadata.namespace` are selectable). Times are RFC 3339 seconds (`metav1.Time`), the
//! window a Go duration (`15.003s`).

use std::collections::BTreeMap;

use apimachinery::duration::go_duration;
use apimachinery::resource::quantity::{Quantity, QuantityFormat};
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::storage::{PodUsage, Usage};

/// `metrics.k8s.io`.
pub const GROUP: &str = "metrics.k8s.io";
/// `v1beta1`.
pub const VERSION: &str = "v1beta1";
/// `metrics.k8s.io/v1beta1`.
pub const API_VERSION: &str = "metrics.k8s.io/v1beta1";

/// A `metav1.Time`: RFC 3339, whole seconds, UTC.
pub fn time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// CPU nanocores as the canonical DecimalSI quantity (`uint64Quantity(v, DecimalSI, -9)`).
pub fn cpu_quantity(nanocores: u64) -> String {
    Quantity::parse(&format!("{nanocores}n"))
        .map(|q| q.canonical(QuantityFormat::DecimalSI))
        .unwrap_or_else(|_| format!("{nanocores}n"))
}

/// Bytes as the canonical BinarySI quantity (`uint64Quantity(v, BinarySI, 0)`).
pub fn memory_quantity(bytes: u64) -> String {
    Quantity::parse(&bytes.to_string())
        .map(|q| q.canonical(QuantityFormat::BinarySI))
        .unwrap_or_else(|_| bytes.to_string())
}

fn usage_json(cpu: u64, memory: u64) -> Value {
    json!({"cpu": cpu_quantity(cpu), "memory": memory_quantity(memory)})
}

fn metadata(
    name: &str,
    namespace: Option<&str>,
    labels: Option<&BTreeMap<String, String>>,
    now: Timestamp,
) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("name".into(), json!(name));
    if let Some(ns) = namespace {
        m.insert("namespace".into(), json!(ns));
    }
    m.insert("creationTimestamp".into(), json!(time(now)));
    if let Some(labels) = labels.filter(|l| !l.is_empty()) {
        m.insert("labels".into(), json!(labels));
    }
    Value::Object(m)
}

/// A NodeMetrics item (without `kind`/`apiVersion`, as in a list).
pub fn node_metrics(
    name: &str,
    labels: Option<&BTreeMap<String, String>>,
    usage: &Usage,
    now: Timestamp,
) -> Value {
    json!({
        "metadata": metadata(name, None, labels, now),
        "timestamp": time(usage.timestamp),
        "window": go_duration(usage.window),
        "usage": usage_json(usage.cpu_nanocores, usage.memory_bytes),
    })
}

/// A PodMetrics item (without `kind`/`apiVersion`, as in a list).
pub fn pod_metrics(
    namespace: &str,
    name: &str,
    labels: Option<&BTreeMap<String, String>>,
    usage: &PodUsage,
    now: Timestamp,
) -> Value {
    let containers: Vec<Value> = usage
        .containers
        .iter()
        .map(|(c, u)| json!({"name": c, "usage": usage_json(u.cpu_nanocores, u.memory_bytes)}))
        .collect();
    json!({
        "metadata": metadata(name, Some(namespace), labels, now),
        "timestamp": time(usage.timestamp),
        "window": go_duration(usage.window),
        "containers": containers,
    })
}

/// An item as a single object: `kind` and `apiVersion` first.
pub fn single(kind: &str, mut item: Value) -> Value {
    let mut out = serde_json::Map::new();
    out.insert("kind".into(), json!(kind));
    out.insert("apiVersion".into(), json!(API_VERSION));
    if let Some(fields) = item.as_object_mut() {
        out.append(fields);
    }
    Value::Object(out)
}

/// A `NodeMetricsList` or `PodMetricsList`.
pub fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"kind": format!("{kind}List"), "apiVersion": API_VERSION, "metadata": {}, "items": items})
}

/// The Table of metrics `items` (`addNodeMetricsToTable`, `addPodMetricsToTable`): a pod's
/// usage is its containers' sum.
pub fn table(items: &[Value]) -> Value {
    let quantity = |name: &str| json!({"name": name, "type": "string", "format": "quantity", "description": "", "priority": 0});
    let columns = json!([
        {"name": "Name", "type": "string", "format": "name", "description": "Name of the resource", "priority": 0},
        quantity("cpu"),
        quantity("memory"),
        {"name": "Window", "type": "string", "format": "duration", "description": "", "priority": 0},
    ]);
    let rows: Vec<Value> = items
        .iter()
        .map(|item| {
            let (cpu, memory) = match item.get("containers").and_then(Value::as_array) {
                Some(containers) => containers.iter().fold((0u128, 0u128), |(c, m), x| {
                    (
                        c + parse_nanos(&x["usage"]["cpu"]),
                        m + parse_nanos(&x["usage"]["memory"]),
                    )
                }),
                None => (
                    parse_nanos(&item["usage"]["cpu"]),
                    parse_nanos(&item["usage"]["memory"]),
                ),
            };
            let cpu = cpu_quantity(u64::try_from(cpu).unwrap_or(u64::MAX));
            let memory = memory_quantity(u64::try_from(memory / 1_000_000_000).unwrap_or(u64::MAX));
            json!({
                "cells": [item["metadata"]["name"], cpu, memory, item["window"]],
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": item["metadata"],
                },
            })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": columns,
        "rows": rows,
    })
}

/// A quantity cell's value in nano-units (0 when unreadable).
fn parse_nanos(v: &Value) -> u128 {
    v.as_str()
        .and_then(|s| Quantity::parse(s).ok())
        .map_or(0, |q| u128::try_from(q.nanos()).unwrap_or(0))
}

/// `/apis`: the group list with `metrics.k8s.io`.
pub fn group_list() -> Value {
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group_body()]})
}

fn group_body() -> Value {
    let version = json!({"groupVersion": API_VERSION, "version": VERSION});
    json!({"name": GROUP, "versions": [version], "preferredVersion": version})
}

/// `/apis/metrics.k8s.io`.
pub fn group() -> Value {
    let mut g = group_body();
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    g
}

/// `/apis/metrics.k8s.io/v1beta1`: `nodes` (NodeMetrics) and `pods` (PodMetrics), `get` and
/// `list`, no singular name.
pub fn resource_list() -> Value {
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": API_VERSION,
        "resources": [
            {"name": "nodes", "singularName": "", "namespaced": false, "kind": "NodeMetrics", "verbs": ["get", "list"]},
            {"name": "pods", "singularName": "", "namespaced": true, "kind": "PodMetrics", "verbs": ["get", "list"]},
        ],
    })
}

/// One requirement of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The field (`metadata.name`).
    pub field: String,
    /// `=`/`==` (true) or `!=` (false).
    pub equals: bool,
    /// The value.
    pub value: String,
}

/// `fields.ParseSelector` and the field-label conversion: `metadata.name` (and, when
/// `namespaced`, `metadata.namespace`) only. `Err` is the 400's message.
pub fn parse_field_selector(
    selector: &str,
    namespaced: bool,
) -> Result<Vec<FieldRequirement>, String> {
    let mut out = Vec::new();
    for term in selector.split(',').filter(|t| !t.trim().is_empty()) {
        let (field, equals, value) = if let Some((f, v)) = term.split_once("!=") {
            (f, false, v)
        } else if let Some((f, v)) = term.split_once("==") {
            (f, true, v)
        } else if let Some((f, v)) = term.split_once('=') {
            (f, true, v)
        } else {
            return Err(format!(
                "invalid selector: '{selector}'; can't understand '{term}'"
            ));
        };
        let field = field.trim();
        let allowed = field == "metadata.name" || (namespaced && field == "metadata.namespace");
        if !allowed {
            return Err(format!("field label not supported: {field}"));
        }
        out.push(FieldRequirement {
            field: field.to_owned(),
            equals,
            value: value.trim().to_owned(),
        });
    }
    Ok(out)
}

/// Whether an object named `name` in `namespace` matches every requirement.
pub fn fields_match(reqs: &[FieldRequirement], name: &str, namespace: &str) -> bool {
    reqs.iter().all(|r| {
        let actual = if r.field == "metadata.name" {
            name
        } else {
            namespace
        };
        (actual == r.value) == r.equals
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn quantities_are_canonical_as_metrics_server_writes_them() {
        assert_eq!(cpu_quantity(123_456_789), "123456789n");
        assert_eq!(cpu_quantity(400_000_000), "400m");
        assert_eq!(cpu_quantity(1_000_000_000), "1");
        assert_eq!(cpu_quantity(0), "0");
        assert_eq!(memory_quantity(1_467_617_280), "1433220Ki");
        assert_eq!(memory_quantity(512 * 1024 * 1024), "512Mi");
        assert_eq!(memory_quantity(1500), "1500");
        assert_eq!(memory_quantity(1000), "1k");
    }

    #[test]
    fn items_lists_and_tables() {
        let now: Timestamp = "2024-01-01T00:00:30.5Z".parse().expect("time");
        let usage = Usage {
            cpu_nanocores: 150_000_000,
            memory_bytes: 64 << 20,
            timestamp: "2024-01-01T00:00:20.123Z".parse().expect("time"),
            window: Duration::from_millis(15_003),
        };
        let labels = BTreeMap::from([("kubernetes.io/hostname".to_owned(), "node-0".to_owned())]);
        let node = node_metrics("node-0", Some(&labels), &usage, now);
        assert_eq!(
            node["metadata"]["creationTimestamp"],
            "2024-01-01T00:00:30Z"
        );
        assert_eq!(node["timestamp"], "2024-01-01T00:00:20Z");
        assert_eq!(node["window"], "15.003s");
        assert_eq!(node["usage"], json!({"cpu": "150m", "memory": "64Mi"}));
        let one = single("NodeMetrics", node.clone());
        assert_eq!(one["kind"], "NodeMetrics");
        assert_eq!(one["apiVersion"], "metrics.k8s.io/v1beta1");
        assert_eq!(one["usage"]["cpu"], "150m");
        let pod = PodUsage {
            containers: BTreeMap::from([("a".to_owned(), usage), ("b".to_owned(), usage)]),
            timestamp: usage.timestamp,
            window: usage.window,
        };
        let pod = pod_metrics("default", "web", None, &pod, now);
        assert_eq!(pod["metadata"]["namespace"], "default");
        assert!(pod["metadata"].get("labels").is_none());
        assert_eq!(pod["containers"][1]["name"], "b");
        let t = table(&[node, pod]);
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["node-0", "150m", "64Mi", "15.003s"])
        );
        assert_eq!(
            t["rows"][1]["cells"],
            json!(["web", "300m", "128Mi", "15.003s"])
        );
        assert_eq!(list("PodMetrics", vec![])["kind"], "PodMetricsList");
    }

    #[test]
    fn field_selectors_take_only_metadata() {
        let reqs = parse_field_selector("metadata.name=web,metadata.namespace!=kube-system", true)
            .expect("valid");
        assert!(fields_match(&reqs, "web", "default"));
        assert!(!fields_match(&reqs, "web", "kube-system"));
        assert!(!fields_match(&reqs, "db", "default"));
        assert_eq!(
            parse_field_selector("metadata.namespace=x", false),
            Err("field label not supported: metadata.namespace".into())
        );
        assert_eq!(
            parse_field_selector("spec.nodeName=node-0", true),
            Err("field label not supported: spec.nodeName".into())
        );
        assert_eq!(
            parse_field_selector("bogus", true),
            Err("invalid selector: 'bogus'; can't understand 'bogus'".into())
        );
        assert_eq!(parse_field_selector("", true), Ok(vec![]));
    }
}
