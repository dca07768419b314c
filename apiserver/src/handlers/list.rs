//! LIST (`endpoints/handlers/get.go` `ListResource`, `registry/generic/registry/store.go`
//! `List`), with label/field selectors, `limit`/`continue` pagination and resourceVersion
//! semantics:
//!
//! ```text
//!   resourceVersion  resourceVersionMatch   served at
//!   "" / "0"         -                      the latest revision
//!   N                "" / NotOlderThan      the latest revision, once it is >= N (else 504 after 3 s)
//!   N                Exact                  revision N (410 Expired when compacted)
//!   continue token   -                      the token's revision, from the token's key
//! ```
//!
//! The continue token is opaque to clients: base64 of `{"v":"meta.k8s.io/v1","rv":N,"start":K}`
//! as in `storage/continue.go`.

use super::RequestContext;
use crate::error::{ApiError, ErrorTarget, Result};
use crate::meta;
use crate::registry::ResourceInfo;
use crate::response::json_bytes_response;
use crate::selector::FieldSelector;
use crate::storage::prefix;
use crate::strategy::{FieldError, FieldErrorKind};
use crate::table;
use apimachinery::Selector;
use axum::http::StatusCode;
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use store::Revision;

/// How long a list waits for a resourceVersion from the future (`blockTimeout` in the cacher).
const FUTURE_RV_WAIT: Duration = Duration::from_secs(3);

/// Label and field selectors of a list, watch or deletecollection.
#[derive(Debug, Clone)]
pub struct Filter {
    /// `?labelSelector=`
    pub labels: Selector,
    /// `?fieldSelector=`
    pub fields: FieldSelector,
}

impl Filter {
    /// Parses the selectors of a request (400 on a malformed or unsupported selector).
    pub fn from_request(ctx: &RequestContext, info: &ResourceInfo) -> Result<Filter> {
        let labels = Selector::parse(ctx.query.get("labelSelector").unwrap_or(""))
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let fields = FieldSelector::parse(ctx.query.get("fieldSelector").unwrap_or(""))
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        fields
            .check_supported(info.strategy.as_ref())
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        Ok(Filter { labels, fields })
    }

    /// Whether an object passes both selectors.
    pub fn matches(&self, info: &ResourceInfo, obj: &Value) -> bool {
        // Run for every event of every filtered watch: an empty label selector matches
        // without collecting the labels.
        (self.labels.is_everything() || self.labels.matches(&meta::labels(obj)))
            && self.fields.matches(obj, info.strategy.as_ref())
    }
}

fn encode_continue(rev: Revision, start: &[u8], prefix: &str) -> String {
    let start = String::from_utf8_lossy(start.strip_prefix(prefix.as_bytes()).unwrap_or(start));
    STANDARD.encode(json!({"v": "meta.k8s.io/v1", "rv": rev.0, "start": start}).to_string())
}

fn decode_continue(token: &str, prefix: &str) -> Result<(Revision, Bytes)> {
    let bad = || ApiError::BadRequest(format!("invalid continue token: {token:?}"));
    let raw = STANDARD.decode(token).map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let start = v.get("start").and_then(Value::as_str).ok_or_else(bad)?;
    if v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err(bad());
    }
    Ok((Revision(rv), Bytes::from(format!("{prefix}{start}"))))
}

/// Parses `?resourceVersion=` as a revision (400 when it is not a number).
pub fn parse_rv(v: Option<&str>) -> Result<Option<Revision>> {
    match v {
        None | Some("") => Ok(None),
        Some(s) => s
            .parse::<u64>()
            .map(|n| Some(Revision(n)))
            .map_err(|_| ApiError::BadRequest(format!("invalid resource version: {s:?}"))),
    }
}

/// Waits (briefly) until the store has reached `rv`; 504 Timeout with
/// `ResourceVersionTooLarge` when it does not.
pub async fn wait_for_revision(ctx: &RequestContext, rv: Revision) -> Result<()> {
    let backend = ctx.state.storage().backend().clone();
    let deadline = tokio::time::Instant::now() + FUTURE_RV_WAIT;
    while backend.current_revision() < rv {
        if tokio::time::Instant::now() >= deadline {
            return Err(ApiError::TooLargeResourceVersion {
                requested: rv.0,
                current: backend.current_revision().0,
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Answers a `<Kind>List` (or a Table) of the matching objects.
pub async fn list(ctx: RequestContext, info: Arc<ResourceInfo>) -> Result<Response> {
    let filter = Filter::from_request(&ctx, &info)?;
    let limit = ctx.query.int("limit")?.unwrap_or(0).max(0) as usize;
    let rv = parse_rv(ctx.query.get("resourceVersion"))?;
    let rv_match = ctx.query.non_empty("resourceVersionMatch");
    let pfx = prefix(&info, ctx.path.namespace.as_deref());
    if let (Some(_), Some(other)) = (rv, rv_match)
        && !matches!(other, "Exact" | "NotOlderThan")
    {
        return Err(unsupported_rv_match(other));
    }
    let (start, read_rev) = match ctx.query.non_empty("continue") {
        Some(token) => {
            let (rev, start) = decode_continue(token, &pfx)?;
            // `storage.ValidateListOptions`: the token carries its own revision.
            if rv.is_some_and(|rv| rv.0 != 0) {
                return Err(ApiError::BadRequest(
                    "specifying resource version is not allowed when using continue".into(),
                ));
            }
            (Some(start), Some(rev))
        }
        None => match (rv, rv_match) {
            (None, Some(_)) => {
                // `ValidateListOptions` (apimachinery `pkg/apis/meta/internalversion/validation`):
                // a 422 on the ListOptions "object", not a 400.
                return Err(invalid_list_options(FieldError {
                    kind: FieldErrorKind::Forbidden,
                    field: "resourceVersionMatch".into(),
                    value: None,
                    detail: "resourceVersionMatch is forbidden unless resourceVersion is provided"
                        .into(),
                }));
            }
            (Some(rv), Some("Exact")) => (None, Some(rv)),
            (Some(rv), None | Some("NotOlderThan")) => {
                wait_for_revision(&ctx, rv).await?;
                (None, None)
            }
            (None, None) => (None, None),
            (Some(_), Some(other)) => return Err(unsupported_rv_match(other)),
        },
    };
    let keep = |obj: &Value| filter.matches(&info, obj);
    let page = ctx
        .state
        .storage()
        .list_shared(&info, &pfx, start, read_rev, limit, &keep)
        .await
        .map_err(|e| match (e, ctx.query.non_empty("continue")) {
            (ApiError::Expired(_), Some(_)) => ApiError::Expired(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.".into(),
            ),
            (e, _) => e,
        })?;
    let mut list_meta = json!({"resourceVersion": page.revision.0.to_string()});
    if let Some(next) = &page.next_key {
        list_meta["continue"] = json!(encode_continue(page.revision, next, &pfx));
    }
    if ctx.accept.table {
        return Ok(json_bytes_response(
            StatusCode::OK,
            table::write_table(
                &info,
                &page.items,
                &list_meta,
                ctx.include_object()?,
                ctx.state.now(),
            ),
        ));
    }
    if ctx.accept.partial_metadata {
        let items: Vec<Value> = page
            .items
            .iter()
            .map(|o| meta::partial_object_metadata(o))
            .collect();
        return Ok(json_bytes_response(
            StatusCode::OK,
            list_document(
                "PartialObjectMetadataList",
                "meta.k8s.io/v1",
                &list_meta,
                &items,
            ),
        ));
    }
    // The objects are written as they are held (shared with the watch cache); one whose
    // apiVersion or kind is not the list's is copied and set.
    let api_version = info.api_version();
    let items: Vec<Arc<Value>> = page
        .items
        .into_iter()
        .map(|o| {
            if meta::api_version(&o) == Some(api_version.as_str())
                && meta::kind(&o) == Some(info.kind.as_str())
            {
                o
            } else {
                let mut o = Arc::unwrap_or_clone(o);
                meta::set_type(&mut o, &api_version, &info.kind);
                Arc::new(o)
            }
        })
        .collect();
    Ok(json_bytes_response(
        StatusCode::OK,
        list_document(&info.list_kind(), &api_version, &list_meta, &items),
    ))
}

/// A list's JSON, as kube-apiserver writes it ([`crate::wire::write_list`]).
fn list_document<T: std::borrow::Borrow<Value>>(
    kind: &str,
    api_version: &str,
    list_meta: &Value,
    items: &[T],
) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(4096);
    if crate::wire::write_list(&mut bytes, kind, api_version, list_meta, items).is_err() {
        bytes.clear();
    }
    bytes
}

/// `ValidateListOptions`' 422 for a `resourceVersionMatch` it does not know.
fn unsupported_rv_match(value: &str) -> ApiError {
    invalid_list_options(FieldError {
        kind: FieldErrorKind::NotSupported,
        field: "resourceVersionMatch".into(),
        value: Some(apimachinery::fmt::go_quote(value)),
        detail: "supported values: \"Exact\", \"NotOlderThan\", \"\"".into(),
    })
}

/// A 422 about the request's list options, worded as Kubernetes'
/// `ListOptions.meta.k8s.io "" is invalid: ...`.
fn invalid_list_options(error: FieldError) -> ApiError {
    ApiError::Invalid {
        target: ErrorTarget {
            group: "meta.k8s.io".into(),
            resource: "listoptions".into(),
            kind: "ListOptions".into(),
            name: String::new(),
        },
        errors: vec![error],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_refuse_garbage() {
        let p = "/registry/pods/default/";
        let t = encode_continue(Revision(7), b"/registry/pods/default/b\0", p);
        let (rev, start) = decode_continue(&t, p).expect("valid token");
        assert_eq!(rev, Revision(7));
        assert_eq!(&start[..], b"/registry/pods/default/b\0");
        assert!(decode_continue("!!", p).is_err());
    }
}
