//! `GET /miniplane/v1/history/<the object's API path>` (e.g.
//! `/miniplane/v1/history/apis/apps/v1/namespaces/default/deployments/web`): every version of
//! one object the store keeps ([`admin::ObjectHistory`]). No Kubernetes counterpart: etcd keeps
//! old revisions but kube-apiserver serves none of them.
//!
//! ```text
//!   path ─▶ resource, namespace, name ─▶ store key ─▶ Backend::key_history
//!     each version ─▶ decode ─▶ diff to the version before
//!                   ─▶ writer: the managedFields entry it made or moved
//!                   ─▶ trace: its traceparent annotation; component: that span's parent in
//!                      the collector; user: that span's authenticated user
//! ```
//!
//! Access: under `/miniplane/`, so only `miniplane:admin` (the admin kubeconfig) reads it: a
//! history shows every kept version of any object, Secrets included. A delete stores no
//! object, so a `Deleted` entry has no writer; its trace is the one the delete stamped on the
//! watch event (`crate::decoded_objects`), which the store does not keep. Objects are shown
//! as stored (a kind served in several versions, such as HorizontalPodAutoscaler, in its
//! storage version).

use std::collections::HashMap;

use admin::history::{self, ChangeType, HistoryEntry, ObjectHistory};
use serde_json::Value;
use store::{EventKind, KeyValue};

use crate::error::{ApiError, Result};
use crate::request::{ResourcePath, Route};
use crate::state::AppState;
use crate::storage::{self, ObjectRef};

/// The object a history URL names: the API path after `history/` must name one object (no
/// subresource) of a served resource.
fn object_ref(state: &AppState, api_path: &str) -> Result<ObjectRef> {
    let bad = || {
        ApiError::BadRequest(format!(
            "history: {api_path:?} is not the API path of one object \
             (e.g. apis/apps/v1/namespaces/default/deployments/web)"
        ))
    };
    let Route::Resource(ResourcePath {
        gv,
        namespace,
        resource,
        name: Some(name),
        subresource: None,
    }) = Route::parse(&format!("/{api_path}"))
    else {
        return Err(bad());
    };
    let info = state
        .registry()
        .lookup(&gv, &resource)
        .ok_or(ApiError::PathNotFound)?;
    if info.namespaced != namespace.is_some() {
        return Err(bad());
    }
    Ok(ObjectRef {
        info,
        namespace,
        name,
    })
}

/// Every kept version of the object `api_path` names.
pub async fn read(state: &AppState, api_path: &str) -> Result<ObjectHistory> {
    let object = object_ref(state, api_path)?;
    let kept = state.storage().backend().key_history(&object.key()).await?;
    if kept.is_empty() {
        return Err(object.not_found());
    }
    let decode = |kv: &KeyValue| storage::decode_as(&object.info, &kv.value, kv.mod_revision);
    let mut revisions = Vec::new();
    let mut before: Option<Value> = None;
    let mut traces = Traces {
        state,
        read: HashMap::new(),
    };
    if let Some(kv) = &kept.at_compaction {
        let obj = decode(kv)?;
        let mut entry = written(&mut traces, kv, None, &obj);
        entry.before_compaction = true;
        entry.diff.clear();
        revisions.push(entry);
        before = Some(obj);
    }
    for change in &kept.changes {
        match change.kind {
            EventKind::Put => {
                let obj = decode(&change.kv)?;
                revisions.push(written(&mut traces, &change.kv, before.as_ref(), &obj));
                before = Some(obj);
            }
            EventKind::Delete => {
                revisions.push(HistoryEntry::deleted(change.kv.mod_revision.0));
                before = None;
            }
        }
    }
    Ok(ObjectHistory {
        resource: resource_name(&object),
        namespace: object.namespace.clone(),
        name: object.name.clone(),
        compacted_revision: kept.compacted.0,
        current_revision: kept.current.0,
        revisions,
    })
}

/// `deployments.apps`, `pods`: the resource as kubectl names it.
fn resource_name(object: &ObjectRef) -> String {
    let gvr = &object.info.gvr;
    if gvr.group.is_empty() {
        gvr.resource.clone()
    } else {
        format!("{}.{}", gvr.resource, gvr.group)
    }
}

/// The entry of a version `obj` written as `kv`, after `before` (`None`: it created the
/// object).
fn written(
    traces: &mut Traces<'_>,
    kv: &KeyValue,
    before: Option<&Value>,
    obj: &Value,
) -> HistoryEntry {
    let (mut writer, time) = history::Writer::of(before, obj);
    // A key's version restarts at 1 when it is created again after a delete.
    let created = kv.version == 1;
    if let Some(tp) = writer.traceparent.as_deref() {
        (writer.component, writer.user) = traces.request(tp);
    }
    HistoryEntry {
        revision: kv.mod_revision.0,
        change: if created {
            ChangeType::Created
        } else {
            ChangeType::Updated
        },
        object: Some(obj.clone()),
        writer,
        time,
        // A creation has no version before it: `--at` shows what it set.
        diff: before.map(|b| history::diff(b, obj)).unwrap_or_default(),
        before_compaction: false,
    }
}

/// The spans of the traces a history names, each read from the collector once.
struct Traces<'s> {
    state: &'s AppState,
    read: HashMap<trace::TraceId, Vec<trace::Span>>,
}

impl Traces<'_> {
    /// Who sent the request that wrote with `traceparent`, as the collector still knows it:
    /// the component (the parent of the API server's span the annotation names) and the
    /// authenticated user (that span's `user`).
    fn request(&mut self, traceparent: &str) -> (Option<String>, Option<String>) {
        let Ok(context) = trace::SpanContext::parse(traceparent) else {
            return (None, None);
        };
        let state = self.state;
        let spans = self
            .read
            .entry(context.trace_id)
            .or_insert_with(|| state.collector().trace(context.trace_id));
        let Some((span, parent)) = trace::span_and_parent(spans, &context) else {
            return (None, None);
        };
        (parent.map(|p| p.component.clone()), span.attribute("user"))
    }
}

/// Records the history read as a span of the API server (name `history <resource>/<ns>/<name>`,
/// attribute `history` naming the object, `versions` how many were found), continuing the
/// caller's trace when it sent `traceparent`: the trace shows who looked into the past.
pub fn record(
    state: &AppState,
    headers: &axum::http::HeaderMap,
    api_path: &str,
    found: &Result<ObjectHistory>,
) {
    if !state.options().tracing.enabled {
        return;
    }
    let parent = headers
        .get(trace::TRACEPARENT_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| trace::SpanContext::parse(v).ok());
    let context = parent.map_or_else(trace::SpanContext::new_root, |p| p.child());
    let object = match found {
        Ok(h) => {
            let place = h
                .namespace
                .as_deref()
                .map(|ns| format!("{ns}/"))
                .unwrap_or_default();
            format!("{}/{place}{}", h.resource, h.name)
        }
        Err(_) => api_path.to_owned(),
    };
    let mut span = trace::Span::start(
        context,
        parent.map(|p| p.span_id),
        format!("history {object}"),
        trace::SpanKind::Server,
        crate::request_trace::COMPONENT,
    );
    span.set("history", object.as_str());
    span.summary = match found {
        Ok(h) => {
            span.set("versions", h.revisions.len() as i64);
            format!(
                "{} versions kept, the store compacted below revision {}",
                h.revisions.len(),
                h.compacted_revision
            )
        }
        Err(e) => {
            span.set("error", e.to_string().as_str());
            format!("history not read: {e}")
        }
    };
    span.end();
    state.collector().record(span);
}

#[cfg(test)]
mod tests {
    /// The admin crate depends on no other crate of the workspace, so it names the trace
    /// annotation its diffs leave out itself: the same one the API server stamps.
    #[test]
    fn diffs_leave_out_the_annotation_the_server_stamps() {
        assert_eq!(
            admin::history::TRACEPARENT_ANNOTATION,
            trace::TRACEPARENT_ANNOTATION
        );
    }
}
