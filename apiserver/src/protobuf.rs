//! Decoding of the Kubernetes protobuf wire format for the bodies kubectl's generators send.
//!
//! Mirrors `staging/src/k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go`:
//!
//! ```text
//!   "k8s\0" ++ runtime.Unknown { 1: TypeMeta { 1: apiVersion, 2: kind },
//!                                2: raw (the object, protobuf), 3: contentEncoding, 4: contentType }
//! ```
//!
//! `kubectl create namespace|configmap|secret|serviceaccount|deployment|service|job|cronjob`
//! POST their objects as `application/vnd.kubernetes.protobuf` (typed client-go clients), so the
//! server must read them. Unlike Kubernetes, which generates a decoder for every type, miniplane
//! decodes with a small hand-written schema (the field numbers of `generated.proto`) that covers
//! what those generators set: metadata, the kinds above and the pod template fields kubectl
//! fills in. A non-empty field outside the schema is refused (415) rather than silently lost.
//!
//! Go's generated marshallers write every non-pointer field, zero or not; a zero value of such
//! a field becomes "absent" here (as Go's JSON `omitempty` would print it), while fields that are
//! pointers in Go keep their zero values (`replicas: 0` stays 0).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

/// The 4-byte prefix of every Kubernetes protobuf body.
pub const MAGIC: &[u8] = b"k8s\0";
/// The protobuf media type.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Why a protobuf body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    /// The bytes are not valid protobuf (or lack the `k8s\0` prefix).
    #[error("invalid protobuf body: {0}")]
    Malformed(String),
    /// The kind or a field is outside what miniplane decodes.
    #[error("protobuf decoding of {0} is not supported; send application/json")]
    Unsupported(String),
}

type Result<T> = std::result::Result<T, ProtobufError>;

/// How a field's bytes become JSON.
#[derive(Clone, Copy)]
enum Ty {
    Str,
    Int,
    Bool,
    Msg(&'static [F]),
    MapStr,
    MapBytes,
    MapQuantity,
    Time,
    IntOrString,
}

/// One field of a message schema.
#[derive(Clone, Copy)]
struct F {
    num: u64,
    name: &'static str,
    ty: Ty,
    repeated: bool,
    /// A pointer field in Go: its zero value was set on purpose and is kept.
    keep_zero: bool,
}

const fn f(num: u64, name: &'static str, ty: Ty) -> F {
    F {
        num,
        name,
        ty,
        repeated: false,
        keep_zero: false,
    }
}
const fn rep(num: u64, name: &'static str, ty: Ty) -> F {
    F {
        num,
        name,
        ty,
        repeated: true,
        keep_zero: false,
    }
}
const fn ptr(num: u64, name: &'static str, ty: Ty) -> F {
    F {
        num,
        name,
        ty,
        repeated: false,
        keep_zero: true,
    }
}

const TYPE_META: &[F] = &[f(1, "apiVersion", Ty::Str), f(2, "kind", Ty::Str)];
const OWNER_REFERENCE: &[F] = &[
    f(1, "kind", Ty::Str),
    f(3, "name", Ty::Str),
    f(4, "uid", Ty::Str),
    f(5, "apiVersion", Ty::Str),
    ptr(6, "controller", Ty::Bool),
    ptr(7, "blockOwnerDeletion", Ty::Bool),
];
const OBJECT_META: &[F] = &[
    f(1, "name", Ty::Str),
    f(2, "generateName", Ty::Str),
    f(3, "namespace", Ty::Str),
    f(4, "selfLink", Ty::Str),
    f(5, "uid", Ty::Str),
    f(6, "resourceVersion", Ty::Str),
    f(7, "generation", Ty::Int),
    f(8, "creationTimestamp", Ty::Time),
    f(9, "deletionTimestamp", Ty::Time),
    ptr(10, "deletionGracePeriodSeconds", Ty::Int),
    f(11, "labels", Ty::MapStr),
    f(12, "annotations", Ty::MapStr),
    rep(13, "ownerReferences", Ty::Msg(OWNER_REFERENCE)),
    rep(14, "finalizers", Ty::Str),
];
const LABEL_SELECTOR_REQUIREMENT: &[F] = &[
    f(1, "key", Ty::Str),
    f(2, "operator", Ty::Str),
    rep(3, "values", Ty::Str),
];
const LABEL_SELECTOR: &[F] = &[
    f(1, "matchLabels", Ty::MapStr),
    rep(2, "matchExpressions", Ty::Msg(LABEL_SELECTOR_REQUIREMENT)),
];
const CONTAINER_PORT: &[F] = &[
    f(1, "name", Ty::Str),
    f(2, "hostPort", Ty::Int),
    f(3, "containerPort", Ty::Int),
    f(4, "protocol", Ty::Str),
    f(5, "hostIP", Ty::Str),
];
const ENV_VAR: &[F] = &[f(1, "name", Ty::Str), f(2, "value", Ty::Str)];
const RESOURCES: &[F] = &[
    f(1, "limits", Ty::MapQuantity),
    f(2, "requests", Ty::MapQuantity),
];
const CONTAINER: &[F] = &[
    f(1, "name", Ty::Str),
    f(2, "image", Ty::Str),
    rep(3, "command", Ty::Str),
    rep(4, "args", Ty::Str),
    f(5, "workingDir", Ty::Str),
    rep(6, "ports", Ty::Msg(CONTAINER_PORT)),
    rep(7, "env", Ty::Msg(ENV_VAR)),
    f(8, "resources", Ty::Msg(RESOURCES)),
    f(13, "terminationMessagePath", Ty::Str),
    f(14, "imagePullPolicy", Ty::Str),
    f(16, "stdin", Ty::Bool),
    f(17, "stdinOnce", Ty::Bool),
    f(18, "tty", Ty::Bool),
    f(20, "terminationMessagePolicy", Ty::Str),
];
const POD_SPEC: &[F] = &[
    rep(2, "containers", Ty::Msg(CONTAINER)),
    f(3, "restartPolicy", Ty::Str),
    ptr(4, "terminationGracePeriodSeconds", Ty::Int),
    ptr(5, "activeDeadlineSeconds", Ty::Int),
    f(6, "dnsPolicy", Ty::Str),
    f(7, "nodeSelector", Ty::MapStr),
    f(8, "serviceAccountName", Ty::Str),
    f(9, "serviceAccount", Ty::Str),
    f(10, "nodeName", Ty::Str),
    f(11, "hostNetwork", Ty::Bool),
    f(12, "hostPID", Ty::Bool),
    f(13, "hostIPC", Ty::Bool),
    f(16, "hostname", Ty::Str),
    f(17, "subdomain", Ty::Str),
    f(19, "schedulerName", Ty::Str),
    rep(20, "initContainers", Ty::Msg(CONTAINER)),
    f(24, "priorityClassName", Ty::Str),
];
const POD_TEMPLATE_SPEC: &[F] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(POD_SPEC)),
];
/// Status messages: every field of a new object's status is zero and dropped.
const EMPTY: &[F] = &[];
const NAMESPACE_SPEC: &[F] = &[rep(1, "finalizers", Ty::Str)];
const NAMESPACE_STATUS: &[F] = &[f(1, "phase", Ty::Str)];
const NAMESPACE: &[F] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(NAMESPACE_SPEC)),
    f(3, "status", Ty::Msg(NAMESPACE_STATUS)),
];
const CONFIG_MAP: &[F] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "data", Ty::MapStr),
    f(3, "binaryData", Ty::MapBytes),
    ptr(4, "immutable", Ty::Bool),
];
const SECRET: &[F] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "data", Ty::MapBytes),
    f(3, "type", Ty::Str),
    f(4, "stringData", Ty::MapStr),
    ptr(5, "immutable", Ty::Bool),
];
const LOCAL_OBJECT_REFERENCE: &[F] = &[f(1, "name", Ty::Str)];
const SERVICE_ACCOUNT: &[F] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    rep(3, "imagePullSecrets", Ty::Msg(LOCAL_OBJECT_REFERENCE)),
    ptr(4, "automountServiceAccountToken", Ty::Bool),
];
const ROLLING_UPDATE_DEPLOYMENT: &[F] = &[
    f(1, "maxUnavailable", Ty::IntOrString),
    f(2, "maxSurge", Ty::IntOrString),
];
const DEPLOYMENT_STRATEGY: &[F] = &[
    f(1, "type", Ty::Str),
    f(2, "rollingUpdate", Ty::Msg(ROLLING_UPDATE_DEPLOYMENT)),
];
const DEPLOYMENT_SPEC: &[F] = &[
    ptr(1, "replicas", Ty::Int),
    f(2, "selector", Ty::Msg(LABEL_SELECTOR)),
    f(3, "template", Ty::Msg(POD_TEMPLATE_SPEC)),
    f(4, "strategy", Ty::Msg(DEPLOYMENT_STRATEGY)),
    f(5, "minReadySeconds", Ty::Int),
    ptr(6, "revisionHistoryLimit", Ty::Int),
    f(7, "paused", Ty::Bool),
    ptr(9, "progressDeadlineSeconds", Ty::Int),
];
const DEPLOYMENT: &[F] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(DEPLOYMENT_SPEC)),
    f(3, "status", Ty::Msg(EMPTY)),
];
const SERVICE_PORT: &[F] = &[
    f(1, "name", Ty::Str),
    f(2, "protocol", Ty::Str),
    f(3, "port", Ty::Int),
    f(4, "targetPort", Ty::IntOrString),
    f(5, "nodePort", Ty::Int),
];
const SERVICE_SPEC: &[F] = &[
    rep(1, "ports", Ty::Msg(SERVICE_PORT)),
    f(2, "selector", Ty::MapStr),
    f(3, "clusterIP", Ty::Str),
    f(4, "type", Ty::Str),
    f(11, "externalName", Ty::Str),
];
const SERVICE: &[F] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(SERVICE_SPEC)),
    f(3, "status", Ty::Msg(EMPTY)),
];
const JOB_SPEC: &[F] = &[
    ptr(1, "parallelism", Ty::Int),
    ptr(2, "completions", Ty::Int),
    ptr(3, "activeDeadlineSeconds", Ty::Int),
    f(4, "selector", Ty::Msg(LABEL_SELECTOR)),
    ptr(5, "manualSelector", Ty::Bool),
    f(6, "template", Ty::Msg(POD_TEMPLATE_SPEC)),
    ptr(7, "backoffLimit", Ty::Int),
];
const JOB: &[F] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(JOB_SPEC)),
    f(3, "status", Ty::Msg(EMPTY)),
];
const JOB_TEMPLATE_SPEC: &[F] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(JOB_SPEC)),
];
const CRON_JOB_SPEC: &[F] = &[
    f(1, "schedule", Ty::Str),
    ptr(2, "startingDeadlineSeconds", Ty::Int),
    f(3, "concurrencyPolicy", Ty::Str),
    ptr(4, "suspend", Ty::Bool),
    f(5, "jobTemplate", Ty::Msg(JOB_TEMPLATE_SPEC)),
    ptr(6, "successfulJobsHistoryLimit", Ty::Int),
    ptr(7, "failedJobsHistoryLimit", Ty::Int),
    ptr(8, "timeZone", Ty::Str),
];
const CRON_JOB: &[F] = &[
    f(1, "metadata", Ty::Msg(OBJECT_META)),
    f(2, "spec", Ty::Msg(CRON_JOB_SPEC)),
    f(3, "status", Ty::Msg(EMPTY)),
];

fn schema_of(api_version: &str, kind: &str) -> Option<&'static [F]> {
    Some(match (api_version, kind) {
        ("v1", "Namespace") => NAMESPACE,
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "Secret") => SECRET,
        ("v1", "ServiceAccount") => SERVICE_ACCOUNT,
        ("v1", "Service") => SERVICE,
        ("apps/v1", "Deployment") => DEPLOYMENT,
        ("batch/v1", "Job") => JOB,
        ("batch/v1", "CronJob") => CRON_JOB,
        _ => return None,
    })
}

/// One field as read off the wire.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self
                .buf
                .get(self.pos)
                .ok_or_else(|| ProtobufError::Malformed("truncated varint".into()))?;
            self.pos += 1;
            out |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(out);
            }
        }
        Err(ProtobufError::Malformed("varint too long".into()))
    }

    fn next(&mut self) -> Result<Option<(u64, Wire<'a>)>> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            2 => {
                let len = usize::try_from(self.varint()?)
                    .map_err(|_| ProtobufError::Malformed("length overflow".into()))?;
                let end = self
                    .pos
                    .checked_add(len)
                    .filter(|e| *e <= self.buf.len())
                    .ok_or_else(|| ProtobufError::Malformed("truncated field".into()))?;
                let bytes = &self.buf[self.pos..end];
                self.pos = end;
                Wire::Bytes(bytes)
            }
            1 | 5 => {
                return Err(ProtobufError::Malformed(
                    "fixed-width fields are not used by Kubernetes types".into(),
                ));
            }
            other => return Err(ProtobufError::Malformed(format!("wire type {other}"))),
        };
        Ok(Some((key >> 3, wire)))
    }
}

fn fields(buf: &[u8]) -> Result<Vec<(u64, Wire<'_>)>> {
    let mut r = Reader { buf, pos: 0 };
    let mut out = Vec::new();
    while let Some(f) = r.next()? {
        out.push(f);
    }
    Ok(out)
}

fn utf8(b: &[u8]) -> Result<String> {
    String::from_utf8(b.to_vec())
        .map_err(|_| ProtobufError::Malformed("string is not UTF-8".into()))
}

/// A map entry message: `{1: key, 2: value}`.
fn map_entry(b: &[u8]) -> Result<(String, Option<&[u8]>)> {
    let mut key = String::new();
    let mut value = None;
    for (num, w) in fields(b)? {
        match (num, w) {
            (1, Wire::Bytes(k)) => key = utf8(k)?,
            (2, Wire::Bytes(v)) => value = Some(v),
            _ => return Err(ProtobufError::Malformed("bad map entry".into())),
        }
    }
    Ok((key, value))
}

fn time(b: &[u8]) -> Result<Option<Value>> {
    let mut seconds = 0i64;
    for (num, w) in fields(b)? {
        if let (1, Wire::Varint(v)) = (num, w) {
            seconds = v as i64;
        }
    }
    if seconds == 0 {
        return Ok(None);
    }
    let t = jiff::Timestamp::from_second(seconds)
        .map_err(|e| ProtobufError::Malformed(format!("timestamp: {e}")))?;
    Ok(Some(json!(crate::meta::format_time(t))))
}

fn int_or_string(b: &[u8]) -> Result<Value> {
    let (mut ty, mut int, mut s) = (0u64, 0i64, String::new());
    for (num, w) in fields(b)? {
        match (num, w) {
            (1, Wire::Varint(v)) => ty = v,
            (2, Wire::Varint(v)) => int = v as i32 as i64,
            (3, Wire::Bytes(v)) => s = utf8(v)?,
            _ => {}
        }
    }
    Ok(if ty == 0 { json!(int) } else { json!(s) })
}

/// Converts one wire value of a field to JSON; `None` for a zero value to drop.
fn value(field: &F, w: Wire<'_>) -> Result<Option<Value>> {
    let v = match (field.ty, w) {
        (Ty::Str, Wire::Bytes(b)) => {
            let s = utf8(b)?;
            if s.is_empty() && !field.keep_zero {
                return Ok(None);
            }
            json!(s)
        }
        (Ty::Int, Wire::Varint(n)) => {
            if n == 0 && !field.keep_zero {
                return Ok(None);
            }
            json!(n as i64)
        }
        (Ty::Bool, Wire::Varint(n)) => {
            if n == 0 && !field.keep_zero {
                return Ok(None);
            }
            json!(n != 0)
        }
        (Ty::Msg(schema), Wire::Bytes(b)) => message(schema, b, field.name)?,
        (Ty::Time, Wire::Bytes(b)) => return time(b),
        (Ty::IntOrString, Wire::Bytes(b)) => int_or_string(b)?,
        _ => {
            return Err(ProtobufError::Malformed(format!(
                "unexpected wire type for {}",
                field.name
            )));
        }
    };
    Ok(Some(v))
}

fn message(schema: &[F], buf: &[u8], context: &str) -> Result<Value> {
    let mut out = Map::new();
    for (num, w) in fields(buf)? {
        let Some(field) = schema.iter().find(|f| f.num == num) else {
            let empty = match &w {
                Wire::Varint(v) => *v == 0,
                Wire::Bytes(b) => {
                    b.is_empty()
                        || fields(b).is_ok_and(|f| {
                            f.iter().all(|(_, w)| {
                                matches!(w, Wire::Varint(0))
                                    || matches!(w, Wire::Bytes(b) if b.is_empty())
                            })
                        })
                }
            };
            if empty {
                continue;
            }
            return Err(ProtobufError::Unsupported(format!(
                "field {num} of {context}"
            )));
        };
        match field.ty {
            Ty::MapStr | Ty::MapBytes | Ty::MapQuantity => {
                let Wire::Bytes(b) = w else {
                    return Err(ProtobufError::Malformed(format!("bad map {}", field.name)));
                };
                let (k, v) = map_entry(b)?;
                let v = v.unwrap_or_default();
                let jv = match field.ty {
                    Ty::MapStr => json!(utf8(v)?),
                    Ty::MapBytes => json!(STANDARD.encode(v)),
                    _ => {
                        // resource.Quantity { 1: string }
                        let q = fields(v)?
                            .into_iter()
                            .find_map(|(n, w)| match (n, w) {
                                (1, Wire::Bytes(s)) => Some(s),
                                _ => None,
                            })
                            .unwrap_or_default();
                        json!(utf8(q)?)
                    }
                };
                let entry = out.entry(field.name).or_insert_with(|| json!({}));
                if let Some(m) = entry.as_object_mut() {
                    m.insert(k, jv);
                }
            }
            _ => {
                let Some(v) = value(field, w)? else { continue };
                if field.repeated {
                    let entry = out.entry(field.name).or_insert_with(|| json!([]));
                    if let Some(a) = entry.as_array_mut() {
                        a.push(v);
                    }
                } else {
                    out.insert(field.name.to_string(), v);
                }
            }
        }
    }
    Ok(Value::Object(out))
}

/// Decodes a `k8s\0`-prefixed protobuf body into the object's JSON form.
pub fn decode(body: &[u8]) -> Result<Value> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| ProtobufError::Malformed("missing the k8s protobuf prefix".into()))?;
    let mut type_meta = Value::Null;
    let mut raw: &[u8] = &[];
    for (num, w) in fields(rest)? {
        match (num, w) {
            (1, Wire::Bytes(b)) => type_meta = message(TYPE_META, b, "TypeMeta")?,
            (2, Wire::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let api_version = type_meta["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let kind = type_meta["kind"].as_str().unwrap_or_default().to_string();
    let schema = schema_of(&api_version, &kind)
        .ok_or_else(|| ProtobufError::Unsupported(format!("{kind} in version {api_version:?}")))?;
    let mut obj = message(schema, raw, &kind)?;
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), json!(api_version));
        m.insert("kind".into(), json!(kind));
        // Empty statuses of new objects are dropped, as JSON clients would send them.
        if m.get("status")
            .is_some_and(|s| s.as_object().is_some_and(Map::is_empty))
        {
            m.remove("status");
        }
    }
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn bytes(num: u64, b: &[u8], out: &mut Vec<u8>) {
        varint(num << 3 | 2, out);
        varint(b.len() as u64, out);
        out.extend_from_slice(b);
    }

    fn int(num: u64, v: u64, out: &mut Vec<u8>) {
        varint(num << 3, out);
        varint(v, out);
    }

    fn entry(k: &str, v: &str) -> Vec<u8> {
        let mut e = Vec::new();
        bytes(1, k.as_bytes(), &mut e);
        bytes(2, v.as_bytes(), &mut e);
        e
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut tm = Vec::new();
        bytes(1, api_version.as_bytes(), &mut tm);
        bytes(2, kind.as_bytes(), &mut tm);
        let mut out = MAGIC.to_vec();
        bytes(1, &tm, &mut out);
        bytes(2, raw, &mut out);
        bytes(3, b"", &mut out);
        bytes(4, b"", &mut out);
        out
    }

    #[test]
    fn decodes_a_configmap_as_kubectl_sends_it() {
        let mut meta = Vec::new();
        bytes(1, b"cm1", &mut meta);
        bytes(2, b"", &mut meta);
        int(7, 0, &mut meta);
        bytes(8, b"", &mut meta);
        let mut raw = Vec::new();
        bytes(1, &meta, &mut raw);
        bytes(2, &entry("a", "b"), &mut raw);
        bytes(2, &entry("c", "d"), &mut raw);
        let obj = decode(&envelope("v1", "ConfigMap", &raw)).expect("decodes");
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1"}, "data": {"a": "b", "c": "d"}})
        );
    }

    #[test]
    fn pointer_zeroes_are_kept_and_plain_zeroes_dropped() {
        let mut spec = Vec::new();
        int(1, 0, &mut spec); // replicas: a pointer, set to 0
        int(5, 0, &mut spec); // minReadySeconds: plain
        let mut raw = Vec::new();
        bytes(2, &spec, &mut raw);
        bytes(3, b"", &mut raw);
        let obj = decode(&envelope("apps/v1", "Deployment", &raw)).expect("decodes");
        assert_eq!(obj["spec"], json!({"replicas": 0}));
        assert!(obj.get("status").is_none());
    }

    #[test]
    fn secrets_data_becomes_base64_and_unknown_content_is_refused() {
        let mut raw = Vec::new();
        bytes(2, &entry("k", "v"), &mut raw);
        let obj = decode(&envelope("v1", "Secret", &raw)).expect("decodes");
        assert_eq!(obj["data"]["k"], "dg==");
        let mut odd = Vec::new();
        bytes(99, b"x", &mut odd);
        assert!(matches!(
            decode(&envelope("v1", "Secret", &odd)),
            Err(ProtobufError::Unsupported(_))
        ));
        assert!(matches!(
            decode(&envelope("v1", "Pod", &[])),
            Err(ProtobufError::Unsupported(_))
        ));
        assert!(matches!(decode(b"nope"), Err(ProtobufError::Malformed(_))));
        assert!(matches!(
            decode(&[b'k', b'8', b's', 0, 0x0a, 0xff]),
            Err(ProtobufError::Malformed(_))
        ));
    }
}
