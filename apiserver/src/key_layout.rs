//! Stores written with miniplane's earlier key layout, `/registry/<group or core>/<resource>/...`,
//! moved at start to kube-apiserver's layout (`crate::storage::resource_prefix`:
//! `/registry/deployments/...`, `/registry/minions/...`). No Kubernetes counterpart: etcd's
//! layout has been stable for kube-apiserver's whole life; this only keeps a data directory of
//! an older miniplane readable.
//!
//! ```text
//!   for each built-in resource whose key prefix changed:
//!     every key under /registry/<group|core>/<resource>/  ─ txn: new key absent?
//!         yes: put it at /registry/<new prefix>/..., delete the old one
//!         no:  delete the old one (an earlier, interrupted start moved it already)
//! ```
//!
//! Each object moves in a transaction of its own, so an interrupted start leaves every object
//! in exactly one place and the next start finishes the move. Moved objects get new revisions
//! (their resourceVersions change), as after a restore; watches opened before cannot span it.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use store::{Backend, Compare, KeyRange, Op, RangeRequest, Txn};

use crate::registry::ResourceInfo;
use crate::storage::prefix;

/// How many keys one range of the move reads.
const PAGE: usize = 500;

/// The key prefix `info` had in the earlier layout.
pub fn earlier_prefix(info: &ResourceInfo) -> String {
    let group = if info.gvr.group.is_empty() {
        "core"
    } else {
        info.gvr.group.as_str()
    };
    format!("/registry/{group}/{}/", info.gvr.resource)
}

/// Moves every object of `resources` (the built-in ones) stored under its earlier prefix to
/// its prefix now; returns how many moved.
pub async fn migrate(
    backend: &Arc<dyn Backend>,
    resources: &[Arc<ResourceInfo>],
) -> store::Result<usize> {
    let mut moved = 0;
    let mut done = BTreeSet::new();
    for info in resources.iter().filter(|i| i.crd.is_none()) {
        let (old, new) = (earlier_prefix(info), prefix(info, None));
        if old == new || !done.insert(old.clone()) {
            continue;
        }
        loop {
            let page = backend
                .range(RangeRequest {
                    range: KeyRange::Prefix(Bytes::from(old.clone())),
                    start: None,
                    limit: Some(PAGE),
                    revision: None,
                })
                .await?;
            if page.kvs.is_empty() {
                break;
            }
            for kv in &page.kvs {
                let Some(rest) = kv.key.strip_prefix(old.as_bytes()) else {
                    continue;
                };
                let target = Bytes::from([new.as_bytes(), rest].concat());
                let delete = Op::Delete {
                    key: kv.key.clone(),
                };
                backend
                    .txn(Txn {
                        compares: vec![Compare::absent(target.clone())],
                        success: vec![
                            Op::Put {
                                key: target,
                                value: kv.value.clone(),
                            },
                            delete.clone(),
                        ],
                        failure: vec![delete],
                    })
                    .await?;
                moved += 1;
            }
        }
    }
    if moved > 0 {
        tracing::info!(moved, "moved stored objects to kube-apiserver's key layout");
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gvk::GroupVersion;
    use crate::registry::Registry;
    use store::MemoryBackend;

    #[tokio::test]
    async fn objects_of_the_earlier_layout_move_once_and_custom_ones_stay() {
        let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
        let put = |k: &'static str, v: &'static str| {
            let backend = backend.clone();
            async move {
                backend
                    .put(
                        Bytes::from_static(k.as_bytes()),
                        Bytes::from_static(v.as_bytes()),
                    )
                    .await
                    .expect("put");
            }
        };
        put("/registry/apps/deployments/default/web", "{\"d\":1}").await;
        put("/registry/core/nodes/node-0", "{\"n\":1}").await;
        put("/registry/core/services/default/kubernetes", "{\"s\":1}").await;
        put("/registry/example.com/widgets/default/w", "{\"w\":1}").await;
        // Moved by an interrupted start already: the new copy wins, the old goes.
        put("/registry/core/pods/default/p", "{\"old\":1}").await;
        put("/registry/pods/default/p", "{\"new\":1}").await;

        let registry = Registry::builtin();
        let rows = registry.snapshot();
        assert_eq!(migrate(&backend, &rows).await.expect("migrated"), 4);
        let all = backend
            .range(RangeRequest::prefix("/registry/"))
            .await
            .expect("range");
        let keys: Vec<(String, String)> = all
            .kvs
            .iter()
            .map(|kv| {
                (
                    String::from_utf8_lossy(&kv.key).into_owned(),
                    String::from_utf8_lossy(&kv.value).into_owned(),
                )
            })
            .collect();
        assert_eq!(
            keys,
            [
                (
                    "/registry/deployments/default/web".into(),
                    "{\"d\":1}".into()
                ),
                (
                    "/registry/example.com/widgets/default/w".into(),
                    "{\"w\":1}".into()
                ),
                ("/registry/minions/node-0".into(), "{\"n\":1}".into()),
                ("/registry/pods/default/p".into(), "{\"new\":1}".into()),
                (
                    "/registry/services/specs/default/kubernetes".into(),
                    "{\"s\":1}".into()
                ),
            ]
        );
        assert_eq!(migrate(&backend, &rows).await.expect("again"), 0);
        let crd = registry
            .lookup(
                &GroupVersion::parse_api_version("apiextensions.k8s.io/v1"),
                "customresourcedefinitions",
            )
            .expect("built in");
        assert_eq!(earlier_prefix(&crd), prefix(&crd, None), "not moved");
    }
}
