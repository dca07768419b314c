//! The API server's one error type, rendered as a Kubernetes `Status` object.
//!
//! Mirrors apimachinery's `pkg/api/errors/errors.go` (the `NewNotFound`, `NewConflict`,
//! `NewInvalid`... constructors and their wording) and the way
//! `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/status.go` turns an error
//! into an HTTP response. Every handler returns `Result<Response, ApiError>`; the one
//! [`IntoResponse`] impl below is the only place a `Status` body is written.
//!
//! ```text
//! ApiError::NotFound { resource: "deployments.apps", name: "nginx" }
//!   → 404 {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
//!          "message":"deployments.apps \"nginx\" not found","reason":"NotFound",
//!          "details":{"name":"nginx","group":"apps","kind":"deployments"},"code":404}\n
//! ```
//!
//! The body is the bytes kube-apiserver sends: `metav1.Status`' field order (not key order),
//! Go's HTML-safe escapes and `json.Encoder`'s trailing newline ([`crate::wire`]).

use crate::patch::ApplyConflict;
use crate::strategy::FieldError;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

/// The resource an error is about, as Kubernetes names it in messages and `details`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorTarget {
    /// API group, empty for core.
    pub group: String,
    /// Plural resource (`deployments`), used for NotFound/AlreadyExists/Conflict.
    pub resource: String,
    /// Kind (`Deployment`), used for Invalid.
    pub kind: String,
    /// Object name (may be empty, e.g. a create without a name).
    pub name: String,
}

impl ErrorTarget {
    /// `deployments.apps` or `pods`.
    pub fn group_resource(&self) -> String {
        qualified(&self.resource, &self.group)
    }

    /// `Deployment.apps` or `Pod`.
    pub fn group_kind(&self) -> String {
        qualified(&self.kind, &self.group)
    }
}

fn qualified(name: &str, group: &str) -> String {
    if group.is_empty() {
        name.to_string()
    } else {
        format!("{name}.{group}")
    }
}

/// Everything a request can fail with. Each variant maps to one HTTP code and `Status.reason`.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 404: the named object does not exist.
    #[error("{} \"{}\" not found", target.group_resource(), target.name)]
    NotFound {
        /// What was looked for.
        target: ErrorTarget,
    },
    /// 404: no route (unknown group, version, resource or path).
    #[error("the server could not find the requested resource")]
    PathNotFound,
    /// 409: create of a name that exists.
    #[error("{} \"{}\" already exists", target.group_resource(), target.name)]
    AlreadyExists {
        /// What already exists.
        target: ErrorTarget,
    },
    /// 409: optimistic-concurrency or precondition failure.
    #[error("Operation cannot be fulfilled on {} \"{}\": {detail}", target.group_resource(), target.name)]
    Conflict {
        /// The object.
        target: ErrorTarget,
        /// Why, e.g. "the object has been modified; ...".
        detail: String,
    },
    /// 409: server-side apply conflicts with other field managers.
    #[error("{}", crate::patch::conflict_message(conflicts))]
    ApplyConflicts {
        /// The conflicting fields.
        conflicts: Vec<ApplyConflict>,
    },
    /// 422: validation failed.
    #[error("{} \"{}\" is invalid: {}", target.group_kind(), target.name, render_field_errors(errors))]
    Invalid {
        /// The object.
        target: ErrorTarget,
        /// One entry per invalid field.
        errors: Vec<FieldError>,
    },
    /// 400: a malformed request.
    #[error("{0}")]
    BadRequest(String),
    /// 403: refused by policy (e.g. creating in a terminating namespace).
    #[error("{message}")]
    Forbidden {
        /// The object.
        target: ErrorTarget,
        /// Full message.
        message: String,
    },
    /// 401: the request's credentials were not accepted (`errors.NewUnauthorized`; why is
    /// logged, not sent).
    #[error("Unauthorized")]
    Unauthorized,
    /// 405: the verb is not served on this path.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 406: no acceptable representation.
    #[error("{0}")]
    NotAcceptable(String),
    /// 410 with reason `Expired`: a resourceVersion or continue token that is too old.
    #[error("{0}")]
    Expired(String),
    /// 413: request body too large.
    #[error("Request entity too large: limit is {limit}")]
    RequestEntityTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// 415: unsupported request content type.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 504: a resourceVersion from the future that did not arrive in time.
    #[error("Timeout: Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        /// The resourceVersion asked for.
        requested: u64,
        /// The store's current revision.
        current: u64,
    },
    /// 429 with reason `TooManyRequests`: try again later (`errors.NewTooManyRequests`), e.g.
    /// an eviction a PodDisruptionBudget does not allow now.
    #[error("{message}")]
    TooManyRequests {
        /// The message.
        message: String,
        /// `details.causes` as (reason, message), e.g. (`DisruptionBudget`, why).
        causes: Vec<(&'static str, String)>,
        /// `details.retryAfterSeconds` and the `Retry-After` header; 0: neither.
        retry_after_seconds: u32,
    },
    /// 500: a bug or a store failure. The detail is logged, never sent.
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// 500 with reason `InternalError` whose message is meant for the client: a range that
    /// ran out (`failed to allocate a nodePort: range is full`), which Kubernetes answers
    /// with `NewInternalError` and its cause.
    #[error("Internal error occurred: {0}")]
    Exhausted(String),
}

/// The result type of the API server.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

/// The errors as `ErrorList.ToAggregate().Error()` prints them: each distinct message once (a
/// repeated one is dropped, as when a strategy validates the same object twice), in brackets
/// when there is more than one. The `Status` causes keep every error.
fn render_field_errors(errors: &[FieldError]) -> String {
    let mut distinct: Vec<String> = Vec::with_capacity(errors.len());
    for message in errors.iter().map(ToString::to_string) {
        if !distinct.contains(&message) {
            distinct.push(message);
        }
    }
    match distinct.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// The message of a cause: a field error without its field path prefix.
fn cause_message(e: &FieldError) -> String {
    let full = e.to_string();
    full.strip_prefix(&format!("{}: ", e.field))
        .map(str::to_string)
        .unwrap_or(full)
}

impl From<store::Error> for ApiError {
    fn from(e: store::Error) -> Self {
        ApiError::Internal(e.to_string())
    }
}

impl ApiError {
    /// The HTTP status code.
    pub fn code(&self) -> StatusCode {
        match self {
            ApiError::NotFound { .. } | ApiError::PathNotFound => StatusCode::NOT_FOUND,
            ApiError::AlreadyExists { .. }
            | ApiError::Conflict { .. }
            | ApiError::ApplyConflicts { .. } => StatusCode::CONFLICT,
            ApiError::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Forbidden { .. } => StatusCode::FORBIDDEN,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            ApiError::Expired(_) => StatusCode::GONE,
            ApiError::RequestEntityTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::TooLargeResourceVersion { .. } => StatusCode::GATEWAY_TIMEOUT,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Internal(_) | ApiError::Exhausted(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// `Status.reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::NotFound { .. } | ApiError::PathNotFound => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } | ApiError::ApplyConflicts { .. } => "Conflict",
            ApiError::Invalid { .. } => "Invalid",
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::Forbidden { .. } => "Forbidden",
            ApiError::Unauthorized => "Unauthorized",
            ApiError::MethodNotAllowed(_) => "MethodNotAllowed",
            ApiError::NotAcceptable(_) => "NotAcceptable",
            ApiError::Expired(_) => "Expired",
            ApiError::RequestEntityTooLarge { .. } => "RequestEntityTooLarge",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::TooLargeResourceVersion { .. } => "Timeout",
            ApiError::TooManyRequests { .. } => "TooManyRequests",
            ApiError::Internal(_) | ApiError::Exhausted(_) => "InternalError",
        }
    }

    /// `Status.details`, if this error has any, in `metav1.StatusDetails`' field order.
    fn details(&self) -> Option<Details<'_>> {
        let of_target = |t: &'_ ErrorTarget, kind: &str| Details {
            name: t.name.clone(),
            group: t.group.clone(),
            kind: kind.to_string(),
            ..Details::default()
        };
        match self {
            ApiError::NotFound { target }
            | ApiError::AlreadyExists { target }
            | ApiError::Conflict { target, .. }
            | ApiError::Forbidden { target, .. } => Some(of_target(target, &target.resource)),
            // `NewNotFound(schema.GroupResource{}, "")` of the not-found handler: empty, not absent.
            ApiError::PathNotFound => Some(Details::default()),
            ApiError::Invalid { target, errors } => Some(Details {
                causes: errors
                    .iter()
                    .map(|e| Cause {
                        reason: e.kind.reason(),
                        message: cause_message(e),
                        field: e.field.clone(),
                    })
                    .collect(),
                ..of_target(target, &target.kind)
            }),
            ApiError::ApplyConflicts { conflicts } => Some(Details {
                causes: conflicts
                    .iter()
                    .map(|c| Cause {
                        reason: "FieldManagerConflict",
                        message: c.cause_message(),
                        field: c.field.clone(),
                    })
                    .collect(),
                ..Details::default()
            }),
            ApiError::Exhausted(cause) => Some(Details {
                causes: vec![Cause {
                    reason: "",
                    message: cause.clone(),
                    field: String::new(),
                }],
                ..Details::default()
            }),
            ApiError::TooManyRequests {
                causes,
                retry_after_seconds,
                ..
            } => Some(Details {
                causes: causes
                    .iter()
                    .map(|(reason, message)| Cause {
                        reason,
                        message: message.clone(),
                        field: String::new(),
                    })
                    .collect(),
                retry_after_seconds: (*retry_after_seconds > 0).then_some(*retry_after_seconds),
                ..Details::default()
            }),
            ApiError::TooLargeResourceVersion { .. } => Some(Details {
                causes: vec![Cause {
                    reason: "ResourceVersionTooLarge",
                    message: "Too large resource version".into(),
                    field: String::new(),
                }],
                retry_after_seconds: Some(1),
                ..Details::default()
            }),
            _ => None,
        }
    }

    /// The `Status` object for this error, in `metav1.Status`' field order.
    fn status(&self) -> Status<'_> {
        let message = match self {
            // Internal details stay in the log.
            ApiError::Internal(_) => {
                "Internal error occurred: an internal error occurred, see the server log"
                    .to_string()
            }
            other => other.to_string(),
        };
        Status {
            kind: "Status",
            api_version: "v1",
            metadata: EmptyMeta {},
            status: "Failure",
            message,
            reason: self.reason(),
            details: self.details(),
            code: self.code().as_u16(),
        }
    }

    /// The `Status` object for this error as a JSON value (for tests and for embedding).
    pub fn to_status(&self) -> Value {
        serde_json::to_value(self.status()).unwrap_or(Value::Null)
    }

    /// The `Status` as kube-apiserver writes it: its field order, Go's HTML-safe escapes and a
    /// trailing newline (`json.Encoder`), byte for byte.
    pub fn to_status_bytes(&self) -> Vec<u8> {
        let mut bytes = self.status_json();
        bytes.push(b'\n');
        bytes
    }

    /// The `Status` in kube-apiserver's bytes without the trailing newline (for a watch
    /// `ERROR` event, whose line embeds it).
    pub fn status_json(&self) -> Vec<u8> {
        crate::wire::html_escaped(serde_json::to_vec(&self.status()).unwrap_or_default())
    }
}

/// `metav1.Status` (field order as in `types.go`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Status<'a> {
    kind: &'static str,
    api_version: &'static str,
    metadata: EmptyMeta,
    status: &'static str,
    message: String,
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<Details<'a>>,
    code: u16,
}

/// The empty `metav1.ListMeta` of an error `Status`.
#[derive(Serialize)]
struct EmptyMeta {}

/// `metav1.StatusDetails`: `name`, `group`, `kind`, `causes`, `retryAfterSeconds`, each left
/// out when empty.
#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct Details<'a> {
    #[serde(skip_serializing_if = "String::is_empty")]
    name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    kind: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    causes: Vec<Cause<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_seconds: Option<u32>,
}

/// `metav1.StatusCause`: `reason`, `message`, `field` (left out when empty).
#[derive(Serialize)]
struct Cause<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'a str,
    message: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    field: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(detail) = &self {
            tracing::error!(%detail, "internal error");
        }
        let body = self.to_status_bytes();
        let mut resp = (self.code(), body).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let ApiError::TooManyRequests {
            retry_after_seconds,
            ..
        } = &self
            && *retry_after_seconds > 0
        {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_seconds));
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::FieldErrorKind;

    fn deploy(name: &str) -> ErrorTarget {
        ErrorTarget {
            group: "apps".into(),
            resource: "deployments".into(),
            kind: "Deployment".into(),
            name: name.into(),
        }
    }

    #[test]
    fn not_found_is_worded_like_kubernetes() {
        let s = ApiError::NotFound {
            target: deploy("nginx"),
        }
        .to_status();
        assert_eq!(s["message"], "deployments.apps \"nginx\" not found");
        assert_eq!(s["details"]["kind"], "deployments");
        assert_eq!(s["code"], 404);
    }

    #[test]
    fn invalid_lists_several_errors_in_brackets() {
        let e = |field: &str| FieldError {
            kind: FieldErrorKind::Invalid,
            field: field.into(),
            value: Some("-1".into()),
            detail: "must be greater than or equal to 0".into(),
        };
        let one = ApiError::Invalid {
            target: deploy("nginx"),
            errors: vec![e("spec.replicas")],
        }
        .to_status();
        assert_eq!(
            one["message"],
            "Deployment.apps \"nginx\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
        );
        assert_eq!(
            one["details"]["causes"][0]["message"],
            "Invalid value: -1: must be greater than or equal to 0"
        );
        let two = ApiError::Invalid {
            target: deploy("nginx"),
            errors: vec![e("a"), e("b")],
        }
        .to_status();
        let msg = two["message"].as_str().unwrap_or_default();
        assert!(msg.contains(": [a: Invalid value"), "{msg}");
        assert_eq!(two["details"]["causes"].as_array().map(Vec::len), Some(2));
        // A repeated error (RBAC updates validate the object twice) is printed once, as
        // `ToAggregate` prints it, and kept in the causes.
        let repeated = ApiError::Invalid {
            target: deploy("nginx"),
            errors: vec![e("a"), e("a")],
        }
        .to_status();
        assert_eq!(
            repeated["message"],
            "Deployment.apps \"nginx\" is invalid: a: Invalid value: -1: must be greater than or equal to 0"
        );
        assert_eq!(
            repeated["details"]["causes"].as_array().map(Vec::len),
            Some(2)
        );
        let three = ApiError::Invalid {
            target: deploy("nginx"),
            errors: vec![e("a"), e("b"), e("a")],
        }
        .to_status();
        let msg = three["message"].as_str().unwrap_or_default();
        assert!(
            msg.ends_with(": [a: Invalid value: -1: must be greater than or equal to 0, b: Invalid value: -1: must be greater than or equal to 0]"),
            "{msg}"
        );
    }

    #[test]
    fn status_bytes_are_kube_apiservers() {
        let exists = ApiError::AlreadyExists {
            target: ErrorTarget {
                group: String::new(),
                resource: "configmaps".into(),
                kind: "ConfigMap".into(),
                name: "cm1".into(),
            },
        };
        assert_eq!(
            String::from_utf8(exists.to_status_bytes()).unwrap_or_default(),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"configmaps \\\"cm1\\\" already exists\",\"reason\":\"AlreadyExists\",\"details\":{\"name\":\"cm1\",\"kind\":\"configmaps\"},\"code\":409}\n"
        );
        let invalid = ApiError::Invalid {
            target: deploy("a<b"),
            errors: vec![FieldError {
                kind: FieldErrorKind::Required,
                field: "spec.selector".into(),
                value: None,
                detail: String::new(),
            }],
        };
        assert_eq!(
            String::from_utf8(invalid.to_status_bytes()).unwrap_or_default(),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"Deployment.apps \\\"a\\u003cb\\\" is invalid: spec.selector: Required value\",\"reason\":\"Invalid\",\"details\":{\"name\":\"a\\u003cb\",\"group\":\"apps\",\"kind\":\"Deployment\",\"causes\":[{\"reason\":\"FieldValueRequired\",\"message\":\"Required value\",\"field\":\"spec.selector\"}]},\"code\":422}\n"
        );
        assert_eq!(
            String::from_utf8(ApiError::PathNotFound.to_status_bytes()).unwrap_or_default(),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"the server could not find the requested resource\",\"reason\":\"NotFound\",\"details\":{},\"code\":404}\n"
        );
        let bad = ApiError::BadRequest("x".into());
        assert!(
            String::from_utf8(bad.to_status_bytes())
                .unwrap_or_default()
                .ends_with("\"message\":\"x\",\"reason\":\"BadRequest\",\"code\":400}\n")
        );
    }

    #[test]
    fn internal_details_are_not_sent() {
        let s = ApiError::Internal("disk on fire".into()).to_status();
        assert!(!s["message"].as_str().unwrap_or_default().contains("fire"));
        assert_eq!(s["code"], 500);
    }

    /// `errors.NewInternalError(fmt.Errorf("failed to allocate a nodePort: range is full"))`.
    #[test]
    fn an_exhausted_range_is_an_internal_error_that_says_so() {
        let s =
            ApiError::Exhausted("failed to allocate a nodePort: range is full".into()).to_status();
        assert_eq!(
            s,
            serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Internal error occurred: failed to allocate a nodePort: range is full",
                "reason": "InternalError",
                "details": {"causes": [{"message": "failed to allocate a nodePort: range is full"}]},
                "code": 500
            })
        );
    }
}
