//! Maintenance.Status and Maintenance.Alarm, Cluster.MemberList (etcd's
//! `v3rpc/maintenance.go`, `v3rpc/member.go`): enough for `etcdctl endpoint status`,
//! `endpoint health` and `member list`. miniplane's store is one member, always the leader.

use crate::observe::Outcome;
use crate::proto::etcdserverpb::{
    self as pb, cluster_server::Cluster, maintenance_server::Maintenance,
};
use crate::{MEMBER_ID, MEMBER_NAME, RAFT_TERM, Shared, VERSION};
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The Maintenance service.
pub(crate) struct MaintenanceService(pub(crate) Arc<Shared>);

/// The Cluster service.
pub(crate) struct ClusterService(pub(crate) Arc<Shared>);

#[tonic::async_trait]
impl Maintenance for MaintenanceService {
    async fn alarm(
        &self,
        _req: Request<pb::AlarmRequest>,
    ) -> Result<Response<pb::AlarmResponse>, Status> {
        // No alarms are ever raised (no space quota, no corruption check).
        Ok(Response::new(pb::AlarmResponse {
            header: self.0.header(),
            alarms: Vec::new(),
        }))
    }

    async fn status(
        &self,
        _req: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let began = self.0.observe.began();
        let shared = &self.0;
        let revision = shared.backend.current_revision().0;
        let db_size = shared.backend.size_on_disk().unwrap_or(0) as i64;
        shared.observe.report(&began, "Status", &[], &[], || {
            (
                revision as i64,
                Outcome::Served(format!("leader, {db_size} bytes")),
            )
        });
        Ok(Response::new(pb::StatusResponse {
            header: shared.header_at(revision as i64),
            version: VERSION.to_owned(),
            db_size,
            leader: MEMBER_ID,
            raft_index: revision,
            raft_term: RAFT_TERM,
            raft_applied_index: revision,
            errors: Vec::new(),
            db_size_in_use: db_size,
            is_learner: false,
        }))
    }
}

#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn member_list(
        &self,
        _req: Request<pb::MemberListRequest>,
    ) -> Result<Response<pb::MemberListResponse>, Status> {
        let shared = &self.0;
        Ok(Response::new(pb::MemberListResponse {
            header: shared.header(),
            members: vec![pb::Member {
                id: MEMBER_ID,
                name: MEMBER_NAME.to_owned(),
                // No peers to talk to: the member's peer URL is its client URL.
                peer_urls: vec![format!("http://{}", shared.addr)],
                client_urls: vec![format!("http://{}", shared.addr)],
                is_learner: false,
            }],
        }))
    }
}
