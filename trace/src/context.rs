//! W3C Trace Context: the ids of a trace and a span, and the `traceparent` header that carries
//! them from one process to the next.
//!
//! Mirrors the W3C recommendation "Trace Context" (<https://www.w3.org/TR/trace-context/>,
//! section 3.2 `traceparent`) as OpenTelemetry's propagators implement it
//! (`go.opentelemetry.io/otel/propagation/trace_context.go`), which is what kube-apiserver's
//! own tracing (`staging/src/k8s.io/component-base/tracing/`) uses.
//!
//! ```text
//!   traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
//!                ── ──────────────────────────────── ──────────────── ──
//!                version        trace-id              parent-id     flags (01 = sampled)
//! ```
//!
//! * Lowercase hex only; an all-zero trace-id or parent-id is invalid; version `ff` is
//!   invalid.
//! * A version above `00` is parsed as `00` if the first four fields look like it; anything it
//!   adds after a `-` is ignored (the forward-compatibility rule of section 3.2.4).
//!
//! A [`SpanContext`] is the "where am I" of a trace: continuing it with
//! [`SpanContext::child`] keeps the trace-id and makes a new span-id, so the receiver's span
//! becomes a child of the sender's.

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The HTTP header that carries the trace context.
pub const TRACEPARENT_HEADER: &str = "traceparent";

/// Why a `traceparent` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Too short, or a version-00 value with extra characters.
    #[error("traceparent must be 55 characters (version-traceid-parentid-flags), got {0}")]
    Length(usize),
    /// A field is not separated by `-` where the format puts one.
    #[error("traceparent fields must be separated by '-'")]
    Separator,
    /// A field holds something other than lowercase hex digits.
    #[error("traceparent {field} is not lowercase hex: {value:?}")]
    Hex {
        /// Which field.
        field: &'static str,
        /// What it held.
        value: String,
    },
    /// Version `ff` is reserved as invalid.
    #[error("traceparent version ff is invalid")]
    Version,
    /// The trace-id is all zeros.
    #[error("traceparent trace-id is all zeros")]
    ZeroTraceId,
    /// The parent-id is all zeros.
    #[error("traceparent parent-id is all zeros")]
    ZeroSpanId,
}

fn parse_hex<const N: usize>(field: &'static str, s: &str) -> Result<[u8; N], ParseError> {
    let bad = || ParseError::Hex {
        field,
        value: s.to_owned(),
    };
    if s.len() != N * 2 {
        return Err(bad());
    }
    let mut out = [0u8; N];
    for (i, chunk) in s.as_bytes().chunks(2).enumerate() {
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        out[i] = (digit(chunk[0]).ok_or_else(bad)? << 4) | digit(chunk[1]).ok_or_else(bad)?;
    }
    Ok(out)
}

/// Writes `bytes` (at most 16) as lowercase hex into `buf` and returns the digits. Ids are
/// written for every span exported and every traceparent sent: a table lookup per nibble, not
/// a formatting call per byte.
fn hex<'a>(buf: &'a mut [u8; 32], bytes: &[u8]) -> &'a str {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let digits = &mut buf[..bytes.len() * 2];
    for (pair, b) in digits.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 0xf)];
    }
    // Only ASCII digits were written.
    std::str::from_utf8(digits).unwrap_or_default()
}

macro_rules! hex_id {
    ($name:ident, $len:literal, $field:literal, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub [u8; $len]);

        impl $name {
            /// A random, non-zero id.
            pub fn random() -> Self {
                let mut rng = rand::rng();
                loop {
                    let bytes: [u8; $len] = rng.random();
                    if bytes != [0; $len] {
                        return $name(bytes);
                    }
                }
            }

            /// True for the invalid all-zero id.
            pub fn is_zero(&self) -> bool {
                self.0 == [0; $len]
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(hex(&mut [0; 32], &self.0))
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({self})", stringify!($name))
            }
        }

        impl FromStr for $name {
            type Err = ParseError;
            fn from_str(s: &str) -> Result<Self, ParseError> {
                parse_hex::<$len>($field, s).map($name)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(hex(&mut [0; 32], &self.0))
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                /// Parses the hex string where it lies, without copying it to a `String`.
                struct Hex;
                impl serde::de::Visitor<'_> for Hex {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        write!(f, "{} lowercase hex digits", $len * 2)
                    }
                    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<$name, E> {
                        s.parse().map_err(E::custom)
                    }
                }
                d.deserialize_str(Hex)
            }
        }
    };
}

hex_id!(
    TraceId,
    16,
    "trace-id",
    "A trace's id: 16 bytes, written as 32 lowercase hex digits."
);
hex_id!(
    SpanId,
    8,
    "parent-id",
    "A span's id: 8 bytes, written as 16 lowercase hex digits."
);

/// Where a trace is: its id, the current span and whether it is sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanContext {
    /// The trace every span of one causal chain shares.
    pub trace_id: TraceId,
    /// The span a child continues from (the `parent-id` of `traceparent`).
    pub span_id: SpanId,
    /// The `sampled` flag. miniplane records every trace; the flag is kept and passed on.
    pub sampled: bool,
}

impl SpanContext {
    /// The context of a new trace's first span.
    pub fn new_root() -> Self {
        SpanContext {
            trace_id: TraceId::random(),
            span_id: SpanId::random(),
            sampled: true,
        }
    }

    /// The context of a new span that continues this one (same trace, new span id).
    pub fn child(&self) -> Self {
        SpanContext {
            span_id: SpanId::random(),
            ..*self
        }
    }

    /// The `traceparent` value naming this span as the parent.
    pub fn traceparent(&self) -> String {
        self.to_string()
    }

    /// Parses a `traceparent` value (surrounding whitespace allowed, as in an HTTP header).
    pub fn parse(value: &str) -> Result<Self, ParseError> {
        value.trim().parse()
    }
}

impl fmt::Display for SpanContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flags = u8::from(self.sampled);
        write!(f, "00-{}-{}-{flags:02x}", self.trace_id, self.span_id)
    }
}

impl FromStr for SpanContext {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, ParseError> {
        const LEN: usize = 55;
        if s.len() < LEN || !s.is_char_boundary(LEN) {
            return Err(ParseError::Length(s.len()));
        }
        let version = parse_hex::<1>("version", s.get(0..2).unwrap_or_default())?[0];
        if version == 0xff {
            return Err(ParseError::Version);
        }
        // Version 00 is exactly 55 characters; a later version may append "-<more>".
        if s.len() > LEN && (version == 0 || s.as_bytes()[LEN] != b'-') {
            return Err(ParseError::Length(s.len()));
        }
        let bytes = s.as_bytes();
        if bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
            return Err(ParseError::Separator);
        }
        let trace_id = s.get(3..35).unwrap_or_default().parse::<TraceId>()?;
        let span_id = s.get(36..52).unwrap_or_default().parse::<SpanId>()?;
        let flags = parse_hex::<1>("trace-flags", s.get(53..55).unwrap_or_default())?[0];
        if trace_id.is_zero() {
            return Err(ParseError::ZeroTraceId);
        }
        if span_id.is_zero() {
            return Err(ParseError::ZeroSpanId);
        }
        Ok(SpanContext {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }
}

impl Serialize for SpanContext {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SpanContext {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        SpanContext::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn parses_and_formats_the_w3c_example() {
        let ctx = SpanContext::parse(EXAMPLE).unwrap();
        assert_eq!(ctx.trace_id.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(ctx.span_id.to_string(), "00f067aa0ba902b7");
        assert!(ctx.sampled);
        assert_eq!(ctx.traceparent(), EXAMPLE);
        let unsampled = SpanContext::parse(&EXAMPLE.replace("-01", "-00")).unwrap();
        assert!(!unsampled.sampled);
        assert_eq!(
            SpanContext::parse(&format!("  {EXAMPLE} ")).unwrap(),
            ctx,
            "header whitespace is not part of the value"
        );
    }

    #[test]
    fn refuses_what_the_spec_refuses() {
        let cases = [
            ("", ParseError::Length(0)),
            (&EXAMPLE[..54], ParseError::Length(54)),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                ParseError::ZeroTraceId,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                ParseError::ZeroSpanId,
            ),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                ParseError::Version,
            ),
            (
                "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                ParseError::Separator,
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(SpanContext::parse(value), Err(expected), "{value:?}");
        }
        // Uppercase hex is not allowed (HEXDIGLC).
        assert!(matches!(
            SpanContext::parse(&EXAMPLE.to_uppercase()),
            Err(ParseError::Hex { .. })
        ));
        // Version 00 may not carry extra fields.
        assert_eq!(
            SpanContext::parse(&format!("{EXAMPLE}-extra")),
            Err(ParseError::Length(61))
        );
        // Multi-byte characters never panic the slicing.
        assert!(SpanContext::parse(&"é".repeat(40)).is_err());
    }

    #[test]
    fn later_versions_are_read_as_version_00() {
        let future = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-adds";
        let ctx = SpanContext::parse(future).unwrap();
        assert_eq!(ctx.traceparent(), EXAMPLE);
        assert!(SpanContext::parse(&format!("cc{}x", &EXAMPLE[2..])).is_err());
    }

    #[test]
    fn a_child_continues_the_trace_with_a_new_span() {
        let root = SpanContext::new_root();
        let child = root.child();
        assert_eq!(child.trace_id, root.trace_id);
        assert_ne!(child.span_id, root.span_id);
        assert!(!root.trace_id.is_zero() && !child.span_id.is_zero());
        let parsed: SpanContext = child.traceparent().parse().unwrap();
        assert_eq!(parsed, child);
    }

    #[test]
    fn ids_serialize_as_hex_strings() {
        let ctx = SpanContext::parse(EXAMPLE).unwrap();
        let json = serde_json::to_string(&(ctx.trace_id, ctx.span_id, ctx)).unwrap();
        assert_eq!(
            json,
            format!("[\"4bf92f3577b34da6a3ce929d0e0e4736\",\"00f067aa0ba902b7\",\"{EXAMPLE}\"]")
        );
        let back: (TraceId, SpanId, SpanContext) = serde_json::from_str(&json).unwrap();
        assert_eq!(back.2, ctx);
        assert!(serde_json::from_str::<SpanId>("\"xyz\"").is_err());
    }

    #[test]
    fn every_byte_is_written_as_two_lowercase_digits_and_read_back() {
        for seed in 0u8..=255 {
            let bytes: [u8; 16] =
                std::array::from_fn(|i| seed.wrapping_mul(31).wrapping_add(i as u8 * 17));
            let id = TraceId(bytes);
            let expected: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(id.to_string(), expected);
            assert_eq!(
                serde_json::to_string(&id).unwrap(),
                format!("\"{expected}\"")
            );
            let back: TraceId = serde_json::from_str(&format!("\"{expected}\"")).unwrap();
            assert_eq!(back, id);
            // From a reader (no borrowed string) as well as from a slice.
            let read: TraceId =
                serde_json::from_reader(format!("\"{expected}\"").as_bytes()).unwrap();
            assert_eq!(read, id);
        }
        for bad in ["\"00F067AA0BA902B7\"", "\"00f067aa0ba902b\"", "7", "null"] {
            assert!(serde_json::from_str::<SpanId>(bad).is_err(), "{bad}");
        }
    }
}
