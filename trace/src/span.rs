//! The span record: what one component did, when, on whose behalf, and why.
//!
//! Every component reports its spans in this one shape (JSON over HTTP to the API server's
//! collector), and every view and export reads it. It is a small subset of OpenTelemetry's
//! span (`opentelemetry-proto/.../trace/v1/trace.proto`): ids, parent, name, kind, start and
//! end, attributes, links; plus the component that recorded it (OpenTelemetry's
//! `service.name` resource attribute) and `summary`, the one line of "what and why" the
//! views print.
//!
//! ```json
//! {"traceId":"4bf9…4736","spanId":"00f0…02b7","parentSpanId":"a3ce…929d",
//!  "name":"sync replicaset","kind":"internal","component":"kube-controller-manager",
//!  "startUnixNanos":1700000000000000000,"endUnixNanos":1700000000001200000,
//!  "summary":"desired 3, have 0 → create 3 in batches 1, 2",
//!  "attributes":{"key":"default/nginx-6d4cf56db6","queue.retries":0},
//!  "links":[{"traceId":"…","spanId":"…"}]}
//! ```

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::context::{SpanContext, SpanId, TraceId};

/// The role of a span, as OpenTelemetry's `SpanKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SpanKind {
    /// Work inside a component (a sync, a scheduling decision, a kubelet stage).
    #[default]
    Internal,
    /// The API server handling a request.
    Server,
    /// A component sending a request to the API server.
    Client,
    /// A component receiving something it did not ask for at that moment (a watch event, a
    /// key out of a work queue).
    Consumer,
}

/// An attribute value: text, an integer or a flag. On the wire it is the plain JSON value
/// (`true`, `42`, `"text"`), as OTLP's `AnyValue` reads in JSON without its type tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum AttributeValue {
    /// A flag.
    Bool(bool),
    /// A number (counts, revisions, codes).
    Int(i64),
    /// Text.
    Str(String),
}

/// Read by the value's JSON type directly: the API server decodes every span the components
/// post, and an untagged enum would try (and format an error for) each variant in turn.
impl<'de> Deserialize<'de> for AttributeValue {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = AttributeValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a boolean, an integer or a string")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(AttributeValue::Bool(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(AttributeValue::Int(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
                i64::try_from(v).map(AttributeValue::Int).map_err(|_| {
                    E::invalid_value(serde::de::Unexpected::Unsigned(v), &"a 64-bit integer")
                })
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(AttributeValue::Str(v.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(AttributeValue::Str(v))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl fmt::Display for AttributeValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttributeValue::Bool(b) => write!(f, "{b}"),
            AttributeValue::Int(i) => write!(f, "{i}"),
            AttributeValue::Str(s) => f.write_str(s),
        }
    }
}

impl From<&str> for AttributeValue {
    fn from(s: &str) -> Self {
        AttributeValue::Str(s.to_owned())
    }
}
impl From<String> for AttributeValue {
    fn from(s: String) -> Self {
        AttributeValue::Str(s)
    }
}
impl From<&String> for AttributeValue {
    fn from(s: &String) -> Self {
        AttributeValue::Str(s.clone())
    }
}
impl From<bool> for AttributeValue {
    fn from(b: bool) -> Self {
        AttributeValue::Bool(b)
    }
}
impl From<i64> for AttributeValue {
    fn from(i: i64) -> Self {
        AttributeValue::Int(i)
    }
}
impl From<u64> for AttributeValue {
    fn from(i: u64) -> Self {
        AttributeValue::Int(i64::try_from(i).unwrap_or(i64::MAX))
    }
}
impl From<usize> for AttributeValue {
    fn from(i: usize) -> Self {
        AttributeValue::Int(i64::try_from(i).unwrap_or(i64::MAX))
    }
}
impl From<u32> for AttributeValue {
    fn from(i: u32) -> Self {
        AttributeValue::Int(i64::from(i))
    }
}
impl From<i32> for AttributeValue {
    fn from(i: i32) -> Self {
        AttributeValue::Int(i64::from(i))
    }
}
impl From<u16> for AttributeValue {
    fn from(i: u16) -> Self {
        AttributeValue::Int(i64::from(i))
    }
}

/// A span's attributes: each key once, in key order (on the wire a JSON object, as a
/// `BTreeMap` would write it).
///
/// A sorted vector rather than a map: a span carries a handful of attributes, every component
/// creates spans by the thousand and the collector keeps 100,000 of them, and a `BTreeMap`
/// allocates a node of eleven entries for the first one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes(Vec<(String, AttributeValue)>);

impl Attributes {
    /// No attributes.
    pub fn new() -> Self {
        Attributes(Vec::new())
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    /// Sets `key` to `value`, returning the value it replaces.
    pub fn insert(&mut self, key: String, value: AttributeValue) -> Option<AttributeValue> {
        match self.position(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (key, value));
                None
            }
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&AttributeValue> {
        self.position(key).ok().map(|i| &self.0[i].1)
    }

    /// Whether `key` is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.iter().map(|(k, _)| k)
    }

    /// The attributes, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &AttributeValue)> {
        self.into_iter()
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Extend<(String, AttributeValue)> for Attributes {
    fn extend<I: IntoIterator<Item = (String, AttributeValue)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl FromIterator<(String, AttributeValue)> for Attributes {
    fn from_iter<I: IntoIterator<Item = (String, AttributeValue)>>(iter: I) -> Self {
        let mut attributes = Attributes::new();
        attributes.extend(iter);
        attributes
    }
}

impl<'a> IntoIterator for &'a Attributes {
    type Item = (&'a String, &'a AttributeValue);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, AttributeValue)>,
        fn(&'a (String, AttributeValue)) -> (&'a String, &'a AttributeValue),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl Serialize for Attributes {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

/// Read from a JSON object; a key given twice keeps its last value, as a map would. The
/// entries are sorted once at the end: a span posted to the collector with its keys in
/// reverse order must not cost a shift per key.
impl<'de> Deserialize<'de> for Attributes {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Attributes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of attributes")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Attributes, A::Error> {
                let mut entries: Vec<(String, AttributeValue)> =
                    Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
                while let Some(entry) = map.next_entry::<String, AttributeValue>()? {
                    entries.push(entry);
                }
                // Stable: equal keys stay in the order given; reversed, the last comes first
                // and `dedup_by` keeps it.
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                entries.reverse();
                entries.dedup_by(|later, kept| later.0 == kept.0);
                entries.reverse();
                Ok(Attributes(entries))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

/// Another span this one was caused by, besides its parent (a work-queue key that merged
/// several events links to each of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Link {
    /// The linked span's trace.
    pub trace_id: TraceId,
    /// The linked span.
    pub span_id: SpanId,
}

impl From<SpanContext> for Link {
    fn from(ctx: SpanContext) -> Self {
        Link {
            trace_id: ctx.trace_id,
            span_id: ctx.span_id,
        }
    }
}

/// One finished span.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Span {
    /// The trace it belongs to.
    pub trace_id: TraceId,
    /// Its own id.
    pub span_id: SpanId,
    /// The span that caused it; `None` for the first span of a trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<SpanId>,
    /// What kind of step it is (`create deployments`, `sync replicaset`, `schedule pod`).
    pub name: String,
    /// Its role.
    #[serde(default)]
    pub kind: SpanKind,
    /// Who recorded it (`kube-apiserver`, `kube-controller-manager`, `kube-scheduler`,
    /// `kubelet`).
    pub component: String,
    /// Start, in nanoseconds since the Unix epoch.
    pub start_unix_nanos: u64,
    /// End, in nanoseconds since the Unix epoch (≥ start).
    pub end_unix_nanos: u64,
    /// One line of what happened and why.
    #[serde(default)]
    pub summary: String,
    /// Details: keys, counts, revisions, reasons.
    #[serde(default, skip_serializing_if = "Attributes::is_empty")]
    pub attributes: Attributes,
    /// Further causes (see [`Link`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
}

impl Span {
    /// A span for `ctx` (its trace and span id) under `parent`, starting now; set the rest
    /// and call [`Span::end`].
    pub fn start(
        ctx: SpanContext,
        parent: Option<SpanId>,
        name: impl Into<String>,
        kind: SpanKind,
        component: impl Into<String>,
    ) -> Self {
        let now = unix_nanos(SystemTime::now());
        Span {
            trace_id: ctx.trace_id,
            span_id: ctx.span_id,
            parent_span_id: parent,
            name: name.into(),
            kind,
            component: component.into(),
            start_unix_nanos: now,
            end_unix_nanos: now,
            summary: String::new(),
            attributes: Attributes::new(),
            links: Vec::new(),
        }
    }

    /// This span's context (for children).
    pub fn context(&self) -> SpanContext {
        SpanContext {
            trace_id: self.trace_id,
            span_id: self.span_id,
            sampled: true,
        }
    }

    /// Sets an attribute.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<AttributeValue>) -> &mut Self {
        self.attributes.insert(key.into(), value.into());
        self
    }

    /// Sets an attribute (builder style).
    pub fn with(mut self, key: impl Into<String>, value: impl Into<AttributeValue>) -> Self {
        self.set(key, value);
        self
    }

    /// Sets the start time.
    pub fn started_at(mut self, at: SystemTime) -> Self {
        self.start_unix_nanos = unix_nanos(at);
        self.end_unix_nanos = self.end_unix_nanos.max(self.start_unix_nanos);
        self
    }

    /// Ends the span now.
    pub fn end(&mut self) {
        self.end_at(SystemTime::now());
    }

    /// Ends the span at `at` (never before its start).
    pub fn end_at(&mut self, at: SystemTime) {
        self.end_unix_nanos = unix_nanos(at).max(self.start_unix_nanos);
    }

    /// How long it took.
    pub fn duration(&self) -> Duration {
        Duration::from_nanos(self.end_unix_nanos.saturating_sub(self.start_unix_nanos))
    }

    /// An attribute as text, if set.
    pub fn attribute(&self, key: &str) -> Option<String> {
        self.attributes.get(key).map(ToString::to_string)
    }
}

/// Nanoseconds since the Unix epoch (0 before it).
pub fn unix_nanos(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The time `nanos` after the Unix epoch.
pub fn from_unix_nanos(nanos: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_as_json_with_camel_case_and_typed_attributes() {
        let ctx = SpanContext::new_root();
        let mut span = Span::start(ctx, None, "sync replicaset", SpanKind::Internal, "kcm")
            .with("key", "default/web")
            .with("retries", 2u32)
            .with("merged", true);
        span.links.push(ctx.child().into());
        span.summary = "desired 3, have 0".into();
        span.end();
        let json = serde_json::to_value(&span).unwrap();
        assert_eq!(json["name"], "sync replicaset");
        assert_eq!(json["kind"], "internal");
        assert_eq!(json["attributes"]["retries"], 2);
        assert_eq!(json["attributes"]["merged"], true);
        assert!(json.get("parentSpanId").is_none());
        assert_eq!(json["links"][0]["traceId"], ctx.trace_id.to_string());
        let back: Span = serde_json::from_value(json).unwrap();
        assert_eq!(back, span);
        assert!(span.end_unix_nanos >= span.start_unix_nanos);
    }

    #[test]
    fn attribute_values_decode_by_their_json_type() {
        let v: std::collections::BTreeMap<String, AttributeValue> =
            serde_json::from_str(r#"{"b": true, "i": -3, "u": 7, "s": "7", "e": ""}"#).unwrap();
        assert_eq!(v["b"], AttributeValue::Bool(true));
        assert_eq!(v["i"], AttributeValue::Int(-3));
        assert_eq!(v["u"], AttributeValue::Int(7));
        assert_eq!(v["s"], AttributeValue::Str("7".into()));
        assert_eq!(v["e"], AttributeValue::Str(String::new()));
        for bad in ["1.5", "null", "[1]", "{}", "18446744073709551615"] {
            let err = serde_json::from_str::<AttributeValue>(bad).unwrap_err();
            assert!(err.to_string().contains("integer"), "{bad}: {err}");
        }
    }

    #[test]
    fn attributes_keep_one_value_per_key_in_key_order_and_write_as_a_map_would() {
        let mut attributes = Attributes::new();
        for (k, v) in [
            ("verb", "create"),
            ("code", "201"),
            ("name", "web"),
            ("code", "409"),
        ] {
            attributes.insert(k.to_owned(), v.into());
        }
        assert_eq!(attributes.len(), 3);
        assert_eq!(attributes.get("code"), Some(&AttributeValue::from("409")));
        assert!(attributes.contains_key("name") && !attributes.contains_key("nam"));
        assert_eq!(
            attributes.keys().map(String::as_str).collect::<Vec<_>>(),
            ["code", "name", "verb"]
        );
        let as_map: std::collections::BTreeMap<String, AttributeValue> = attributes
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(
            serde_json::to_string(&attributes).unwrap(),
            serde_json::to_string(&as_map).unwrap()
        );
        // Read back in any order; a repeated key keeps its last value.
        let read: Attributes =
            serde_json::from_str(r#"{"verb": "create", "code": 1, "name": "web", "code": 409}"#)
                .unwrap();
        assert_eq!(read.keys().collect::<Vec<_>>(), ["code", "name", "verb"]);
        assert_eq!(read.get("code"), Some(&AttributeValue::Int(409)));
        let extended: Attributes = [("b".to_owned(), 1.into()), ("a".to_owned(), true.into())]
            .into_iter()
            .collect();
        assert_eq!(
            (&extended)
                .into_iter()
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
        let many: String = (0..1000)
            .rev()
            .map(|i| format!(r#""k{i:04}": {i}, "k{i:04}": "last {i}""#))
            .collect::<Vec<_>>()
            .join(", ");
        let read: Attributes = serde_json::from_str(&format!("{{{many}}}")).unwrap();
        assert_eq!(read.len(), 1000);
        assert!(read.keys().zip(read.keys().skip(1)).all(|(a, b)| a < b));
        assert_eq!(read.get("k0007"), Some(&AttributeValue::from("last 7")));
        for bad in [r#"[["a", 1]]"#, r#"{"a": 1.5}"#, r#""a""#] {
            assert!(serde_json::from_str::<Attributes>(bad).is_err(), "{bad}");
        }
        // A span without attributes writes none.
        let span = Span::start(SpanContext::new_root(), None, "x", SpanKind::Internal, "a");
        assert!(
            serde_json::to_value(&span)
                .unwrap()
                .get("attributes")
                .is_none()
        );
    }

    #[test]
    fn end_never_precedes_start() {
        let mut span = Span::start(SpanContext::new_root(), None, "x", SpanKind::Server, "a");
        span.end_at(UNIX_EPOCH);
        assert_eq!(span.duration(), Duration::ZERO);
    }
}
