//! The executor's status writes that need more than one request or a policy of their own:
//! the ReplicaSet's (`updateReplicaSetStatus`, one retry on the latest version), the
//! DaemonSet's (`storeDaemonSetStatus`, likewise) and the Job's (`updateJobStatus`, none).

use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, PostParams};

use super::Executor;
use crate::error::{Error, Result};

impl Executor {
    /// `updateReplicaSetStatus` (`replica_set_utils.go`): PUT /status; if that fails, GET the
    /// ReplicaSet and try once more with its latest resourceVersion (`statusUpdateRetries` =
    /// 1). The cached copy a sync works on is often one status write behind (its own previous
    /// write not yet seen by the informer), so the first PUT meets a 409 Conflict.
    pub(super) async fn update_replica_set_status(&self, rs: ReplicaSet) -> Result<ReplicaSet> {
        const STATUS_UPDATE_RETRIES: usize = 1;
        let api: Api<ReplicaSet> = self.namespaced(&rs.metadata);
        let name = rs.name_any();
        let status = rs.status.clone();
        let mut rs = rs;
        let mut attempt = 0;
        loop {
            let error = match api.replace_status(&name, &PostParams::default(), &rs).await {
                Ok(updated) => return Ok(updated),
                Err(e) => Error::from_kube("update status of", format!("ReplicaSet {name}"), e),
            };
            if attempt >= STATUS_UPDATE_RETRIES {
                return Err(error);
            }
            attempt += 1;
            tracing::debug!(replicaset = %name, %error, "status update failed; retrying on the latest version");
            // If the GET fails the status can't be trusted anymore; its error is the one
            // worth reporting.
            rs = api
                .get(&name)
                .await
                .map_err(|e| Error::from_kube("get", format!("ReplicaSet {name}"), e))?;
            rs.status = status.clone();
        }
    }

    /// `storeDaemonSetStatus`' write: PUT /status, once more on the latest version after a
    /// conflict (`StatusUpdateRetries` = 1).
    pub(super) async fn update_daemon_set_status(&self, ds: DaemonSet) -> Result<DaemonSet> {
        let api: Api<DaemonSet> = self.namespaced(&ds.metadata);
        let name = ds.name_any();
        match api.replace_status(&name, &PostParams::default(), &ds).await {
            Ok(updated) => Ok(updated),
            Err(e) => {
                let error = Error::from_kube("update status of", format!("DaemonSet {name}"), e);
                if !error.is_conflict() {
                    return Err(error);
                }
                let mut latest = api
                    .get(&name)
                    .await
                    .map_err(|e| Error::from_kube("get", format!("DaemonSet {name}"), e))?;
                if latest.metadata.uid != ds.metadata.uid {
                    return Err(error);
                }
                latest.status = ds.status;
                api.replace_status(&name, &PostParams::default(), &latest)
                    .await
                    .map_err(|e| {
                        Error::from_kube("update status of", format!("DaemonSet {name}"), e)
                    })
            }
        }
    }

    /// The Job controller's status write (`updateJobStatus`): a plain PUT /status with the
    /// resourceVersion the sync decided from. Unlike the ReplicaSet's, a conflict is not
    /// retried on a fresher copy: the Job's status carries counts and conditions decided from
    /// the cached pods, and a stale decision written over a newer status would count pods
    /// twice; the key is requeued and decided again from the informer's newer view.
    pub(super) async fn update_job_status(&self, job: Job) -> Result<Job> {
        let api: Api<Job> = self.namespaced(&job.metadata);
        let name = job.name_any();
        api.replace_status(&name, &PostParams::default(), &job)
            .await
            .map_err(|e| Error::from_kube("update status of", format!("Job {name}"), e))
    }
}
