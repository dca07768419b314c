//! `/openapi/v2`: an empty Swagger 2.0 document, served so that kubectl can finish its
//! client-side validation of a kind the server does not know.
//!
//! kubectl validates with OpenAPI v3 and falls back to v2 (client-go's
//! `DiscoveryClient.OpenAPISchema`, protobuf `openapi_v2.Document`) when a group/version is
//! missing from `/openapi/v3`; kubectl's v2 validator skips kinds it does not find, and then
//! kubectl reports the real problem, e.g. for the retired `apiextensions.k8s.io/v1beta1`:
//!
//! ```text
//! error: resource mapping not found for name: "..." namespace: "" from "crd.yaml":
//!   no matches for kind "CustomResourceDefinition" in version "apiextensions.k8s.io/v1beta1"
//! ```
//!
//! Unlike kube-apiserver, which serves every schema in v2 too, miniplane's v2 document has no
//! definitions: every kind it serves is described in v3, which clients prefer.

use serde_json::{Value, json};

/// The media type of the protobuf answer (client-go asks for `...spec.v2@v1.0+protobuf`).
pub const PROTOBUF_CONTENT_TYPE: &str =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

const TITLE: &str = "Kubernetes";
const VERSION: &str = "v1.33.0";

/// The document as JSON.
pub fn document_json() -> Value {
    json!({"swagger": "2.0", "info": {"title": TITLE, "version": VERSION}, "paths": {}})
}

fn field(out: &mut Vec<u8>, number: u8, bytes: &[u8]) {
    out.push((number << 3) | 2);
    // Every field here is shorter than 128 bytes: a one-byte varint length.
    out.push(bytes.len() as u8);
    out.extend_from_slice(bytes);
}

/// The document as an `openapi.v2.Document` protobuf message: `swagger` (field 1) and `info`
/// (field 2: `title` 1, `version` 2).
pub fn document_protobuf() -> Vec<u8> {
    let mut info = Vec::new();
    field(&mut info, 1, TITLE.as_bytes());
    field(&mut info, 2, VERSION.as_bytes());
    let mut doc = Vec::new();
    field(&mut doc, 1, b"2.0");
    field(&mut doc, 2, &info);
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_document_is_swagger_2() {
        let pb = document_protobuf();
        assert_eq!(&pb[..5], b"\x0a\x032.0");
        assert_eq!(pb[5], 0x12);
        assert_eq!(pb[6] as usize, pb.len() - 7);
        assert_eq!(document_json()["swagger"], "2.0");
    }
}
