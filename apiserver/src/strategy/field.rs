//! Field paths and the constructors of [`FieldError`] (apimachinery's
//! `pkg/util/validation/field/{path.go,errors.go}`).
//!
//! Validation code builds a [`FieldPath`] as it descends (`spec` → `template` → `spec` →
//! `containers[0]` → `image`) and reports problems with the constructors below, which word the
//! error as Kubernetes does:
//!
//! ```text
//! FieldError::invalid(&spec.child("replicas"), -1, "must be greater than or equal to 0")
//!   => spec.replicas: Invalid value: -1: must be greater than or equal to 0
//! FieldError::required(&spec.child("selector"), "")
//!   => spec.selector: Required value
//! ```
//!
//! Kubernetes prints the offending value with Go's `%v`/`%q`/`%#v`; [`GoValue`] renders the
//! value types miniplane reports the same way (strings quoted, numbers bare, maps as
//! `map[string]string{"app":"nginx"}`).

use super::{FieldError, FieldErrorKind};
use apimachinery::fmt::go_quote;
use std::collections::BTreeMap;
use std::fmt;

/// A path to a field, printed as Kubernetes prints `field.Path`:
/// `spec.template.spec.containers[0].image`, `metadata.labels[app]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldPath(String);

impl FieldPath {
    /// A root path, e.g. `metadata` or `spec`.
    pub fn new(root: &str) -> Self {
        FieldPath(root.to_owned())
    }

    /// The path of a named child: `spec` → `spec.replicas`.
    pub fn child(&self, name: &str) -> Self {
        if self.0.is_empty() {
            FieldPath(name.to_owned())
        } else {
            FieldPath(format!("{}.{name}", self.0))
        }
    }

    /// The path of a list element: `containers` → `containers[0]`.
    pub fn index(&self, i: usize) -> Self {
        FieldPath(format!("{}[{i}]", self.0))
    }

    /// The path of a map entry: `labels` → `labels[app]` (unquoted, as Kubernetes prints it).
    pub fn key(&self, k: &str) -> Self {
        FieldPath(format!("{}[{k}]", self.0))
    }

    /// The path as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A value rendered as Go's `fmt` renders it in `field.Error` (`%q` for strings, `%v` for
/// numbers and booleans, `%#v` for maps and structs).
pub trait GoValue {
    /// The rendering.
    fn go(&self) -> String;
}

impl GoValue for str {
    fn go(&self) -> String {
        go_quote(self)
    }
}

impl GoValue for String {
    fn go(&self) -> String {
        go_quote(self)
    }
}

impl<T: GoValue + ?Sized> GoValue for &T {
    fn go(&self) -> String {
        (**self).go()
    }
}

macro_rules! go_display {
    ($($t:ty),*) => {$(
        impl GoValue for $t {
            fn go(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
go_display!(i32, i64, u32, u64, usize, bool);

impl GoValue for BTreeMap<String, String> {
    fn go(&self) -> String {
        let entries: Vec<String> = self
            .iter()
            .map(|(k, v)| format!("{}:{}", go_quote(k), go_quote(v)))
            .collect();
        format!("map[string]string{{{}}}", entries.join(", "))
    }
}

impl GoValue for Option<BTreeMap<String, String>> {
    fn go(&self) -> String {
        match self {
            Some(m) => m.go(),
            None => "map[string]string(nil)".to_owned(),
        }
    }
}

impl GoValue for Option<i32> {
    fn go(&self) -> String {
        self.map_or_else(|| "null".to_owned(), |v| v.to_string())
    }
}

impl GoValue for Option<i64> {
    fn go(&self) -> String {
        self.map_or_else(|| "null".to_owned(), |v| v.to_string())
    }
}

/// A value already rendered (for structs whose Go rendering is built by the caller).
#[derive(Debug, Clone)]
pub struct Rendered(pub String);

impl GoValue for Rendered {
    fn go(&self) -> String {
        self.0.clone()
    }
}

impl FieldError {
    fn new(kind: FieldErrorKind, path: &FieldPath, value: Option<String>, detail: &str) -> Self {
        FieldError {
            kind,
            field: path.as_str().to_owned(),
            value,
            detail: detail.to_owned(),
        }
    }

    /// `field.Required`: the value is missing (printed without the value).
    pub fn required(path: &FieldPath, detail: &str) -> Self {
        Self::new(FieldErrorKind::Required, path, None, detail)
    }

    /// `field.Invalid`: the value is malformed or out of range.
    pub fn invalid(path: &FieldPath, value: impl GoValue, detail: &str) -> Self {
        Self::new(FieldErrorKind::Invalid, path, Some(value.go()), detail)
    }

    /// `field.NotSupported`: the value is not one of `supported` (quoted, comma-separated).
    pub fn not_supported(path: &FieldPath, value: impl GoValue, supported: &[&str]) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(
            FieldErrorKind::NotSupported,
            path,
            Some(value.go()),
            &detail,
        )
    }

    /// `field.Forbidden`: the field may not be set or changed (printed without the value).
    pub fn forbidden(path: &FieldPath, detail: &str) -> Self {
        Self::new(FieldErrorKind::Forbidden, path, None, detail)
    }

    /// `field.Duplicate`: the value appears twice where it must be unique.
    pub fn duplicate(path: &FieldPath, value: impl GoValue) -> Self {
        Self::new(FieldErrorKind::Duplicate, path, Some(value.go()), "")
    }

    /// `field.NotFound`: the value refers to something that does not exist.
    pub fn not_found(path: &FieldPath, value: impl GoValue) -> Self {
        Self::new(FieldErrorKind::NotFound, path, Some(value.go()), "")
    }

    /// `field.TooLong`: the value exceeds `max_bytes` (printed without the value).
    pub fn too_long(path: &FieldPath, max_bytes: usize) -> Self {
        let unit = if max_bytes == 1 { "byte" } else { "bytes" };
        Self::new(
            FieldErrorKind::TooLong,
            path,
            None,
            &format!("may not be more than {max_bytes} {unit}"),
        )
    }

    /// `field.TooMany`: a list has more than `max` items.
    pub fn too_many(path: &FieldPath, actual: usize, max: usize) -> Self {
        Self::new(
            FieldErrorKind::TooMany,
            path,
            Some(actual.to_string()),
            &format!("must have at most {max} items"),
        )
    }
}

/// `ValidateNonnegativeField`: `value` must be `>= 0`.
pub fn validate_nonnegative(value: i64, path: &FieldPath) -> Vec<FieldError> {
    if value < 0 {
        vec![FieldError::invalid(
            path,
            value,
            "must be greater than or equal to 0",
        )]
    } else {
        Vec::new()
    }
}

/// `ValidateImmutableField`: `new` must equal `old`, else `Invalid value: <new>: field is
/// immutable`.
pub fn validate_immutable<T: PartialEq>(
    new: &T,
    old: &T,
    rendered_new: impl FnOnce() -> String,
    path: &FieldPath,
) -> Vec<FieldError> {
    if new == old {
        Vec::new()
    } else {
        vec![FieldError::invalid(
            path,
            Rendered(rendered_new()),
            FIELD_IMMUTABLE,
        )]
    }
}

/// apimachinery's `FieldImmutableErrorMsg`.
pub const FIELD_IMMUTABLE: &str = "field is immutable";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_print_as_kubernetes() {
        let p = FieldPath::new("spec")
            .child("template")
            .child("spec")
            .child("containers")
            .index(0)
            .child("image");
        assert_eq!(p.as_str(), "spec.template.spec.containers[0].image");
        assert_eq!(
            FieldPath::new("metadata")
                .child("labels")
                .key("app")
                .as_str(),
            "metadata.labels[app]"
        );
    }

    #[test]
    fn errors_render_like_field_error() {
        let spec = FieldPath::new("spec");
        assert_eq!(
            FieldError::invalid(
                &spec.child("replicas"),
                -1,
                "must be greater than or equal to 0"
            )
            .to_string(),
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0"
        );
        assert_eq!(
            FieldError::required(&spec.child("selector"), "").to_string(),
            "spec.selector: Required value"
        );
        assert_eq!(
            FieldError::not_supported(&spec.child("restartPolicy"), "OnFailure", &["Always"])
                .to_string(),
            "spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\""
        );
        assert_eq!(
            FieldError::duplicate(&spec.child("name"), "a").to_string(),
            "spec.name: Duplicate value: \"a\""
        );
        assert_eq!(
            FieldError::too_long(&FieldPath::new("metadata").child("annotations"), 262144)
                .to_string(),
            "metadata.annotations: Too long: may not be more than 262144 bytes"
        );
    }

    #[test]
    fn go_values() {
        let mut m = BTreeMap::new();
        m.insert("b".to_owned(), "2".to_owned());
        m.insert("a".to_owned(), "x\"y".to_owned());
        assert_eq!(m.go(), r#"map[string]string{"a":"x\"y", "b":"2"}"#);
        assert_eq!(
            None::<BTreeMap<String, String>>.go(),
            "map[string]string(nil)"
        );
        assert_eq!("a\nb".go(), r#""a\nb""#);
        assert_eq!(true.go(), "true");
    }
}
