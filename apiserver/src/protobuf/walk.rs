//! The generic protobuf → JSON walk over the generated field tables, and the types whose
//! protobuf or JSON forms are their own (decoded by hand: no table describes them).
//!
//! Mirrors what the gogo-generated `Unmarshal` methods (`staging/src/k8s.io/api/*/generated.pb.go`)
//! followed by `encoding/json` do to a Go object: fields are read by tag number and wire type,
//! unknown fields are skipped (`skipGenerated`), and the JSON form follows the `json` tags.
//! Go's marshallers write every non-pointer field, zero or not; such a zero is dropped here as
//! `omitempty` drops it, while pointer fields (and fields without `omitempty`) keep it.
//! The errors are worded as the generated code words them (`proto: wrong wireType = 2 for field
//! Name`, `unexpected EOF`).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

/// A field is a list (`repeated`).
pub(super) const REPEATED: u8 = 1;
/// A zero value of the field is kept: a pointer in Go, or a field without `omitempty`.
pub(super) const KEEP_ZERO: u8 = 2;
/// The field's message is inlined into its parent's JSON (`json:",inline"`).
pub(super) const INLINE: u8 = 4;

/// One protobuf message: a Go struct of the API.
pub(super) struct Message {
    /// The Go type's name, for errors.
    pub name: &'static str,
    /// Its fields, by tag number.
    pub fields: &'static [Field],
}

/// One field of a message.
pub(super) struct Field {
    tag: u64,
    name: &'static str,
    ty: Ty,
    flags: u8,
}

impl Field {
    /// A field: tag number, JSON name, type and flags.
    pub(super) const fn new(tag: u64, name: &'static str, ty: Ty, flags: u8) -> Self {
        Field {
            tag,
            name,
            ty,
            flags,
        }
    }

    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// How a field's bytes become JSON.
#[derive(Clone, Copy)]
pub(super) enum Ty {
    /// `string`.
    Str,
    /// `int32` (a varint, truncated to 32 bits).
    Int32,
    /// `int64`.
    Int64,
    /// `bool`.
    Bool,
    /// `float64` (`fixed64`).
    Double,
    /// `[]byte`: base64 in JSON.
    Bytes,
    /// A nested message.
    Msg(&'static Message),
    /// `map<string, V>`: repeated `{1: key, 2: value}` entries.
    Map(&'static Ty),
    /// `metav1.Time`: a `Timestamp`, RFC 3339 to the second.
    Time,
    /// `metav1.MicroTime`: a `Timestamp`, RFC 3339 to the microsecond.
    MicroTime,
    /// `resource.Quantity`: `{1: string}`, the string in JSON.
    Quantity,
    /// `intstr.IntOrString`: `{1: type, 2: intVal, 3: strVal}`, a number or a string in JSON.
    IntOrString,
    /// `runtime.RawExtension`, `metav1.FieldsV1`, `apiextensions.JSON`: `{1: raw JSON}`.
    RawJson,
    /// A JSON-schema union of apiextensions, decoded as its message then picked from.
    Union(&'static Message, Union),
    /// A named string slice (`type ExtraValue []string`): `{1: repeated string}`, the array
    /// in JSON.
    StringList,
}

/// The apiextensions unions whose JSON is one of their fields (`marshal.go`).
#[derive(Clone, Copy)]
pub(super) enum Union {
    /// `JSONSchemaPropsOrArray`: the array if any, else the schema.
    Array,
    /// `JSONSchemaPropsOrBool`: the schema if any, else the boolean.
    Bool,
    /// `JSONSchemaPropsOrStringArray`: the strings if any, else the schema.
    StringArray,
}

type Result<T> = std::result::Result<T, String>;

const UNEXPECTED_EOF: &str = "unexpected EOF";

/// One field as read off the wire.
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    /// A `fixed32`/`float` value: no Kubernetes type has one; skipped.
    Fixed32,
    Bytes(&'a [u8]),
}

impl Wire<'_> {
    fn wire_type(&self) -> u64 {
        match self {
            Wire::Varint(_) => 0,
            Wire::Fixed64(_) => 1,
            Wire::Bytes(_) => 2,
            Wire::Fixed32 => 5,
        }
    }
}

/// Reads the fields of one message's bytes.
pub(super) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// The message's Go name, for errors.
    name: &'a str,
}

impl<'a> Reader<'a> {
    /// A reader of `buf`, the bytes of the message named `name`.
    pub(super) fn new(buf: &'a [u8], name: &'a str) -> Self {
        Reader { buf, pos: 0, name }
    }

    fn varint(&mut self) -> Result<u64> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or(UNEXPECTED_EOF)?;
            self.pos += 1;
            out |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(out);
            }
        }
        Err("proto: integer overflow".into())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or(UNEXPECTED_EOF)?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// The next field: its tag number and value; `None` at the end.
    fn next(&mut self) -> Result<Option<(u64, Wire<'a>)>> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let (tag, wire_type) = (key >> 3, key & 7);
        if wire_type == 4 {
            return Err(format!(
                "proto: {}: wiretype end group for non-group",
                self.name
            ));
        }
        if tag == 0 {
            return Err(format!(
                "proto: {}: illegal tag 0 (wire type {wire_type})",
                self.name
            ));
        }
        let wire = match wire_type {
            0 => Wire::Varint(self.varint()?),
            1 => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                Wire::Fixed64(u64::from_le_bytes(a))
            }
            2 => {
                let len = i64::try_from(self.varint()?)
                    .map_err(|_| "proto: negative length found during unmarshaling")?;
                let len = usize::try_from(len).map_err(|_| UNEXPECTED_EOF)?;
                Wire::Bytes(self.take(len)?)
            }
            5 => {
                self.take(4)?;
                Wire::Fixed32
            }
            3 => {
                self.skip_group()?;
                return self.next();
            }
            other => return Err(format!("proto: illegal wireType {other}")),
        };
        Ok(Some((tag, wire)))
    }

    /// Skips a (deprecated) group up to its end marker, as `skipGenerated` does.
    fn skip_group(&mut self) -> Result<()> {
        let mut depth = 1usize;
        while depth > 0 {
            if self.pos >= self.buf.len() {
                return Err(UNEXPECTED_EOF.into());
            }
            let key = self.varint()?;
            match key & 7 {
                0 => {
                    self.varint()?;
                }
                1 => {
                    self.take(8)?;
                }
                2 => {
                    let len = usize::try_from(self.varint()?).map_err(|_| UNEXPECTED_EOF)?;
                    self.take(len)?;
                }
                3 => depth += 1,
                4 => depth -= 1,
                5 => {
                    self.take(4)?;
                }
                other => return Err(format!("proto: illegal wireType {other}")),
            }
        }
        Ok(())
    }

    /// The raw fields of a small helper message (`Timestamp`, `IntOrString`, map entries).
    fn all(mut self) -> Result<Vec<(u64, Wire<'a>)>> {
        let mut out = Vec::new();
        while let Some(f) = self.next()? {
            out.push(f);
        }
        Ok(out)
    }
}

/// The `runtime.Unknown` envelope: apiVersion, kind (of its `TypeMeta`, field 1) and the
/// object's bytes (field 2).
pub(super) fn envelope(buf: &[u8]) -> Result<(String, String, &[u8])> {
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    let mut r = Reader::new(buf, "Unknown");
    while let Some((tag, wire)) = r.next()? {
        match (tag, wire) {
            (1, Wire::Bytes(b)) => {
                for (tag, w) in Reader::new(b, "TypeMeta").all()? {
                    match (tag, w) {
                        (1, Wire::Bytes(v)) => api_version = String::from_utf8_lossy(v).into(),
                        (2, Wire::Bytes(v)) => kind = String::from_utf8_lossy(v).into(),
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = b,
            (1 | 2, w) => {
                let name = if tag == 1 { "TypeMeta" } else { "Raw" };
                return Err(format!(
                    "proto: wrong wireType = {} for field {name}",
                    w.wire_type()
                ));
            }
            _ => {}
        }
    }
    Ok((api_version, kind, raw))
}

/// Go's name of a field, for errors: its JSON name with a capital first letter.
fn go_name(json_name: &str) -> String {
    let mut c = json_name.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The wire type a field's type is written with.
fn wire_type_of(ty: Ty) -> u64 {
    match ty {
        Ty::Int32 | Ty::Int64 | Ty::Bool => 0,
        Ty::Double => 1,
        _ => 2,
    }
}

/// How deep messages may nest. Built-in kinds nest about 15 deep; only a CRD's recursive
/// `JSONSchemaProps` could go further, and the JSON it becomes must stay within what the rest
/// of the server walks recursively (JSON bodies are refused past 127 levels).
const MAX_DEPTH: usize = 60;

/// Decodes a message into the object's JSON fields.
pub(super) fn message(msg: &Message, buf: &[u8]) -> Result<Map<String, Value>> {
    nested(msg, buf, 0)
}

/// [`message`] at a nesting depth.
fn nested(msg: &Message, buf: &[u8], depth: usize) -> Result<Map<String, Value>> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "proto: {}: nested more than {MAX_DEPTH} messages deep",
            msg.name
        ));
    }
    let depth = depth + 1;
    let mut out = Map::new();
    let mut r = Reader::new(buf, msg.name);
    while let Some((tag, wire)) = r.next()? {
        // Unknown fields (newer than the tables) are skipped, as `skipGenerated` does.
        let Some(field) = msg.fields.iter().find(|f| f.tag == tag) else {
            continue;
        };
        let expected = wire_type_of(field.ty);
        let got = wire.wire_type();
        if got != expected {
            // A packed list of numbers: one length-delimited run of values.
            if let (true, Wire::Bytes(b)) = (field.has(REPEATED) && expected != 2, &wire) {
                let list = out.entry(field.name).or_insert_with(|| json!([]));
                let mut p = Reader::new(b, msg.name);
                while p.pos < b.len() {
                    let w = if expected == 1 {
                        Wire::Fixed64(u64::from_le_bytes(
                            p.take(8)?.try_into().map_err(|_| UNEXPECTED_EOF)?,
                        ))
                    } else {
                        Wire::Varint(p.varint()?)
                    };
                    if let (Some(a), Some(v)) = (list.as_array_mut(), scalar(field.ty, &w)) {
                        a.push(v);
                    }
                }
                continue;
            }
            return Err(format!(
                "proto: wrong wireType = {got} for field {}",
                go_name(field.name)
            ));
        }
        match field.ty {
            Ty::Map(value_ty) => {
                let Wire::Bytes(b) = wire else { continue };
                let (key, value) = map_entry(b, *value_ty, msg.name, depth)?;
                let entry = out.entry(field.name).or_insert_with(|| json!({}));
                if let (Some(m), Some(v)) = (entry.as_object_mut(), value) {
                    m.insert(key, v);
                }
            }
            Ty::Msg(inner) if field.has(INLINE) => {
                let Wire::Bytes(b) = wire else { continue };
                out.extend(nested(inner, b, depth)?);
            }
            ty => {
                let Some(v) = value(ty, &wire, depth)? else {
                    continue;
                };
                if field.has(REPEATED) {
                    let entry = out.entry(field.name).or_insert_with(|| json!([]));
                    if let Some(a) = entry.as_array_mut() {
                        a.push(v);
                    }
                } else if field.has(KEEP_ZERO) || !is_zero_scalar(ty, &v) {
                    out.insert(field.name.to_string(), v);
                }
            }
        }
    }
    Ok(out)
}

/// Whether a scalar is its type's zero value, which `omitempty` drops.
fn is_zero_scalar(ty: Ty, v: &Value) -> bool {
    match ty {
        Ty::Str | Ty::Bytes => v.as_str().is_some_and(str::is_empty),
        Ty::Int32 | Ty::Int64 => v.as_i64() == Some(0),
        Ty::Double => v.as_f64() == Some(0.0),
        Ty::Bool => v == &Value::Bool(false),
        _ => false,
    }
}

/// A number or boolean field's value.
fn scalar(ty: Ty, wire: &Wire<'_>) -> Option<Value> {
    Some(match (ty, wire) {
        // Go's generated code shifts the varint into an int32: the low 32 bits.
        (Ty::Int32, Wire::Varint(n)) => json!(*n as u32 as i32),
        (Ty::Int64, Wire::Varint(n)) => json!(*n as i64),
        (Ty::Bool, Wire::Varint(n)) => json!(*n != 0),
        (Ty::Double, Wire::Fixed64(n)) => json!(f64::from_bits(*n)),
        _ => return None,
    })
}

/// One value of a field; `None` for a value whose JSON is `null` (a zero time, empty raw JSON).
fn value(ty: Ty, wire: &Wire<'_>, depth: usize) -> Result<Option<Value>> {
    let b = match wire {
        Wire::Bytes(b) => *b,
        other => return Ok(scalar(ty, other)),
    };
    Ok(Some(match ty {
        // Go's generated code does not check UTF-8; its JSON encoder replaces bad bytes.
        Ty::Str => json!(String::from_utf8_lossy(b)),
        Ty::Bytes => json!(STANDARD.encode(b)),
        Ty::Msg(inner) => Value::Object(nested(inner, b, depth)?),
        Ty::Time => return time(b, false),
        Ty::MicroTime => return time(b, true),
        Ty::Quantity => json!(quantity(b)?),
        Ty::IntOrString => int_or_string(b)?,
        Ty::RawJson => return raw_json(b),
        Ty::Union(inner, union) => return Ok(pick(union, nested(inner, b, depth)?)),
        Ty::StringList => {
            let mut items = Vec::new();
            for (tag, w) in Reader::new(b, "ExtraValue").all()? {
                if let (1, Wire::Bytes(s)) = (tag, w) {
                    items.push(json!(String::from_utf8_lossy(s)));
                }
            }
            Value::Array(items)
        }
        Ty::Int32 | Ty::Int64 | Ty::Bool | Ty::Double | Ty::Map(_) => return Ok(None),
    }))
}

/// A map entry message `{1: key, 2: value}`; a missing value is the type's zero.
fn map_entry(b: &[u8], ty: Ty, name: &str, depth: usize) -> Result<(String, Option<Value>)> {
    let mut key = String::new();
    let mut value = None;
    for (tag, w) in Reader::new(b, name).all()? {
        match (tag, w) {
            (1, Wire::Bytes(k)) => key = String::from_utf8_lossy(k).into_owned(),
            (2, w) => value = self::value(ty, &w, depth)?,
            _ => {}
        }
    }
    let value = match value {
        Some(v) => Some(v),
        None => match ty {
            Ty::Str | Ty::Bytes => Some(json!("")),
            Ty::Int32 | Ty::Int64 => Some(json!(0)),
            Ty::Bool => Some(json!(false)),
            other => self::value(other, &Wire::Bytes(&[]), depth)?,
        },
    };
    Ok((key, value))
}

/// `metav1.Time` / `metav1.MicroTime` from a `Timestamp {1: seconds, 2: nanos}`. Empty bytes
/// are the zero time, JSON `null`. `Time` keeps whole seconds (`time_proto.go` drops the
/// nanoseconds); `MicroTime` keeps microseconds.
fn time(b: &[u8], micro: bool) -> Result<Option<Value>> {
    if b.is_empty() {
        return Ok(None);
    }
    let (mut seconds, mut nanos) = (0i64, 0i32);
    for (tag, w) in Reader::new(b, "Timestamp").all()? {
        match (tag, w) {
            (1, Wire::Varint(v)) => seconds = v as i64,
            (2, Wire::Varint(v)) => nanos = v as u32 as i32,
            _ => {}
        }
    }
    let t = jiff::Timestamp::from_second(seconds)
        .map_err(|_| "Time.MarshalJSON: year outside of range [0,9999]".to_string())?;
    let whole = crate::meta::format_time(t);
    if !micro {
        return Ok(Some(json!(whole)));
    }
    let micros = nanos.clamp(0, 999_999_999) / 1000;
    let stem = whole.trim_end_matches('Z');
    Ok(Some(json!(format!("{stem}.{micros:06}Z"))))
}

/// `resource.Quantity {1: string}`: the string (Go writes it canonical); the zero is `0`.
fn quantity(b: &[u8]) -> Result<String> {
    let mut s = String::new();
    for (tag, w) in Reader::new(b, "Quantity").all()? {
        if let (1, Wire::Bytes(v)) = (tag, w) {
            s = String::from_utf8_lossy(v).into_owned();
        }
    }
    if s.is_empty() {
        s = "0".into();
    }
    Ok(s)
}

/// `intstr.IntOrString {1: type, 2: intVal, 3: strVal}`: type 0 is the number.
fn int_or_string(b: &[u8]) -> Result<Value> {
    let (mut ty, mut int, mut s) = (0u64, 0i32, String::new());
    for (tag, w) in Reader::new(b, "IntOrString").all()? {
        match (tag, w) {
            (1, Wire::Varint(v)) => ty = v,
            (2, Wire::Varint(v)) => int = v as u32 as i32,
            (3, Wire::Bytes(v)) => s = String::from_utf8_lossy(v).into_owned(),
            _ => {}
        }
    }
    Ok(if ty == 0 { json!(int) } else { json!(s) })
}

/// `{1: raw}` holding JSON text (`RawExtension`, `FieldsV1`, `apiextensions.JSON`); empty is
/// `null`.
fn raw_json(b: &[u8]) -> Result<Option<Value>> {
    let mut raw: &[u8] = &[];
    for (tag, w) in Reader::new(b, "RawExtension").all()? {
        if let (1, Wire::Bytes(v)) = (tag, w) {
            raw = v;
        }
    }
    if raw.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(raw)
        .map(Some)
        .map_err(|e| format!("json: error calling MarshalJSON: {e}"))
}

/// The JSON of an apiextensions union, from its decoded message.
fn pick(union: Union, mut m: Map<String, Value>) -> Option<Value> {
    let nonempty = |v: &Option<Value>| {
        v.as_ref()
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
    };
    match union {
        Union::Array => {
            let list = m.remove("jSONSchemas");
            if nonempty(&list) {
                list
            } else {
                m.remove("schema")
            }
        }
        Union::Bool => m
            .remove("schema")
            .or_else(|| Some(m.remove("allows").unwrap_or(json!(false)))),
        Union::StringArray => {
            let list = m.remove("property");
            if nonempty(&list) {
                list
            } else {
                m.remove("schema")
            }
        }
    }
}
