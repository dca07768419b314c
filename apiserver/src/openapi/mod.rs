//! OpenAPI v3 documents generated from the resource registry (kube-apiserver's
//! `/openapi/v3` handler, `k8s.io/kube-openapi/pkg/handler3`). Schemas of the
//! built-in kinds come from `k8s-openapi`'s `schemars` support; the Kubernetes extensions
//! kubectl relies on (`x-kubernetes-group-version-kind`, patch merge keys) are added here.
//!
//! ```text
//! GET /openapi/v3                      ──► index(&[(gv, document(gv, kinds)), ..])
//! GET /openapi/v3/apis/apps/v1?hash=.. ──► document(apps/v1, [Deployment, ReplicaSet, ..])
//! ```
//!
//! [`builtin`] generates and annotates the schemas once per process; [`mod@document`] picks the
//! ones a group/version needs and writes its `paths`. `OpenApiKind::subresources` other than
//! `status`, `scale` and `binding` are served but not described.

use crate::gvk::{GroupVersion, GroupVersionKind};
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub mod builtin;
pub mod document;
pub mod v2;

/// One kind served in a group/version, as the OpenAPI generator needs it.
#[derive(Debug, Clone)]
pub struct OpenApiKind {
    /// The kind.
    pub gvk: GroupVersionKind,
    /// Its plural resource name.
    pub plural: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Subresources served, e.g. `status`, `scale` (only `status`, `scale` and `binding`
    /// get operations in the document).
    pub subresources: Vec<String>,
    /// The OpenAPI v3 schema of a custom resource; `None` for built-in kinds, whose schema
    /// comes from `k8s-openapi`.
    pub schema: Option<Value>,
}

/// The `/openapi/v3` index: one entry per group/version, `api/v1` or `apis/apps/v1`, each
/// with a `serverRelativeURL` that carries a content hash.
///
/// ```text
/// {"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=9A3C0F6E1D2B4C57"},
///            "apis/apps/v1": {"serverRelativeURL": "/openapi/v3/apis/apps/v1?hash=..."}}}
/// ```
///
/// kubectl fetches exactly the `serverRelativeURL`; the hash changes whenever the document does,
/// so the document under a hashed URL can be cached as immutable.
pub fn index(docs: &[(GroupVersion, Value)]) -> Value {
    let paths: BTreeMap<String, Value> = docs
        .iter()
        .map(|(gv, doc)| {
            let key = index_key(gv);
            let url = format!("/openapi/v3/{key}?hash={}", content_hash(doc));
            (key, json!({ "serverRelativeURL": url }))
        })
        .collect();
    json!({ "paths": paths })
}

/// The index key and URL path (after `/openapi/v3/`) of a group/version: `api/v1`,
/// `apis/apps/v1`.
pub fn index_key(gv: &GroupVersion) -> String {
    gv.url_prefix().trim_start_matches('/').to_owned()
}

/// A content hash of a document: 16 upper-case hex digits of the 64-bit FNV-1a hash of its
/// JSON encoding (deterministic across runs and builds). Unlike Kubernetes, which uses
/// SHA-512, this is not collision-resistant, which a cache-busting key does not need.
pub fn content_hash(doc: &Value) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let bytes = serde_json::to_vec(doc).unwrap_or_default();
    let hash = bytes
        .iter()
        .fold(OFFSET, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME));
    format!("{hash:016X}")
}

/// The OpenAPI v3 document of one group/version.
///
/// `components.schemas` holds each kind's schema (k8s-openapi's for built-in kinds,
/// `OpenApiKind::schema` for custom resources), its `<Kind>List`, and every schema they
/// reference; `paths` holds the collection, item, all-namespaces and subresource (`status`,
/// `scale`, `binding`) operations. Deterministic: the same input gives the same bytes.
pub fn document(gv: &GroupVersion, kinds: &[OpenApiKind]) -> Value {
    document::build(gv, kinds)
}

#[cfg(test)]
mod tests;
