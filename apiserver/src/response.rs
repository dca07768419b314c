//! Writing answers: an object or a `Status` as a JSON response with its content type, encoded
//! as kube-apiserver encodes it ([`crate::wire`]).
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/writers.go`
//! (`WriteObjectNegotiated`, `WriteRawJSON`). Every handler answers through it; it imports no
//! handler.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// A JSON response.
pub fn json_response(code: StatusCode, body: &Value) -> Response {
    json_response_as(code, body, "application/json")
}

/// A JSON response whose body is already encoded.
pub fn json_bytes_response(code: StatusCode, bytes: Vec<u8>) -> Response {
    bytes_response(code, bytes, "application/json")
}

fn bytes_response(code: StatusCode, bytes: Vec<u8>, content_type: &'static str) -> Response {
    let mut resp = (code, bytes).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// A JSON response with a specific content type, written as kube-apiserver writes it
/// ([`crate::wire`]).
pub fn json_response_as(code: StatusCode, body: &Value, content_type: &'static str) -> Response {
    // Most answers are one object of a few hundred bytes to a few KiB: starting at 1 KiB
    // saves the buffer's first reallocations.
    let mut bytes = Vec::with_capacity(1024);
    if crate::wire::write_document(&mut bytes, body).is_err() {
        bytes.clear();
    }
    bytes_response(code, bytes, content_type)
}
