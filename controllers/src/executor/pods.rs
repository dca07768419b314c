//! The executor's pod writes: `podControl.CreatePods` in slow-start batches, the parallel
//! `DeletePod` calls of `manageReplicas` and `manageJob`, and the Job controller's
//! `removeTrackingFinalizerFromPods` (`pkg/controller/controller_utils.go`,
//! `pkg/controller/job/job_controller.go`).

use apimachinery::{ObjectKey, ObjectRef};
use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource};

use super::{Executor, Run};
use crate::error::{Error, Result};
use crate::replicaset::pods::{
    created_event, deleted_event, failed_create_event, failed_delete_event,
};

/// The part of a created pod that `create_pods` reads from the reply: its generated name.
/// (client-go's `podControl.CreatePods` decodes the whole Pod and logs only its name; the rest
/// is skipped unparsed here.)
#[derive(serde::Deserialize)]
struct Created {
    metadata: CreatedMeta,
}

#[derive(serde::Deserialize)]
struct CreatedMeta {
    #[serde(default)]
    name: Option<String>,
}

/// POSTs `body` (an encoded pod) to `request`'s collection; returns the created pod's name.
async fn create_returning_name(
    client: &Client,
    request: &kube::core::Request,
    params: &PostParams,
    body: Vec<u8>,
) -> kube::Result<String> {
    let mut http_request = request
        .create(params, body)
        .map_err(kube::Error::BuildRequest)?;
    http_request.extensions_mut().insert("create");
    let created: Created = client.request(http_request).await?;
    Ok(created.metadata.name.unwrap_or_default())
}

/// A pod encoded for a create request.
pub(super) fn encode_pod(controller: &ObjectRef, pod: &Pod) -> Result<Vec<u8>> {
    serde_json::to_vec(pod).map_err(|e| {
        Error::from_kube(
            "create",
            format!("Pod for {controller}"),
            kube::Error::SerdeError(e),
        )
    })
}

impl Executor {
    /// `slowStartBatch(diff, SlowStartInitialBatchSize, createPod)` of `manageReplicas` and
    /// `manageJob`: `bodies` (encoded pods, one per creation) in the batches' order.
    pub(super) async fn create_pods(
        &self,
        controller: &ObjectRef,
        pod: &Pod,
        bodies: Vec<Vec<u8>>,
        batches: &[usize],
        run: &mut Run<'_>,
    ) -> Result<()> {
        let total: usize = batches.iter().sum();
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let request = kube::core::Request::new(Pod::url_path(&(), Some(namespace)));
        let client = self.client();
        let mut bodies = bodies.into_iter();
        let mut created = 0usize;
        let mut first_error = None;
        let params = PostParams::default();
        for batch in batches {
            let creates = bodies
                .by_ref()
                .take(*batch)
                .map(|body| create_returning_name(&client, &request, &params, body));
            let results = join_all(creates).await;
            for result in results {
                match result {
                    Ok(name) => {
                        created += 1;
                        run.outcome.writes += 1;
                        self.record_action(&created_event(controller, &name));
                    }
                    Err(e) => {
                        let e = Error::from_kube("create", format!("Pod for {controller}"), e);
                        self.record_action(&failed_create_event(controller, &e.to_string()));
                        first_error.get_or_insert(e);
                    }
                }
            }
            if first_error.is_some() {
                break;
            }
        }
        if let Some(expectations) = run.expectations {
            // The informer will never see the pods that were not created.
            let key = controller.key();
            let mut exp = expectations.lock().unwrap_or_else(|p| p.into_inner());
            for _ in created..total {
                exp.creation_observed(&key);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The parallel `podControl.DeletePod` calls of `manageReplicas`.
    pub(super) async fn delete_pods(
        &self,
        controller: &ObjectRef,
        pods: &[ObjectKey],
        run: &mut Run<'_>,
    ) -> Result<()> {
        let deletes = pods.iter().map(|key| async move {
            let api: Api<Pod> =
                Api::namespaced(self.client(), key.namespace.as_deref().unwrap_or_default());
            (key, api.delete(&key.name, &DeleteParams::default()).await)
        });
        let mut first_error = None;
        for (key, result) in join_all(deletes).await {
            match result {
                Ok(_) => {
                    run.outcome.writes += 1;
                    self.record_action(&deleted_event(controller, &key.name));
                }
                Err(e) => {
                    let e = Error::from_kube("delete", format!("Pod {key}"), e);
                    if let Some(expectations) = run.expectations {
                        expectations
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .deletion_observed(&controller.key(), key);
                    }
                    if !e.is_not_found() {
                        self.record_action(&failed_delete_event(controller, &e.to_string()));
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// `removeTrackingFinalizerFromPods`: the patches in parallel; NotFound counts as done.
    pub(super) async fn remove_finalizers(
        &self,
        controller: &ObjectRef,
        pods: &[(ObjectKey, String)],
        finalizer: &str,
        run: &mut Run<'_>,
    ) -> Result<()> {
        let body = serde_json::json!({
            "metadata": { "$deleteFromPrimitiveList/finalizers": [finalizer] }
        });
        let patches = pods.iter().map(|(key, uid)| {
            let body = body.clone();
            async move {
                let api: Api<Pod> =
                    Api::namespaced(self.client(), key.namespace.as_deref().unwrap_or_default());
                let result = api
                    .patch(&key.name, &PatchParams::default(), &Patch::Strategic(body))
                    .await;
                (key, uid, result)
            }
        });
        let mut first_error = None;
        for (key, uid, result) in join_all(patches).await {
            match result {
                Ok(_) => {
                    run.outcome.writes += 1;
                    run.outcome.removed_finalizers.push(uid.clone());
                }
                Err(e) => {
                    let e = Error::from_kube("remove finalizer from", format!("Pod {key}"), e);
                    if e.is_not_found() {
                        run.outcome.removed_finalizers.push(uid.clone());
                    } else {
                        tracing::info!(controller = %controller, error = %e, "finalizer removal failed");
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
