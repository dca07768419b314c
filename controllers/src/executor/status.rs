//! The executor's status writes (`PUT .../<name>/status`), with the two policies Kubernetes'
//! controllers have:
//!
//! * one retry on the latest version: the ReplicaSet's `updateReplicaSetStatus` and the
//!   DaemonSet's `storeDaemonSetStatus` (`statusUpdateRetries` = 1). The cached copy a sync
//!   works on is often one status write behind (its own previous write not yet seen by the
//!   informer), so the first PUT meets a 409 Conflict; the status they write is derived from
//!   the pods alone and stays right on a newer object.
//! * none: the Deployment's, the CronJob's and the Job's (`updateJobStatus`). A Job's status
//!   carries counts and conditions decided from the cached pods, and a stale decision written
//!   over a newer status would count pods twice: on a 409 the key is requeued and decided
//!   again from the informer's newer view.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Executor;
use crate::error::{Error, Result};

impl Executor {
    /// `PUT .../status` of `obj` as it is.
    pub(super) async fn replace_status_typed<K>(&self, obj: &K) -> Result<K>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + Serialize
            + Debug,
    {
        let api: Api<K> = self.namespaced(obj.meta());
        let name = obj.name_any();
        api.replace_status(&name, &PostParams::default(), obj)
            .await
            .map_err(|e| {
                Error::from_kube("update status of", format!("{} {name}", K::kind(&())), e)
            })
    }

    /// `PUT .../status`; if that fails, GET the object and try once more with its latest
    /// resourceVersion, `keep_status` carrying `obj`'s status over to it. If the GET fails the
    /// status can't be trusted anymore; its error is the one worth reporting.
    pub(super) async fn replace_status_retrying_once<K>(
        &self,
        obj: K,
        keep_status: fn(&mut K, &K),
    ) -> Result<K>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + Serialize
            + Debug,
    {
        let error = match self.replace_status_typed(&obj).await {
            Ok(updated) => return Ok(updated),
            Err(e) => e,
        };
        let name = obj.name_any();
        let kind = K::kind(&());
        tracing::debug!(%kind, %name, %error, "status update failed; retrying on the latest version");
        let api: Api<K> = self.namespaced(obj.meta());
        let mut latest = api
            .get(&name)
            .await
            .map_err(|e| Error::from_kube("get", format!("{kind} {name}"), e))?;
        keep_status(&mut latest, &obj);
        self.replace_status_typed(&latest).await
    }
}
