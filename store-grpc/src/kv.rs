//! The KV service: Range, Put, DeleteRange, Txn, Compact (etcd's `v3rpc/key.go` and the
//! range/put/delete parts of `etcdserver/txn/`).

use crate::Shared;
use crate::errors::{self, EMPTY_KEY, KEY_NOT_FOUND, LEASE_NOT_FOUND, status};
use crate::keys::{self, Scan};
use crate::observe::{kvs, outcome};
use crate::proto::etcdserverpb::{
    self as pb, kv_server::Kv, range_request::SortOrder, range_request::SortTarget,
    response_op::Response as OpResp,
};
use crate::proto::mvccpb;
use crate::txn::{self, Want};
use bytes::Bytes;
use std::sync::Arc;
use store::{KeyValue, Op, OpResponse, Revision, Txn};
use tonic::{Request, Response, Status};

/// The KV service over the shared store.
pub(crate) struct KvService(pub(crate) Arc<Shared>);

/// A store record as etcd's `mvccpb.KeyValue`, attached to `lease` (0: none).
pub(crate) fn to_pb(kv: KeyValue, lease: i64) -> mvccpb::KeyValue {
    mvccpb::KeyValue {
        key: kv.key.to_vec(),
        create_revision: kv.create_revision.0 as i64,
        mod_revision: kv.mod_revision.0 as i64,
        version: kv.version as i64,
        value: kv.value.to_vec(),
        lease,
    }
}

impl Shared {
    /// A store record as etcd's, with the lease this endpoint attached it to.
    pub(crate) fn kv_pb(&self, kv: KeyValue) -> mvccpb::KeyValue {
        let lease = self.leases.lease_of(&kv.key);
        to_pb(kv, lease)
    }

    /// Checks that `lease` (if not 0) exists.
    fn check_lease(&self, lease: i64) -> Result<(), Status> {
        if lease == 0 || self.leases.exists(lease) {
            Ok(())
        } else {
            Err(Status::not_found(LEASE_NOT_FOUND))
        }
    }
}

/// Which keys the range filters keep (etcd's min/max mod/create revision).
fn keep(r: &pb::RangeRequest, kv: &KeyValue) -> bool {
    let (m, c) = (kv.mod_revision.0 as i64, kv.create_revision.0 as i64);
    (r.min_mod_revision == 0 || m >= r.min_mod_revision)
        && (r.max_mod_revision == 0 || m <= r.max_mod_revision)
        && (r.min_create_revision == 0 || c >= r.min_create_revision)
        && (r.max_create_revision == 0 || c <= r.max_create_revision)
}

/// Sorts as etcd does: a target without an order sorts ascending; key-ascending is the
/// store's own order.
fn sort(r: &pb::RangeRequest, kvs: &mut [KeyValue]) {
    let target = SortTarget::try_from(r.sort_target).unwrap_or(SortTarget::Key);
    let mut order = SortOrder::try_from(r.sort_order).unwrap_or(SortOrder::None);
    if order == SortOrder::None && target != SortTarget::Key {
        order = SortOrder::Ascend;
    }
    if order == SortOrder::None || (order == SortOrder::Ascend && target == SortTarget::Key) {
        return;
    }
    match target {
        SortTarget::Key => kvs.sort_by(|a, b| a.key.cmp(&b.key)),
        SortTarget::Version => kvs.sort_by_key(|kv| kv.version),
        SortTarget::Create => kvs.sort_by_key(|kv| kv.create_revision),
        SortTarget::Mod => kvs.sort_by_key(|kv| kv.mod_revision),
        SortTarget::Value => kvs.sort_by(|a, b| a.value.cmp(&b.value)),
    }
    if order == SortOrder::Descend {
        kvs.reverse();
    }
}

/// Serves a Range request (also a txn's read).
pub(crate) async fn range(
    shared: &Shared,
    r: &pb::RangeRequest,
) -> Result<pb::RangeResponse, Status> {
    if r.key.is_empty() {
        return Err(Status::invalid_argument(EMPTY_KEY));
    }
    let scan = keys::plan(&r.key, &r.range_end);
    let revision = (r.revision > 0).then(|| txn::revision(r.revision));
    let limit = usize::try_from(r.limit).ok().filter(|l| *l > 0);
    let filtered = r.min_mod_revision != 0
        || r.max_mod_revision != 0
        || r.min_create_revision != 0
        || r.max_create_revision != 0;
    let sorted = r.sort_order != SortOrder::None as i32 || r.sort_target != SortTarget::Key as i32;
    // Sorting and filtering need every key first; the limit applies after them (as in etcd).
    let read_limit = if sorted || filtered || r.count_only {
        None
    } else {
        limit
    };
    let read = keys::read(shared.backend.as_ref(), &scan, revision, read_limit)
        .await
        .map_err(status)?;
    let mut kvs = read.kvs;
    let mut more = read.more;
    if filtered {
        kvs.retain(|kv| keep(r, kv));
    }
    sort(r, &mut kvs);
    if let Some(l) = limit
        && kvs.len() > l
    {
        kvs.truncate(l);
        more = true;
    }
    let kvs = if r.count_only {
        Vec::new()
    } else {
        kvs.into_iter()
            .map(|mut kv| {
                if r.keys_only {
                    kv.value = Bytes::new();
                }
                shared.kv_pb(kv)
            })
            .collect()
    };
    Ok(pb::RangeResponse {
        header: shared.header_at(read.revision.0 as i64),
        kvs,
        more,
        count: read.count as i64,
    })
}

/// The response of one txn operation.
fn op_response(shared: &Shared, resp: OpResponse, want: &Want, rev: Revision) -> pb::ResponseOp {
    let header = shared.header_at(rev.0 as i64);
    let response = match (resp, want) {
        (
            OpResponse::Put { prev_kv },
            Want::Put {
                prev_kv: wanted, ..
            },
        ) => OpResp::ResponsePut(pb::PutResponse {
            header,
            prev_kv: prev_kv.filter(|_| *wanted).map(|kv| shared.kv_pb(kv)),
        }),
        (OpResponse::Delete { prev_kv }, want) => {
            let wanted = matches!(want, Want::Delete { prev_kv: true });
            OpResp::ResponseDeleteRange(pb::DeleteRangeResponse {
                header,
                deleted: i64::from(prev_kv.is_some()),
                prev_kvs: prev_kv
                    .filter(|_| wanted)
                    .map(|kv| shared.kv_pb(kv))
                    .into_iter()
                    .collect(),
            })
        }
        (OpResponse::Get { kv }, want) => {
            let (keys_only, count_only) = match want {
                Want::Get {
                    keys_only,
                    count_only,
                } => (*keys_only, *count_only),
                _ => (false, false),
            };
            let count = i64::from(kv.is_some());
            let kvs = kv
                .filter(|_| !count_only)
                .map(|mut kv| {
                    if keys_only {
                        kv.value = Bytes::new();
                    }
                    shared.kv_pb(kv)
                })
                .into_iter()
                .collect();
            OpResp::ResponseRange(pb::RangeResponse {
                header,
                kvs,
                more: false,
                count,
            })
        }
        (OpResponse::Put { prev_kv }, _) => OpResp::ResponsePut(pb::PutResponse {
            header,
            prev_kv: prev_kv.map(|kv| shared.kv_pb(kv)),
        }),
    };
    pb::ResponseOp {
        response: Some(response),
    }
}

/// Deletes the keys of a scan, in transactions of at most [`store::MAX_TXN_OPS`] deletes.
async fn delete_scan(shared: &Shared, scan: &Scan) -> Result<(Vec<KeyValue>, Revision), Status> {
    let read = keys::read(shared.backend.as_ref(), scan, None, None)
        .await
        .map_err(status)?;
    let mut deleted = Vec::new();
    let mut rev = read.revision;
    for chunk in read.kvs.chunks(store::MAX_TXN_OPS) {
        let t = Txn {
            compares: Vec::new(),
            success: chunk
                .iter()
                .map(|kv| Op::Delete {
                    key: kv.key.clone(),
                })
                .collect(),
            failure: Vec::new(),
        };
        let resp = shared
            .writes
            .run(shared.backend.txn(t))
            .await
            .map_err(status)?;
        rev = resp.revision;
        deleted.extend(resp.responses.into_iter().filter_map(|r| match r {
            OpResponse::Delete { prev_kv } => prev_kv,
            _ => None,
        }));
    }
    Ok((deleted, rev))
}

/// The handlers, each answering one request (the trait's methods report them first).
impl KvService {
    async fn put(&self, p: pb::PutRequest) -> Result<pb::PutResponse, Status> {
        let shared = &self.0;
        shared.check_writable("put")?;
        if p.key.is_empty() {
            return Err(Status::invalid_argument(EMPTY_KEY));
        }
        if p.ignore_value && !p.value.is_empty() {
            return Err(Status::invalid_argument("etcdserver: value is provided"));
        }
        if p.ignore_lease && p.lease != 0 {
            return Err(Status::invalid_argument("etcdserver: lease is provided"));
        }
        let key = Bytes::from(p.key);
        let mut value = Bytes::from(p.value);
        if p.ignore_value {
            let current = shared.backend.get(&key, None).await.map_err(status)?;
            value = current
                .kv
                .ok_or_else(|| Status::invalid_argument(KEY_NOT_FOUND))?
                .value;
        }
        let lease = if p.ignore_lease {
            shared.leases.lease_of(&key)
        } else {
            p.lease
        };
        shared.check_lease(lease)?;
        // The key is kept only when a lease may need it (cloning it allocates).
        let attach = (lease != 0 || shared.leases.any_attached()).then(|| key.clone());
        let resp = shared
            .writes
            .run(shared.backend.put(key, value))
            .await
            .map_err(status)?;
        if let Some(key) = attach {
            shared.leases.attach(&key, lease);
        }
        Ok(pb::PutResponse {
            header: shared.header_at(resp.revision.0 as i64),
            prev_kv: resp.prev_kv.filter(|_| p.prev_kv).map(|kv| to_pb(kv, 0)),
        })
    }

    async fn delete_range(
        &self,
        d: &pb::DeleteRangeRequest,
    ) -> Result<pb::DeleteRangeResponse, Status> {
        let shared = &self.0;
        shared.check_writable("delete")?;
        if d.key.is_empty() {
            return Err(Status::invalid_argument(EMPTY_KEY));
        }
        let (deleted, rev) = delete_scan(shared, &keys::plan(&d.key, &d.range_end)).await?;
        let prev_kvs = deleted
            .into_iter()
            .map(|kv| {
                let lease = shared.leases.lease_of(&kv.key);
                shared.leases.attach(&kv.key, 0);
                to_pb(kv, lease)
            })
            .collect::<Vec<_>>();
        Ok(pb::DeleteRangeResponse {
            header: shared.header_at(rev.0 as i64),
            deleted: prev_kvs.len() as i64,
            prev_kvs: if d.prev_kv { prev_kvs } else { Vec::new() },
        })
    }

    async fn txn(&self, req: &pb::TxnRequest) -> Result<pb::TxnResponse, Status> {
        let shared = &self.0;
        let (t, success, failure) = txn::txn(req)?;
        if txn::writes(&t) {
            shared.check_writable("txn with writes")?;
        }
        for want in success.iter().chain(&failure) {
            if let Want::Put { lease, .. } = want {
                shared.check_lease(*lease)?;
            }
        }
        let ops = |succeeded: bool| if succeeded { &t.success } else { &t.failure };
        let resp = if txn::writes(&t) {
            shared.writes.run(shared.backend.txn(t.clone())).await
        } else {
            shared.backend.txn(t.clone()).await
        };
        let resp = resp.map_err(status)?;
        let wants = if resp.succeeded { &success } else { &failure };
        for (op, want) in ops(resp.succeeded).iter().zip(wants) {
            match (op, want) {
                (Op::Put { key, .. }, Want::Put { lease, .. }) => shared.leases.attach(key, *lease),
                (Op::Delete { key }, _) => shared.leases.attach(key, 0),
                _ => {}
            }
        }
        let responses = resp
            .responses
            .into_iter()
            .zip(wants)
            .map(|(r, w)| op_response(shared, r, w, resp.revision))
            .collect();
        Ok(pb::TxnResponse {
            header: shared.header_at(resp.revision.0 as i64),
            succeeded: resp.succeeded,
            responses,
        })
    }

    async fn compact(&self, rev: i64) -> Result<pb::CompactionResponse, Status> {
        let shared = &self.0;
        shared.check_writable("compact")?;
        if rev <= 0 {
            return Err(errors::status(store::Error::Compacted {
                requested: Revision::ZERO,
                compacted: shared.backend.compacted_revision(),
            }));
        }
        shared
            .backend
            .compact(txn::revision(rev))
            .await
            .map_err(status)?;
        Ok(pb::CompactionResponse {
            header: shared.header(),
        })
    }
}

/// The revision of a response header (0 without one).
fn revision_of(header: Option<&pb::ResponseHeader>) -> i64 {
    header.map_or(0, |h| h.revision)
}

#[tonic::async_trait]
impl Kv for KvService {
    async fn range(
        &self,
        req: Request<pb::RangeRequest>,
    ) -> Result<Response<pb::RangeResponse>, Status> {
        let began = self.0.observe.began();
        let r = req.get_ref();
        let result = range(&self.0, r).await;
        self.0
            .observe
            .report(&began, "Range", &r.key, &r.range_end, || {
                let revision = match &result {
                    Ok(a) => revision_of(a.header.as_ref()),
                    Err(_) if r.revision > 0 => r.revision,
                    Err(_) => self.0.backend.current_revision().0 as i64,
                };
                let served = outcome(&result, |a| {
                    if r.count_only {
                        format!("count {}", a.count)
                    } else {
                        kvs(a.kvs.len())
                    }
                });
                (revision, served)
            });
        result.map(Response::new)
    }

    async fn put(&self, req: Request<pb::PutRequest>) -> Result<Response<pb::PutResponse>, Status> {
        let began = self.0.observe.began();
        let p = req.into_inner();
        // The key, for the report only (a copy per put otherwise).
        let key = if self.0.observe.is_on() {
            p.key.clone()
        } else {
            Vec::new()
        };
        let result = KvService::put(self, p).await;
        self.0.observe.report(&began, "Put", &key, &[], || {
            let revision = match &result {
                Ok(a) => revision_of(a.header.as_ref()),
                Err(_) => self.0.backend.current_revision().0 as i64,
            };
            (revision, outcome(&result, |_| String::new()))
        });
        result.map(Response::new)
    }

    async fn delete_range(
        &self,
        req: Request<pb::DeleteRangeRequest>,
    ) -> Result<Response<pb::DeleteRangeResponse>, Status> {
        let began = self.0.observe.began();
        let d = req.get_ref();
        let result = KvService::delete_range(self, d).await;
        self.0
            .observe
            .report(&began, "DeleteRange", &d.key, &d.range_end, || {
                let revision = match &result {
                    Ok(a) => revision_of(a.header.as_ref()),
                    Err(_) => self.0.backend.current_revision().0 as i64,
                };
                (
                    revision,
                    outcome(&result, |a| format!("{} deleted", a.deleted)),
                )
            });
        result.map(Response::new)
    }

    async fn txn(&self, req: Request<pb::TxnRequest>) -> Result<Response<pb::TxnResponse>, Status> {
        let began = self.0.observe.began();
        let t = req.get_ref();
        let result = KvService::txn(self, t).await;
        self.0.observe.report_labelled(
            &began,
            "Txn",
            || (txn::keys_label(t), None),
            || {
                let revision = match &result {
                    Ok(a) => revision_of(a.header.as_ref()),
                    Err(_) => self.0.backend.current_revision().0 as i64,
                };
                let served = outcome(&result, |a| {
                    if a.succeeded {
                        "succeeded".to_owned()
                    } else {
                        "failed its compares".to_owned()
                    }
                });
                (revision, served)
            },
        );
        result.map(Response::new)
    }

    async fn compact(
        &self,
        req: Request<pb::CompactionRequest>,
    ) -> Result<Response<pb::CompactionResponse>, Status> {
        let began = self.0.observe.began();
        let rev = req.get_ref().revision;
        let result = KvService::compact(self, rev).await;
        self.0.observe.report(&began, "Compact", &[], &[], || {
            (rev, outcome(&result, |_| String::new()))
        });
        result.map(Response::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, version: u64, create: u64, modr: u64) -> KeyValue {
        KeyValue {
            key: Bytes::copy_from_slice(key.as_bytes()),
            value: Bytes::copy_from_slice(key.as_bytes()),
            create_revision: Revision(create),
            mod_revision: Revision(modr),
            version,
        }
    }

    #[test]
    fn sort_and_filters_follow_etcd() {
        let mut kvs = vec![kv("a", 3, 2, 9), kv("b", 1, 4, 5), kv("c", 2, 3, 7)];
        let by_mod_desc = pb::RangeRequest {
            sort_order: SortOrder::Descend as i32,
            sort_target: SortTarget::Mod as i32,
            ..Default::default()
        };
        sort(&by_mod_desc, &mut kvs);
        let order: Vec<&[u8]> = kvs.iter().map(|kv| kv.key.as_ref()).collect();
        assert_eq!(order, [b"a".as_ref(), b"c", b"b"]);
        // A target without an order sorts ascending.
        let by_version = pb::RangeRequest {
            sort_target: SortTarget::Version as i32,
            ..Default::default()
        };
        sort(&by_version, &mut kvs);
        assert_eq!(
            kvs.iter().map(|kv| kv.version).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        let min_create = pb::RangeRequest {
            min_create_revision: 3,
            max_mod_revision: 7,
            ..Default::default()
        };
        let kept: Vec<&[u8]> = kvs
            .iter()
            .filter(|kv| keep(&min_create, kv))
            .map(|kv| kv.key.as_ref())
            .collect();
        assert_eq!(kept, [b"b".as_ref(), b"c"]);
    }
}
