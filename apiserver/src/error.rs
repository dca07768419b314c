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
//!          "details":{"name":"nginx","group":"apps","kind":"deployments"},"code":404}
//! ```

use crate::patch::ApplyConflict;
use crate::strategy::FieldError;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

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
    /// 500: a bug or a store failure. The detail is logged, never sent.
    #[error("Internal error occurred: {0}")]
    Internal(String),
}

/// The result type of the API server.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

fn render_field_errors(errors: &[FieldError]) -> String {
    match errors {
        [one] => one.to_string(),
        many => format!(
            "[{}]",
            many.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
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
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            ApiError::Expired(_) => StatusCode::GONE,
            ApiError::RequestEntityTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::TooLargeResourceVersion { .. } => StatusCode::GATEWAY_TIMEOUT,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
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
            ApiError::MethodNotAllowed(_) => "MethodNotAllowed",
            ApiError::NotAcceptable(_) => "NotAcceptable",
            ApiError::Expired(_) => "Expired",
            ApiError::RequestEntityTooLarge { .. } => "RequestEntityTooLarge",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::TooLargeResourceVersion { .. } => "Timeout",
            ApiError::Internal(_) => "InternalError",
        }
    }

    /// `Status.details`, if this error has any.
    fn details(&self) -> Option<Value> {
        let target_details = |t: &ErrorTarget, kind: &str| {
            let mut d = Map::new();
            if !t.name.is_empty() {
                d.insert("name".into(), json!(t.name));
            }
            if !t.group.is_empty() {
                d.insert("group".into(), json!(t.group));
            }
            d.insert("kind".into(), json!(kind));
            d
        };
        match self {
            ApiError::NotFound { target }
            | ApiError::AlreadyExists { target }
            | ApiError::Conflict { target, .. }
            | ApiError::Forbidden { target, .. } => {
                Some(Value::Object(target_details(target, &target.resource)))
            }
            ApiError::Invalid { target, errors } => {
                let mut d = target_details(target, &target.kind);
                let causes: Vec<Value> = errors
                    .iter()
                    .map(|e| {
                        json!({"reason": e.kind.reason(), "message": cause_message(e), "field": e.field})
                    })
                    .collect();
                d.insert("causes".into(), Value::Array(causes));
                Some(Value::Object(d))
            }
            ApiError::ApplyConflicts { conflicts } => {
                let causes: Vec<Value> = conflicts
                    .iter()
                    .map(|c| {
                        json!({
                            "reason": "FieldManagerConflict",
                            "message": c.cause_message(),
                            "field": c.field,
                        })
                    })
                    .collect();
                Some(json!({ "causes": causes }))
            }
            ApiError::TooLargeResourceVersion { .. } => Some(json!({
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1,
            })),
            _ => None,
        }
    }

    /// The `Status` object for this error (also used for in-stream watch `ERROR` events).
    pub fn to_status(&self) -> Value {
        let message = match self {
            // Internal details stay in the log.
            ApiError::Internal(_) => {
                "Internal error occurred: an internal error occurred, see the server log"
                    .to_string()
            }
            other => other.to_string(),
        };
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": self.reason(),
        });
        if let Some(details) = self.details() {
            status["details"] = details;
        }
        status["code"] = json!(self.code().as_u16());
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(detail) = &self {
            tracing::error!(%detail, "internal error");
        }
        let body = serde_json::to_vec(&self.to_status()).unwrap_or_default();
        let mut resp = (self.code(), body).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
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
    }

    #[test]
    fn internal_details_are_not_sent() {
        let s = ApiError::Internal("disk on fire".into()).to_status();
        assert!(!s["message"].as_str().unwrap_or_default().contains("fire"));
        assert_eq!(s["code"], 500);
    }
}
