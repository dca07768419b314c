//! The autoscaling/v1 shapes of metric specs, metric statuses, conditions and behavior that the
//! v1 view keeps in its round-trip annotations, written as Go's `json.Marshal` writes them
//! (struct fields in declaration order, HTML characters escaped) and read back.
//!
//! Mirrors the generated `Convert_autoscaling_MetricSpec_To_v1_MetricSpec` and the hand-written
//! source converters of `pkg/apis/autoscaling/v1/conversion.go` (`Convert_*MetricSource*`,
//! `Convert_*MetricStatus*`), over the `k8s.io/api/autoscaling/v1` field names:
//!
//! ```text
//!   v2 {type: Resource, resource: {name, target: {type, averageUtilization, averageValue}}}
//!   v1 {"type":"Resource","resource":{"name":..,"targetAverageUtilization":..,"targetAverageValue":..}}
//! ```
//!
//! The behavior annotation holds the internal Go type, so its keys are the Go field names
//! (`{"ScaleUp":{"StabilizationWindowSeconds":0,...}}`).

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HPAScalingPolicy, HPAScalingRules,
    HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerCondition, MetricIdentifier,
    MetricSpec, MetricStatus, MetricTarget, MetricValueStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

/// A JSON value whose objects keep the order their fields are given in (Go's struct order).
pub enum Go {
    /// An object, fields in order.
    Obj(Vec<(&'static str, Go)>),
    /// An array.
    Arr(Vec<Go>),
    /// A plain value (its own objects in key order).
    Val(Value),
}

impl Serialize for Go {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Go::Obj(fields) => {
                let mut map = s.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
            Go::Arr(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Go::Val(v) => v.serialize(s),
        }
    }
}

impl Go {
    /// The JSON text `json.Marshal` gives.
    pub fn marshal(&self) -> String {
        let bytes = crate::wire::html_escaped(serde_json::to_vec(self).unwrap_or_default());
        String::from_utf8(bytes).unwrap_or_default()
    }
}

fn s(v: &str) -> Go {
    Go::Val(Value::String(v.to_owned()))
}

/// A `resource.Quantity` as it marshals: its canonical string (`"0"` for an unset value
/// field, which Go holds as the zero quantity).
fn q(v: Option<&Quantity>) -> Go {
    let text = v.map_or_else(
        || "0".to_owned(),
        |v| apimachinery::resource::quantity::canonicalize(&v.0).unwrap_or_else(|| v.0.clone()),
    );
    Go::Val(Value::String(text))
}

/// Pushes `key` when `v` is set (`omitempty` on a pointer).
fn opt(fields: &mut Vec<(&'static str, Go)>, key: &'static str, v: Option<Go>) {
    if let Some(v) = v {
        fields.push((key, v));
    }
}

fn reference(r: &CrossVersionObjectReference) -> Go {
    let mut f = vec![("kind", s(&r.kind)), ("name", s(&r.name))];
    opt(
        &mut f,
        "apiVersion",
        r.api_version.as_deref().filter(|v| !v.is_empty()).map(s),
    );
    Go::Obj(f)
}

/// `metav1.LabelSelector` (matchLabels, then matchExpressions).
fn selector(sel: &LabelSelector) -> Go {
    let mut f = Vec::new();
    if let Some(labels) = sel.match_labels.as_ref().filter(|l| !l.is_empty()) {
        f.push((
            "matchLabels",
            Go::Val(serde_json::to_value(labels).unwrap_or_default()),
        ));
    }
    if let Some(exprs) = sel.match_expressions.as_ref().filter(|e| !e.is_empty()) {
        let items = exprs
            .iter()
            .map(|e| {
                let mut ef = vec![("key", s(&e.key)), ("operator", s(&e.operator))];
                if let Some(values) = e.values.as_ref().filter(|v| !v.is_empty()) {
                    ef.push((
                        "values",
                        Go::Val(serde_json::to_value(values).unwrap_or_default()),
                    ));
                }
                Go::Obj(ef)
            })
            .collect();
        f.push(("matchExpressions", Go::Arr(items)));
    }
    Go::Obj(f)
}

fn int(v: i32) -> Go {
    Go::Val(Value::from(v))
}

/// A v2 metric spec as the v1 `MetricSpec` of the `metrics` annotation.
pub fn metric_spec(m: &MetricSpec) -> Go {
    let mut f = vec![("type", s(&m.type_))];
    if let Some(o) = &m.object {
        let mut of = vec![
            ("target", reference(&o.described_object)),
            ("metricName", s(&o.metric.name)),
            ("targetValue", q(o.target.value.as_ref())),
        ];
        opt(
            &mut of,
            "selector",
            o.metric.selector.as_ref().map(selector),
        );
        opt(
            &mut of,
            "averageValue",
            o.target.average_value.as_ref().map(|v| q(Some(v))),
        );
        f.push(("object", Go::Obj(of)));
    }
    if let Some(p) = &m.pods {
        let mut pf = vec![
            ("metricName", s(&p.metric.name)),
            ("targetAverageValue", q(p.target.average_value.as_ref())),
        ];
        opt(
            &mut pf,
            "selector",
            p.metric.selector.as_ref().map(selector),
        );
        f.push(("pods", Go::Obj(pf)));
    }
    if let Some(r) = &m.resource {
        f.push(("resource", resource_target(&r.name, &r.target, None)));
    }
    if let Some(r) = &m.container_resource {
        f.push((
            "containerResource",
            resource_target(&r.name, &r.target, Some(&r.container)),
        ));
    }
    if let Some(e) = &m.external {
        let mut ef = vec![("metricName", s(&e.metric.name))];
        opt(
            &mut ef,
            "metricSelector",
            e.metric.selector.as_ref().map(selector),
        );
        opt(
            &mut ef,
            "targetValue",
            e.target.value.as_ref().map(|v| q(Some(v))),
        );
        opt(
            &mut ef,
            "targetAverageValue",
            e.target.average_value.as_ref().map(|v| q(Some(v))),
        );
        f.push(("external", Go::Obj(ef)));
    }
    Go::Obj(f)
}

fn resource_target(name: &str, t: &MetricTarget, container: Option<&str>) -> Go {
    let mut f = vec![("name", s(name))];
    opt(
        &mut f,
        "targetAverageUtilization",
        t.average_utilization.map(int),
    );
    opt(
        &mut f,
        "targetAverageValue",
        t.average_value.as_ref().map(|v| q(Some(v))),
    );
    if let Some(c) = container {
        f.push(("container", s(c)));
    }
    Go::Obj(f)
}

/// A v2 metric status as the v1 `MetricStatus` of the `current-metrics` annotation.
pub fn metric_status(m: &MetricStatus) -> Go {
    let mut f = vec![("type", s(&m.type_))];
    if let Some(o) = &m.object {
        let mut of = vec![
            ("target", reference(&o.described_object)),
            ("metricName", s(&o.metric.name)),
            ("currentValue", q(o.current.value.as_ref())),
        ];
        opt(
            &mut of,
            "selector",
            o.metric.selector.as_ref().map(selector),
        );
        opt(
            &mut of,
            "averageValue",
            o.current.average_value.as_ref().map(|v| q(Some(v))),
        );
        f.push(("object", Go::Obj(of)));
    }
    if let Some(p) = &m.pods {
        let mut pf = vec![
            ("metricName", s(&p.metric.name)),
            ("currentAverageValue", q(p.current.average_value.as_ref())),
        ];
        opt(
            &mut pf,
            "selector",
            p.metric.selector.as_ref().map(selector),
        );
        f.push(("pods", Go::Obj(pf)));
    }
    if let Some(r) = &m.resource {
        f.push(("resource", resource_current(&r.name, &r.current, None)));
    }
    if let Some(r) = &m.container_resource {
        f.push((
            "containerResource",
            resource_current(&r.name, &r.current, Some(&r.container)),
        ));
    }
    if let Some(e) = &m.external {
        let mut ef = vec![("metricName", s(&e.metric.name))];
        opt(
            &mut ef,
            "metricSelector",
            e.metric.selector.as_ref().map(selector),
        );
        ef.push(("currentValue", q(e.current.value.as_ref())));
        opt(
            &mut ef,
            "currentAverageValue",
            e.current.average_value.as_ref().map(|v| q(Some(v))),
        );
        f.push(("external", Go::Obj(ef)));
    }
    Go::Obj(f)
}

fn resource_current(name: &str, c: &MetricValueStatus, container: Option<&str>) -> Go {
    let mut f = vec![("name", s(name))];
    opt(
        &mut f,
        "currentAverageUtilization",
        c.average_utilization.map(int),
    );
    f.push(("currentAverageValue", q(c.average_value.as_ref())));
    if let Some(c) = container {
        f.push(("container", s(c)));
    }
    Go::Obj(f)
}

/// A condition as the v1 `HorizontalPodAutoscalerCondition` of the `conditions` annotation.
pub fn condition(c: &HorizontalPodAutoscalerCondition) -> Go {
    let time = c
        .last_transition_time
        .as_ref()
        .and_then(|t| serde_json::to_value(t).ok())
        .unwrap_or(Value::Null);
    let mut f = vec![
        ("type", s(&c.type_)),
        ("status", s(&c.status)),
        ("lastTransitionTime", Go::Val(time)),
    ];
    opt(
        &mut f,
        "reason",
        c.reason.as_deref().filter(|r| !r.is_empty()).map(s),
    );
    opt(
        &mut f,
        "message",
        c.message.as_deref().filter(|m| !m.is_empty()).map(s),
    );
    Go::Obj(f)
}

/// The internal `HorizontalPodAutoscalerBehavior` (Go field names, every field written).
pub fn behavior(b: &HorizontalPodAutoscalerBehavior) -> Go {
    let rules = |r: &Option<HPAScalingRules>| match r {
        None => Go::Val(Value::Null),
        Some(r) => Go::Obj(vec![
            (
                "StabilizationWindowSeconds",
                r.stabilization_window_seconds
                    .map_or(Go::Val(Value::Null), int),
            ),
            (
                "SelectPolicy",
                r.select_policy.as_deref().map_or(Go::Val(Value::Null), s),
            ),
            (
                "Policies",
                r.policies.as_ref().map_or(Go::Val(Value::Null), |ps| {
                    Go::Arr(
                        ps.iter()
                            .map(|p| {
                                Go::Obj(vec![
                                    ("Type", s(&p.type_)),
                                    ("Value", int(p.value)),
                                    ("PeriodSeconds", int(p.period_seconds)),
                                ])
                            })
                            .collect(),
                    )
                }),
            ),
            (
                "Tolerance",
                r.tolerance
                    .as_ref()
                    .map_or(Go::Val(Value::Null), |t| q(Some(t))),
            ),
        ]),
    };
    Go::Obj(vec![
        ("ScaleUp", rules(&b.scale_up)),
        ("ScaleDown", rules(&b.scale_down)),
    ])
}

// ---- reading the annotations back (`json.Unmarshal` into the v1 / internal types) ----

fn field<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key).filter(|v| !v.is_null())
}

fn string(v: &Value, key: &str) -> String {
    field(v, key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn quantity(v: &Value, key: &str) -> Option<Quantity> {
    field(v, key)
        .and_then(Value::as_str)
        .map(|s| Quantity(s.to_owned()))
}

fn int32(v: &Value, key: &str) -> Option<i32> {
    field(v, key)
        .and_then(Value::as_i64)
        .and_then(|n| i32::try_from(n).ok())
}

fn read_reference(v: Option<&Value>) -> CrossVersionObjectReference {
    let v = v.cloned().unwrap_or_default();
    CrossVersionObjectReference {
        kind: string(&v, "kind"),
        name: string(&v, "name"),
        api_version: field(&v, "apiVersion")
            .and_then(Value::as_str)
            .map(str::to_owned),
    }
}

fn read_selector(v: &Value, key: &str) -> Option<LabelSelector> {
    field(v, key).and_then(|s| serde_json::from_value(s.clone()).ok())
}

/// A v1 `MetricSpec` of the `metrics` annotation as a v2 metric spec.
pub fn read_metric_spec(v: &Value) -> MetricSpec {
    let mut out = MetricSpec {
        type_: string(v, "type"),
        ..Default::default()
    };
    if let Some(o) = field(v, "object") {
        let average = quantity(o, "averageValue");
        out.object = Some(k8s_openapi::api::autoscaling::v2::ObjectMetricSource {
            described_object: read_reference(field(o, "target")),
            metric: MetricIdentifier {
                name: string(o, "metricName"),
                selector: read_selector(o, "selector"),
            },
            target: MetricTarget {
                type_: if average.is_none() {
                    "Value"
                } else {
                    "AverageValue"
                }
                .into(),
                value: Some(quantity(o, "targetValue").unwrap_or_else(|| Quantity("0".into()))),
                average_value: average,
                average_utilization: None,
            },
        });
    }
    if let Some(p) = field(v, "pods") {
        out.pods = Some(k8s_openapi::api::autoscaling::v2::PodsMetricSource {
            metric: MetricIdentifier {
                name: string(p, "metricName"),
                selector: read_selector(p, "selector"),
            },
            target: MetricTarget {
                type_: "AverageValue".into(),
                average_value: Some(
                    quantity(p, "targetAverageValue").unwrap_or_else(|| Quantity("0".into())),
                ),
                ..Default::default()
            },
        });
    }
    let resource_target = |r: &Value| {
        let utilization = int32(r, "targetAverageUtilization");
        MetricTarget {
            type_: if utilization.is_none() {
                "AverageValue"
            } else {
                "Utilization"
            }
            .into(),
            average_value: quantity(r, "targetAverageValue"),
            average_utilization: utilization,
            value: None,
        }
    };
    if let Some(r) = field(v, "resource") {
        out.resource = Some(k8s_openapi::api::autoscaling::v2::ResourceMetricSource {
            name: string(r, "name"),
            target: resource_target(r),
        });
    }
    if let Some(r) = field(v, "containerResource") {
        out.container_resource = Some(
            k8s_openapi::api::autoscaling::v2::ContainerResourceMetricSource {
                name: string(r, "name"),
                container: string(r, "container"),
                target: resource_target(r),
            },
        );
    }
    if let Some(e) = field(v, "external") {
        let value = quantity(e, "targetValue");
        out.external = Some(k8s_openapi::api::autoscaling::v2::ExternalMetricSource {
            metric: MetricIdentifier {
                name: string(e, "metricName"),
                selector: read_selector(e, "metricSelector"),
            },
            target: MetricTarget {
                type_: if value.is_none() {
                    "AverageValue"
                } else {
                    "Value"
                }
                .into(),
                value,
                average_value: quantity(e, "targetAverageValue"),
                average_utilization: None,
            },
        });
    }
    out
}

/// A v1 `MetricStatus` of the `current-metrics` annotation as a v2 metric status.
pub fn read_metric_status(v: &Value) -> MetricStatus {
    let mut out = MetricStatus {
        type_: string(v, "type"),
        ..Default::default()
    };
    if let Some(o) = field(v, "object") {
        out.object = Some(k8s_openapi::api::autoscaling::v2::ObjectMetricStatus {
            described_object: read_reference(field(o, "target")),
            metric: MetricIdentifier {
                name: string(o, "metricName"),
                selector: read_selector(o, "selector"),
            },
            current: MetricValueStatus {
                value: Some(quantity(o, "currentValue").unwrap_or_else(|| Quantity("0".into()))),
                average_value: quantity(o, "averageValue"),
                average_utilization: None,
            },
        });
    }
    if let Some(p) = field(v, "pods") {
        out.pods = Some(k8s_openapi::api::autoscaling::v2::PodsMetricStatus {
            metric: MetricIdentifier {
                name: string(p, "metricName"),
                selector: read_selector(p, "selector"),
            },
            current: MetricValueStatus {
                average_value: Some(
                    quantity(p, "currentAverageValue").unwrap_or_else(|| Quantity("0".into())),
                ),
                ..Default::default()
            },
        });
    }
    let resource_current = |r: &Value| MetricValueStatus {
        average_value: Some(
            quantity(r, "currentAverageValue").unwrap_or_else(|| Quantity("0".into())),
        ),
        average_utilization: int32(r, "currentAverageUtilization"),
        value: None,
    };
    if let Some(r) = field(v, "resource") {
        out.resource = Some(k8s_openapi::api::autoscaling::v2::ResourceMetricStatus {
            name: string(r, "name"),
            current: resource_current(r),
        });
    }
    if let Some(r) = field(v, "containerResource") {
        out.container_resource = Some(
            k8s_openapi::api::autoscaling::v2::ContainerResourceMetricStatus {
                name: string(r, "name"),
                container: string(r, "container"),
                current: resource_current(r),
            },
        );
    }
    if let Some(e) = field(v, "external") {
        out.external = Some(k8s_openapi::api::autoscaling::v2::ExternalMetricStatus {
            metric: MetricIdentifier {
                name: string(e, "metricName"),
                selector: read_selector(e, "metricSelector"),
            },
            current: MetricValueStatus {
                value: Some(quantity(e, "currentValue").unwrap_or_else(|| Quantity("0".into()))),
                average_value: quantity(e, "currentAverageValue"),
                average_utilization: None,
            },
        });
    }
    out
}

/// The member of `v` named `key`, matched as Go's decoder matches names: case-insensitively.
fn go_field<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v)
        .filter(|v| !v.is_null())
}

/// The behavior annotation (the internal Go type) as a v2 behavior; `None` when it sets no
/// direction (an empty behavior is not kept, as in Kubernetes).
pub fn read_behavior(v: &Value) -> Option<HorizontalPodAutoscalerBehavior> {
    let rules = |key: &str| {
        go_field(v, key).map(|r| HPAScalingRules {
            stabilization_window_seconds: go_field(r, "StabilizationWindowSeconds")
                .and_then(Value::as_i64)
                .and_then(|n| i32::try_from(n).ok()),
            select_policy: go_field(r, "SelectPolicy")
                .and_then(Value::as_str)
                .map(str::to_owned),
            policies: go_field(r, "Policies").and_then(Value::as_array).map(|ps| {
                ps.iter()
                    .map(|p| HPAScalingPolicy {
                        type_: go_field(p, "Type")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        value: go_field(p, "Value")
                            .and_then(Value::as_i64)
                            .and_then(|n| i32::try_from(n).ok())
                            .unwrap_or(0),
                        period_seconds: go_field(p, "PeriodSeconds")
                            .and_then(Value::as_i64)
                            .and_then(|n| i32::try_from(n).ok())
                            .unwrap_or(0),
                    })
                    .collect()
            }),
            tolerance: go_field(r, "Tolerance")
                .and_then(Value::as_str)
                .map(|t| Quantity(t.to_owned())),
        })
    };
    let behavior = HorizontalPodAutoscalerBehavior {
        scale_up: rules("ScaleUp"),
        scale_down: rules("ScaleDown"),
    };
    (behavior.scale_up.is_some() || behavior.scale_down.is_some()).then_some(behavior)
}

/// A v1 condition of the `conditions` annotation (its fields are v2's).
pub fn read_condition(v: &Value) -> Option<HorizontalPodAutoscalerCondition> {
    serde_json::from_value(v.clone()).ok()
}
