//! etcd's `TxnRequest` on the store's [`store::Txn`]: compares on one key's value, version,
//! create or mod revision with `=`, `!=`, `<`, `>`, then the success or failure branch of
//! single-key puts, deletes and gets (etcd's `etcdserver/txn/txn.go` `applyCompare`).

use crate::errors::unsupported;
use crate::proto::etcdserverpb::{
    self as pb, compare::CompareResult, compare::CompareTarget as PbTarget, compare::TargetUnion,
    request_op::Request,
};
use bytes::Bytes;
use store::{Compare, CompareOp, CompareTarget, Op, Revision, Txn};
use tonic::Status;

/// A revision from the wire (negative ones count as 0, "no revision").
pub(crate) fn revision(r: i64) -> Revision {
    Revision(r.max(0) as u64)
}

/// One compare of a transaction.
pub(crate) fn compare(c: &pb::Compare) -> Result<Compare, Status> {
    if !c.range_end.is_empty() {
        return Err(unsupported("compares over a key range"));
    }
    let op = match CompareResult::try_from(c.result) {
        Ok(CompareResult::Equal) => CompareOp::Equal,
        Ok(CompareResult::NotEqual) => CompareOp::NotEqual,
        Ok(CompareResult::Less) => CompareOp::Less,
        Ok(CompareResult::Greater) => CompareOp::Greater,
        Err(_) => {
            return Err(Status::invalid_argument(
                "etcdserver: unknown compare result",
            ));
        }
    };
    let union = c.target_union.as_ref();
    let number = |pick: fn(&TargetUnion) -> Option<i64>| union.and_then(pick).unwrap_or(0);
    let target = match PbTarget::try_from(c.target) {
        Ok(PbTarget::Version) => CompareTarget::Version(
            number(|u| match u {
                TargetUnion::Version(v) => Some(*v),
                _ => None,
            })
            .max(0) as u64,
        ),
        Ok(PbTarget::Create) => CompareTarget::CreateRevision(revision(number(|u| match u {
            TargetUnion::CreateRevision(v) => Some(*v),
            _ => None,
        }))),
        Ok(PbTarget::Mod) => CompareTarget::ModRevision(revision(number(|u| match u {
            TargetUnion::ModRevision(v) => Some(*v),
            _ => None,
        }))),
        Ok(PbTarget::Value) => CompareTarget::Value(match union {
            Some(TargetUnion::Value(v)) => Bytes::copy_from_slice(v),
            _ => Bytes::new(),
        }),
        Ok(PbTarget::Lease) => return Err(unsupported("compares on a key's lease")),
        Err(_) => {
            return Err(Status::invalid_argument(
                "etcdserver: unknown compare target",
            ));
        }
    };
    Ok(Compare {
        key: Bytes::copy_from_slice(&c.key),
        op,
        target,
    })
}

/// What the response of one operation should carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Want {
    /// A put: its previous version if asked; attach the key to this lease (0: none).
    Put {
        /// `prev_kv` was set.
        prev_kv: bool,
        /// The put's lease.
        lease: i64,
    },
    /// A delete: the deleted version if asked.
    Delete {
        /// `prev_kv` was set.
        prev_kv: bool,
    },
    /// A get, with its output options.
    Get {
        /// `keys_only` was set.
        keys_only: bool,
        /// `count_only` was set.
        count_only: bool,
    },
}

/// One operation of a branch.
pub(crate) fn op(o: &pb::RequestOp) -> Result<(Op, Want), Status> {
    match &o.request {
        Some(Request::RequestPut(p)) => {
            if p.ignore_value || p.ignore_lease {
                return Err(unsupported("ignore_value or ignore_lease inside a txn"));
            }
            Ok((
                Op::Put {
                    key: Bytes::copy_from_slice(&p.key),
                    value: Bytes::copy_from_slice(&p.value),
                },
                Want::Put {
                    prev_kv: p.prev_kv,
                    lease: p.lease,
                },
            ))
        }
        Some(Request::RequestDeleteRange(d)) => {
            if !d.range_end.is_empty() {
                return Err(unsupported("deleting a key range inside a txn"));
            }
            Ok((
                Op::Delete {
                    key: Bytes::copy_from_slice(&d.key),
                },
                Want::Delete { prev_kv: d.prev_kv },
            ))
        }
        Some(Request::RequestRange(r)) => {
            if !r.range_end.is_empty() || r.revision > 0 {
                return Err(unsupported(
                    "reading a key range or an older revision inside a txn",
                ));
            }
            Ok((
                Op::Get {
                    key: Bytes::copy_from_slice(&r.key),
                },
                Want::Get {
                    keys_only: r.keys_only,
                    count_only: r.count_only,
                },
            ))
        }
        Some(Request::RequestTxn(_)) => Err(unsupported("nested txns")),
        None => Err(Status::invalid_argument("etcdserver: empty request op")),
    }
}

/// A transaction and, per branch, what each operation's response should carry.
pub(crate) fn txn(t: &pb::TxnRequest) -> Result<(Txn, Vec<Want>, Vec<Want>), Status> {
    let compares = t.compare.iter().map(compare).collect::<Result<_, _>>()?;
    let branch = |ops: &[pb::RequestOp]| -> Result<(Vec<Op>, Vec<Want>), Status> {
        ops.iter()
            .map(op)
            .collect::<Result<Vec<_>, _>>()
            .map(|v| v.into_iter().unzip())
    };
    let (success, success_wants) = branch(&t.success)?;
    let (failure, failure_wants) = branch(&t.failure)?;
    Ok((
        Txn {
            compares,
            success,
            failure,
        },
        success_wants,
        failure_wants,
    ))
}

/// Every key a transaction compares or touches, in order and once each, as
/// [`crate::observe::key_label`] shows them, separated by `, ` (what its report names).
pub(crate) fn keys_label(t: &pb::TxnRequest) -> String {
    fn ops(ops: &[pb::RequestOp]) -> impl Iterator<Item = (&[u8], &[u8])> {
        ops.iter().filter_map(|o| match &o.request {
            Some(Request::RequestRange(r)) => Some((r.key.as_slice(), r.range_end.as_slice())),
            Some(Request::RequestPut(p)) => Some((p.key.as_slice(), &[][..])),
            Some(Request::RequestDeleteRange(d)) => {
                Some((d.key.as_slice(), d.range_end.as_slice()))
            }
            Some(Request::RequestTxn(_)) | None => None,
        })
    }
    let compares = t
        .compare
        .iter()
        .map(|c| (c.key.as_slice(), c.range_end.as_slice()));
    let mut labels: Vec<String> = Vec::new();
    for (key, end) in compares.chain(ops(&t.success)).chain(ops(&t.failure)) {
        let label = crate::observe::key_label(key, end);
        if !labels.contains(&label) {
            labels.push(label);
        }
    }
    labels.join(", ")
}

/// Whether either branch writes (a read-only endpoint refuses such a transaction).
pub(crate) fn writes(t: &Txn) -> bool {
    t.success
        .iter()
        .chain(&t.failure)
        .any(|o| !matches!(o, Op::Get { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::etcdserverpb::{PutRequest, RangeRequest, RequestOp, TxnRequest};
    use store::{Backend, MemoryBackend};

    fn cmp(key: &str, result: CompareResult, target: PbTarget, union: TargetUnion) -> pb::Compare {
        pb::Compare {
            result: result as i32,
            target: target as i32,
            key: key.as_bytes().to_vec(),
            target_union: Some(union),
            range_end: Vec::new(),
        }
    }

    fn put(key: &str, value: &str) -> RequestOp {
        RequestOp {
            request: Some(Request::RequestPut(PutRequest {
                key: key.as_bytes().to_vec(),
                value: value.as_bytes().to_vec(),
                ..PutRequest::default()
            })),
        }
    }

    #[test]
    fn compares_map_each_target_and_result() {
        let c = compare(&cmp(
            "k",
            CompareResult::Greater,
            PbTarget::Mod,
            TargetUnion::ModRevision(7),
        ))
        .unwrap();
        assert_eq!(c.op, CompareOp::Greater);
        assert_eq!(c.target, CompareTarget::ModRevision(Revision(7)));
        let c = compare(&cmp(
            "k",
            CompareResult::NotEqual,
            PbTarget::Value,
            TargetUnion::Value(b"v".to_vec()),
        ))
        .unwrap();
        assert_eq!(c.op, CompareOp::NotEqual);
        assert_eq!(c.target, CompareTarget::Value(Bytes::from_static(b"v")));
        let c = compare(&cmp(
            "k",
            CompareResult::Less,
            PbTarget::Version,
            TargetUnion::Version(3),
        ))
        .unwrap();
        assert_eq!(
            (c.op, c.target),
            (CompareOp::Less, CompareTarget::Version(3))
        );
        let c = compare(&cmp(
            "k",
            CompareResult::Equal,
            PbTarget::Create,
            TargetUnion::CreateRevision(0),
        ))
        .unwrap();
        assert_eq!(c, Compare::absent(Bytes::from_static(b"k")));
        let lease = cmp(
            "k",
            CompareResult::Equal,
            PbTarget::Lease,
            TargetUnion::Lease(1),
        );
        assert_eq!(
            compare(&lease).unwrap_err().code(),
            tonic::Code::Unimplemented
        );
    }

    #[test]
    fn read_only_txns_are_told_apart() {
        let get = RequestOp {
            request: Some(Request::RequestRange(RangeRequest {
                key: b"k".to_vec(),
                ..RangeRequest::default()
            })),
        };
        let (t, _, _) = txn(&TxnRequest {
            compare: vec![],
            success: vec![get.clone()],
            failure: vec![get.clone()],
        })
        .unwrap();
        assert!(!writes(&t));
        let (t, _, wants) = txn(&TxnRequest {
            compare: vec![],
            success: vec![get],
            failure: vec![put("k", "v")],
        })
        .unwrap();
        assert!(writes(&t));
        assert_eq!(
            wants,
            [Want::Put {
                prev_kv: false,
                lease: 0
            }]
        );
    }

    #[tokio::test]
    async fn a_create_if_absent_txn_runs_its_branches_on_the_store() {
        let backend = MemoryBackend::new();
        let create = TxnRequest {
            compare: vec![cmp(
                "/k",
                CompareResult::Equal,
                PbTarget::Create,
                TargetUnion::CreateRevision(0),
            )],
            success: vec![put("/k", "one")],
            failure: vec![],
        };
        let (t, _, _) = txn(&create).unwrap();
        assert!(backend.txn(t.clone()).await.unwrap().succeeded);
        assert!(!backend.txn(t).await.unwrap().succeeded);
        let got = backend.get(b"/k", None).await.unwrap().kv.unwrap();
        assert_eq!(got.value.as_ref(), b"one");
    }
}
