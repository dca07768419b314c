//! The MVCC write rules both backends share: request validation and transaction evaluation.
//!
//! Mirrors etcd's request checks (`server/etcdserver/api/v3rpc/key.go`: `checkPutRequest`,
//! `checkTxnRequest`, `checkIntervals`) and its txn evaluation (`server/etcdserver/txn/txn.go`:
//! `applyCompares`, `executeTxn`; `server/storage/mvcc/kvstore_txn.go`: `put`, `delete`).
//!
//! Evaluation is pure: it reads the latest state through a [`KvView`] and returns the response
//! plus the [`Event`]s the write makes, all at one new revision. Storing those events is the
//! backend's job, so the same rules run in [`crate::MemoryBackend`] and in the real store's
//! committer.
//!
//! ```text
//!   Txn ──validate_txn──▶ compares hold? ──yes──▶ success ops ─┐
//!                                        └─no───▶ failure ops ─┴─▶ (TxnResponse, events @ rev+1)
//! ```
//!
//! A put on an existing key keeps `create_revision` and bumps `version`; a put on an absent key
//! starts at `version` 1. A delete of an absent key changes nothing. A write that changes
//! nothing (a failed compare with only gets, a delete of an absent key) makes no revision.

use crate::{
    Compare, CompareOp, CompareTarget, Error, Event, EventKind, KeyValue, MAX_TXN_OPS,
    MAX_VALUE_SIZE, Op, OpResponse, Result, Revision, Txn, TxnResponse,
};
use bytes::Bytes;
use std::cmp::Ordering;
use std::collections::HashSet;

/// Read access to the latest state of each key while a write is evaluated.
pub(crate) trait KvView {
    /// The key's current version, or `None` if it does not exist.
    fn current(&mut self, key: &[u8]) -> Result<Option<KeyValue>>;
}

/// What evaluating a transaction produced.
#[derive(Debug)]
pub(crate) struct Evaluated {
    /// The answer for the caller.
    pub response: TxnResponse,
    /// The changes, all at `response.revision`; empty if nothing changed.
    pub events: Vec<Event>,
}

/// Rejects an empty key.
pub(crate) fn validate_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::EmptyKey);
    }
    Ok(())
}

fn validate_value(value: &[u8]) -> Result<()> {
    if value.len() > MAX_VALUE_SIZE {
        return Err(Error::ValueTooLarge {
            size: value.len(),
            limit: MAX_VALUE_SIZE,
        });
    }
    Ok(())
}

fn validate_branch(ops: &[Op]) -> Result<()> {
    if ops.len() > MAX_TXN_OPS {
        return Err(Error::TooManyOps {
            ops: ops.len(),
            limit: MAX_TXN_OPS,
        });
    }
    // As etcd, only writes count as duplicates: a get next to a put of the same key is fine.
    let mut written: HashSet<&[u8]> = HashSet::new();
    for op in ops {
        match op {
            Op::Put { key, value } => {
                validate_key(key)?;
                validate_value(value)?;
                if !written.insert(key) {
                    return Err(Error::DuplicateKey);
                }
            }
            Op::Delete { key } => {
                validate_key(key)?;
                if !written.insert(key) {
                    return Err(Error::DuplicateKey);
                }
            }
            Op::Get { key } => validate_key(key)?,
        }
    }
    Ok(())
}

/// Checks a transaction before anything is written: keys non-empty, values within
/// [`MAX_VALUE_SIZE`], at most [`MAX_TXN_OPS`] compares and ops per branch, no key written twice
/// in one branch.
pub(crate) fn validate_txn(txn: &Txn) -> Result<()> {
    if txn.compares.len() > MAX_TXN_OPS {
        return Err(Error::TooManyOps {
            ops: txn.compares.len(),
            limit: MAX_TXN_OPS,
        });
    }
    for cmp in &txn.compares {
        validate_key(&cmp.key)?;
    }
    validate_branch(&txn.success)?;
    validate_branch(&txn.failure)
}

/// A transaction equivalent to a plain put.
pub(crate) fn put_txn(key: Bytes, value: Bytes) -> Txn {
    Txn {
        compares: Vec::new(),
        success: vec![Op::Put { key, value }],
        failure: Vec::new(),
    }
}

/// A transaction equivalent to a plain delete.
pub(crate) fn delete_txn(key: Bytes) -> Txn {
    Txn {
        compares: Vec::new(),
        success: vec![Op::Delete { key }],
        failure: Vec::new(),
    }
}

fn compare_holds(cmp: &Compare, kv: Option<&KeyValue>) -> bool {
    let ord = match (&cmp.target, kv) {
        // etcd: a value compare against an absent key is false whatever the operator.
        (CompareTarget::Value(_), None) => return false,
        (CompareTarget::Value(v), Some(kv)) => kv.value.as_ref().cmp(v.as_ref()),
        (CompareTarget::ModRevision(r), kv) => {
            kv.map_or(Revision::ZERO, |kv| kv.mod_revision).cmp(r)
        }
        (CompareTarget::CreateRevision(r), kv) => {
            kv.map_or(Revision::ZERO, |kv| kv.create_revision).cmp(r)
        }
        (CompareTarget::Version(v), kv) => kv.map_or(0, |kv| kv.version).cmp(v),
    };
    match cmp.op {
        CompareOp::Equal => ord == Ordering::Equal,
        CompareOp::NotEqual => ord != Ordering::Equal,
        CompareOp::Less => ord == Ordering::Less,
        CompareOp::Greater => ord == Ordering::Greater,
    }
}

/// Evaluates a validated transaction against the state at `current`.
///
/// Ops run in order; a get sees the writes of earlier ops of the same transaction (as etcd's
/// write txn ranges at `rev+1`). Every change is stamped with `current + 1`.
pub(crate) fn evaluate_txn(
    view: &mut impl KvView,
    txn: &Txn,
    current: Revision,
) -> Result<Evaluated> {
    let rev = current.next();
    let mut succeeded = true;
    for cmp in &txn.compares {
        let kv = view.current(&cmp.key)?;
        if !compare_holds(cmp, kv.as_ref()) {
            succeeded = false;
            break;
        }
    }
    let ops = if succeeded {
        &txn.success
    } else {
        &txn.failure
    };
    let mut events: Vec<Event> = Vec::new();
    let mut responses = Vec::with_capacity(ops.len());
    for op in ops {
        match op {
            Op::Put { key, value } => {
                let prev = view.current(key)?;
                let kv = KeyValue {
                    key: key.clone(),
                    value: value.clone(),
                    create_revision: prev.as_ref().map_or(rev, |p| p.create_revision),
                    mod_revision: rev,
                    version: prev.as_ref().map_or(1, |p| p.version + 1),
                };
                events.push(Event {
                    kind: EventKind::Put,
                    kv,
                    prev_kv: prev.clone(),
                });
                responses.push(OpResponse::Put { prev_kv: prev });
            }
            Op::Delete { key } => {
                let prev = view.current(key)?;
                if prev.is_some() {
                    events.push(Event {
                        kind: EventKind::Delete,
                        kv: tombstone(key.clone(), rev),
                        prev_kv: prev.clone(),
                    });
                }
                responses.push(OpResponse::Delete { prev_kv: prev });
            }
            Op::Get { key } => {
                // Writes earlier in this txn win over the stored state.
                let own = events.iter().rev().find(|e| e.kv.key == *key);
                let kv = match own {
                    Some(e) if e.kind == EventKind::Put => Some(e.kv.clone()),
                    Some(_) => None,
                    None => view.current(key)?,
                };
                responses.push(OpResponse::Get { kv });
            }
        }
    }
    let revision = if events.is_empty() { current } else { rev };
    Ok(Evaluated {
        response: TxnResponse {
            succeeded,
            revision,
            responses,
        },
        events,
    })
}

/// The record a delete leaves in events: the key, an empty value, the deleting revision.
pub(crate) fn tombstone(key: Bytes, rev: Revision) -> KeyValue {
    KeyValue {
        key,
        value: Bytes::new(),
        create_revision: Revision::ZERO,
        mod_revision: rev,
        version: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Map(HashMap<Bytes, KeyValue>);
    impl KvView for Map {
        fn current(&mut self, key: &[u8]) -> Result<Option<KeyValue>> {
            Ok(self.0.get(key).cloned())
        }
    }

    fn kv(key: &'static str, rev: u64) -> KeyValue {
        KeyValue {
            key: Bytes::from_static(key.as_bytes()),
            value: Bytes::from_static(b"v"),
            create_revision: Revision(rev),
            mod_revision: Revision(rev),
            version: 1,
        }
    }

    #[test]
    fn put_on_existing_key_bumps_version_and_keeps_create_revision() {
        let mut view = Map(HashMap::from([(Bytes::from_static(b"a"), kv("a", 2))]));
        let txn = put_txn(Bytes::from_static(b"a"), Bytes::from_static(b"w"));
        let out = evaluate_txn(&mut view, &txn, Revision(5)).unwrap();
        assert_eq!(out.response.revision, Revision(6));
        let ev = &out.events[0];
        assert_eq!((ev.kv.create_revision, ev.kv.version), (Revision(2), 2));
        assert_eq!(ev.prev_kv, Some(kv("a", 2)));
    }

    #[test]
    fn delete_of_absent_key_makes_no_revision() {
        let mut view = Map(HashMap::new());
        let out = evaluate_txn(
            &mut view,
            &delete_txn(Bytes::from_static(b"a")),
            Revision(5),
        );
        let out = out.unwrap();
        assert!(out.events.is_empty());
        assert_eq!(out.response.revision, Revision(5));
    }

    #[test]
    fn failed_compare_runs_failure_branch_and_get_sees_own_writes() {
        let mut view = Map(HashMap::new());
        let txn = Txn {
            compares: vec![Compare::exists(Bytes::from_static(b"a"))],
            success: vec![],
            failure: vec![
                Op::Put {
                    key: Bytes::from_static(b"a"),
                    value: Bytes::from_static(b"x"),
                },
                Op::Get {
                    key: Bytes::from_static(b"a"),
                },
            ],
        };
        let out = evaluate_txn(&mut view, &txn, Revision(1)).unwrap();
        assert!(!out.response.succeeded);
        match &out.response.responses[1] {
            OpResponse::Get { kv: Some(kv) } => assert_eq!(kv.mod_revision, Revision(2)),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn value_compare_on_absent_key_never_holds() {
        let cmp = Compare {
            key: Bytes::from_static(b"a"),
            op: CompareOp::NotEqual,
            target: CompareTarget::Value(Bytes::from_static(b"x")),
        };
        assert!(!compare_holds(&cmp, None));
    }

    #[test]
    fn validation_rejects_duplicate_writes_but_not_get_plus_put() {
        let k = Bytes::from_static(b"a");
        let mut txn = put_txn(k.clone(), Bytes::new());
        txn.success.push(Op::Get { key: k.clone() });
        assert!(validate_txn(&txn).is_ok());
        txn.success.push(Op::Delete { key: k });
        assert!(matches!(validate_txn(&txn), Err(Error::DuplicateKey)));
    }
}
