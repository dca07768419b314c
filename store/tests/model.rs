//! Property tests of the MVCC semantics.
//!
//! 1. `MemoryBackend` (the reference model) against `Simple`, a trivially simple model that
//!    keeps a full copy of the key space per revision.
//! 2. `Store` (no fsync, temp dir, with restarts in the middle) against `MemoryBackend`: every
//!    response, every range at every kept revision, and the watch streams must be identical.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use bytes::Bytes;
use proptest::prelude::*;
use std::collections::BTreeMap;
use store::{
    Backend, Compare, CompareOp, CompareTarget, Error, Event, EventKind, KeyRange, KeyValue,
    MemoryBackend, Op, OpResponse, RangeRequest, RangeResponse, Result, Revision, Store, Txn,
    TxnResponse,
};

pub(crate) const KEYS: [&[u8]; 8] = [
    b"/a/0",
    b"/a/1",
    b"/a/2",
    b"/a/\x00z",
    b"/a",
    b"/ab",
    b"/b/0",
    b"/b/1",
];
pub(crate) const PREFIXES: [&[u8]; 5] = [b"", b"/a", b"/a/", b"/b/", b"/a/1"];

pub(crate) fn key(i: u8) -> Bytes {
    Bytes::from_static(KEYS[i as usize % KEYS.len()])
}

#[derive(Debug, Clone)]
pub(crate) enum TOp {
    Put(u8, u8),
    Delete(u8),
    Get(u8),
}

#[derive(Debug, Clone)]
pub(crate) enum Step {
    Put(u8, u8),
    Delete(u8),
    Txn {
        compare: Option<(u8, u8, u8)>,
        success: Vec<TOp>,
        failure: Vec<TOp>,
    },
    Compact(u8),
    Read {
        prefix: u8,
        start: Option<u8>,
        limit: u8,
        back: u8,
    },
    Get(u8, u8),
    Reopen,
}

fn top() -> impl Strategy<Value = TOp> {
    prop_oneof![
        (any::<u8>(), any::<u8>()).prop_map(|(k, v)| TOp::Put(k, v)),
        any::<u8>().prop_map(TOp::Delete),
        any::<u8>().prop_map(TOp::Get),
    ]
}

pub(crate) fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (any::<u8>(), any::<u8>()).prop_map(|(k, v)| Step::Put(k, v)),
        2 => any::<u8>().prop_map(Step::Delete),
        3 => (
            proptest::option::of((any::<u8>(), any::<u8>(), any::<u8>())),
            proptest::collection::vec(top(), 0..4),
            proptest::collection::vec(top(), 0..3)
        )
            .prop_map(|(compare, success, failure)| Step::Txn { compare, success, failure }),
        1 => any::<u8>().prop_map(Step::Compact),
        2 => (any::<u8>(), proptest::option::of(any::<u8>()), 0u8..4, any::<u8>())
            .prop_map(|(prefix, start, limit, back)| Step::Read { prefix, start, limit, back }),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(k, b)| Step::Get(k, b)),
        1 => Just(Step::Reopen),
    ]
}

/// A branch with each key written at most once (bad input is tested elsewhere).
fn branch(ops: &[TOp]) -> Vec<Op> {
    let mut written = Vec::new();
    let mut out = Vec::new();
    for op in ops {
        match op {
            TOp::Put(k, _) | TOp::Delete(k) if written.contains(&key(*k)) => {}
            TOp::Put(k, v) => {
                written.push(key(*k));
                out.push(Op::Put {
                    key: key(*k),
                    value: value(*v),
                });
            }
            TOp::Delete(k) => {
                written.push(key(*k));
                out.push(Op::Delete { key: key(*k) });
            }
            TOp::Get(k) => out.push(Op::Get { key: key(*k) }),
        }
    }
    out
}

pub(crate) fn value(v: u8) -> Bytes {
    Bytes::from(vec![v; (v % 5) as usize])
}

pub(crate) fn txn_of(
    compare: &Option<(u8, u8, u8)>,
    success: &[TOp],
    failure: &[TOp],
    current: u64,
) -> Txn {
    let compares = compare
        .iter()
        .map(|(k, kind, x)| {
            let rev = Revision(u64::from(*x) % (current + 2));
            let (op, target) = match kind % 5 {
                0 => (CompareOp::Equal, CompareTarget::ModRevision(rev)),
                1 => (
                    CompareOp::Equal,
                    CompareTarget::CreateRevision(Revision::ZERO),
                ),
                2 => (
                    CompareOp::NotEqual,
                    CompareTarget::CreateRevision(Revision::ZERO),
                ),
                3 => (
                    CompareOp::Greater,
                    CompareTarget::Version(u64::from(*x % 3)),
                ),
                _ => (
                    CompareOp::Less,
                    CompareTarget::Value(Bytes::from(vec![*x; (*x % 5) as usize])),
                ),
            };
            Compare {
                key: key(*k),
                op,
                target,
            }
        })
        .collect();
    Txn {
        compares,
        success: branch(success),
        failure: branch(failure),
    }
}

/// The trivially simple model: the whole key space at every revision.
struct Simple {
    /// `snaps[r - 1]` is the key space at revision `r`.
    snaps: Vec<BTreeMap<Bytes, KeyValue>>,
    compacted: u64,
}

impl Simple {
    fn new() -> Self {
        Simple {
            snaps: vec![BTreeMap::new()],
            compacted: 0,
        }
    }

    fn rev(&self) -> u64 {
        self.snaps.len() as u64
    }

    fn holds(&self, c: &Compare) -> bool {
        let kv = self.snaps.last().unwrap().get(&c.key);
        let ord = match &c.target {
            CompareTarget::Value(v) => match kv {
                None => return false,
                Some(kv) => kv.value.cmp(v),
            },
            CompareTarget::ModRevision(r) => kv.map_or(0, |kv| kv.mod_revision.0).cmp(&r.0),
            CompareTarget::CreateRevision(r) => kv.map_or(0, |kv| kv.create_revision.0).cmp(&r.0),
            CompareTarget::Version(v) => kv.map_or(0, |kv| kv.version).cmp(v),
        };
        match c.op {
            CompareOp::Equal => ord.is_eq(),
            CompareOp::NotEqual => !ord.is_eq(),
            CompareOp::Less => ord.is_lt(),
            CompareOp::Greater => ord.is_gt(),
        }
    }

    fn txn(&mut self, txn: &Txn) -> TxnResponse {
        let succeeded = txn.compares.iter().all(|c| self.holds(c));
        let ops = if succeeded {
            &txn.success
        } else {
            &txn.failure
        };
        let rev = Revision(self.rev() + 1);
        let mut next = self.snaps.last().unwrap().clone();
        let mut changed = false;
        let mut responses = Vec::new();
        for op in ops {
            match op {
                Op::Put { key, value } => {
                    let prev = next.get(key).cloned();
                    let kv = KeyValue {
                        key: key.clone(),
                        value: value.clone(),
                        create_revision: prev.as_ref().map_or(rev, |p| p.create_revision),
                        mod_revision: rev,
                        version: prev.as_ref().map_or(1, |p| p.version + 1),
                    };
                    next.insert(key.clone(), kv);
                    changed = true;
                    responses.push(OpResponse::Put { prev_kv: prev });
                }
                Op::Delete { key } => {
                    let prev = next.remove(key);
                    changed |= prev.is_some();
                    responses.push(OpResponse::Delete { prev_kv: prev });
                }
                Op::Get { key } => responses.push(OpResponse::Get {
                    kv: next.get(key).cloned(),
                }),
            }
        }
        if changed {
            self.snaps.push(next);
        }
        TxnResponse {
            succeeded,
            revision: Revision(self.rev()),
            responses,
        }
    }

    fn read_rev(&self, rev: Option<Revision>) -> Result<u64> {
        match rev {
            None | Some(Revision::ZERO) => Ok(self.rev()),
            Some(r) if r.0 > self.rev() => Err(Error::FutureRevision {
                requested: r,
                current: Revision(self.rev()),
            }),
            Some(r) if r.0 < self.compacted => Err(Error::Compacted {
                requested: r,
                compacted: Revision(self.compacted),
            }),
            Some(r) => Ok(r.0),
        }
    }

    fn range(&self, req: &RangeRequest) -> Result<RangeResponse> {
        let rev = self.read_rev(req.revision)?;
        let matching: Vec<KeyValue> = self.snaps[rev as usize - 1]
            .values()
            .filter(|kv| req.range.contains(&kv.key))
            .filter(|kv| req.start.as_ref().is_none_or(|s| kv.key >= *s))
            .cloned()
            .collect();
        let limit = req.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        Ok(RangeResponse {
            more: matching.len() > limit,
            count: matching.len(),
            kvs: matching.into_iter().take(limit).collect(),
            revision: Revision(rev),
        })
    }

    /// Events of revisions `from..=rev()`, ordered by revision then key.
    fn events(&self, from: u64) -> Vec<Event> {
        let mut out = Vec::new();
        for r in from.max(2)..=self.rev() {
            let (before, after) = (&self.snaps[r as usize - 2], &self.snaps[r as usize - 1]);
            let mut keys: Vec<&Bytes> = before.keys().chain(after.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                match (before.get(k), after.get(k)) {
                    (prev, Some(kv)) if kv.mod_revision.0 == r => out.push(Event {
                        kind: EventKind::Put,
                        kv: kv.clone(),
                        prev_kv: prev.cloned(),
                    }),
                    (Some(prev), None) => out.push(Event {
                        kind: EventKind::Delete,
                        kv: KeyValue {
                            key: k.clone(),
                            value: Bytes::new(),
                            create_revision: Revision::ZERO,
                            mod_revision: Revision(r),
                            version: 0,
                        },
                        prev_kv: Some(prev.clone()),
                    }),
                    _ => {}
                }
            }
        }
        out
    }
}

pub(crate) fn read_request(
    prefix: u8,
    start: Option<u8>,
    limit: u8,
    back: u8,
    current: u64,
) -> RangeRequest {
    RangeRequest {
        range: KeyRange::Prefix(Bytes::from_static(
            PREFIXES[prefix as usize % PREFIXES.len()],
        )),
        start: start.map(key),
        limit: Some(limit as usize),
        revision: (!back.is_multiple_of(4))
            .then(|| Revision(current.saturating_sub(u64::from(back) % 8))),
    }
}

pub(crate) fn compact_target(back: u8, current: u64) -> Revision {
    Revision(current.saturating_sub(u64::from(back) % 6))
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Ranges of every prefix at every revision from the compaction point on.
pub(crate) async fn all_ranges<B: Backend>(db: &B) -> Vec<String> {
    let mut out = Vec::new();
    for rev in db.compacted_revision().0.max(1)..=db.current_revision().0 {
        for p in PREFIXES {
            let req = RangeRequest {
                revision: Some(Revision(rev)),
                ..RangeRequest::prefix(Bytes::from_static(p))
            };
            out.push(format!("{rev} {p:?}: {:?}", db.range(req).await));
        }
    }
    out
}

/// Sorts events by revision, then key (a txn's events come in op order).
pub(crate) fn by_rev_and_key(mut events: Vec<Event>) -> Vec<Event> {
    events.sort_by(|a, b| (a.revision(), &a.kv.key).cmp(&(b.revision(), &b.kv.key)));
    events
}

async fn memory_matches_simple(steps: Vec<Step>) {
    let mem = MemoryBackend::new();
    let mut simple = Simple::new();
    let mut live = common::watch(&mem, KeyRange::Prefix(Bytes::new()), None).await;
    for step in &steps {
        let cur = simple.rev();
        match step {
            Step::Put(k, v) => {
                let txn = Txn {
                    success: branch(&[TOp::Put(*k, *v)]),
                    ..Txn::default()
                };
                let want = simple.txn(&txn);
                let got = mem.put(key(*k), value(*v)).await.unwrap();
                assert_eq!(got.revision, want.revision);
                assert_eq!(
                    Some(OpResponse::Put {
                        prev_kv: got.prev_kv
                    }),
                    want.responses.into_iter().next()
                );
            }
            Step::Delete(k) => {
                let want = simple.txn(&Txn {
                    success: vec![Op::Delete { key: key(*k) }],
                    ..Txn::default()
                });
                let got = mem.delete(key(*k)).await.unwrap();
                assert_eq!(got.revision, want.revision);
                assert_eq!(
                    Some(OpResponse::Delete {
                        prev_kv: got.prev_kv
                    }),
                    want.responses.into_iter().next()
                );
            }
            Step::Txn {
                compare,
                success,
                failure,
            } => {
                let txn = txn_of(compare, success, failure, cur);
                let want = simple.txn(&txn);
                assert_eq!(mem.txn(txn).await.unwrap(), want);
            }
            Step::Compact(back) => {
                let target = compact_target(*back, cur);
                let got = mem.compact(target).await;
                if target.0 <= simple.compacted {
                    assert!(matches!(got, Err(Error::Compacted { .. })), "{got:?}");
                } else {
                    got.unwrap();
                    simple.compacted = target.0;
                }
            }
            Step::Read {
                prefix,
                start,
                limit,
                back,
            } => {
                let req = read_request(*prefix, *start, *limit, *back, cur);
                let want = format!("{:?}", simple.range(&req));
                assert_eq!(format!("{:?}", mem.range(req).await), want);
            }
            Step::Get(k, back) => {
                let rev = Revision(cur.saturating_sub(u64::from(*back) % 5));
                let want = simple.range(&RangeRequest {
                    range: KeyRange::Key(key(*k)),
                    start: None,
                    limit: None,
                    revision: Some(rev),
                });
                let got = mem.get(&key(*k), Some(rev)).await;
                match (got, want) {
                    (Ok(got), Ok(want)) => assert_eq!(got.kv, want.kvs.into_iter().next()),
                    (got, want) => {
                        assert_eq!(format!("{:?}", got.err()), format!("{:?}", want.err()))
                    }
                }
            }
            Step::Reopen => {}
        }
        assert_eq!(mem.current_revision().0, simple.rev());
    }
    let expected = simple.events(2);
    let got = if simple.rev() >= 2 {
        common::collect_until(&mut live, Revision(simple.rev())).await
    } else {
        Vec::new()
    };
    assert_eq!(by_rev_and_key(got), expected);
    let from = simple.compacted.max(2);
    if from <= simple.rev() {
        let mut replay =
            common::watch(&mem, KeyRange::Prefix(Bytes::new()), Some(Revision(from))).await;
        let got = common::collect_until(&mut replay, Revision(simple.rev())).await;
        assert_eq!(by_rev_and_key(got), simple.events(from));
    }
}

/// Runs a write step (put, delete, transaction, compaction) on `db` and on the model and
/// checks they answer alike (shared by the store's and etcd's comparisons); other steps are
/// the caller's.
pub(crate) async fn same_write<B: Backend>(db: &B, mem: &MemoryBackend, step: &Step, cur: u64) {
    match step {
        Step::Put(k, v) => {
            let want = mem.put(key(*k), value(*v)).await.unwrap();
            assert_eq!(db.put(key(*k), value(*v)).await.unwrap(), want);
        }
        Step::Delete(k) => {
            let want = mem.delete(key(*k)).await.unwrap();
            assert_eq!(db.delete(key(*k)).await.unwrap(), want);
        }
        Step::Txn {
            compare,
            success,
            failure,
        } => {
            let txn = txn_of(compare, success, failure, cur);
            let want = mem.txn(txn.clone()).await.unwrap();
            assert_eq!(db.txn(txn).await.unwrap(), want);
        }
        Step::Compact(back) => {
            let target = compact_target(*back, cur);
            let want = format!("{:?}", mem.compact(target).await);
            assert_eq!(format!("{:?}", db.compact(target).await), want);
        }
        Step::Read { .. } | Step::Get(..) | Step::Reopen => {}
    }
}

async fn store_matches_memory(steps: Vec<Step>) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(common::fast_config(dir.path())).await.unwrap();
    let mem = MemoryBackend::new();
    let all = || KeyRange::Prefix(Bytes::new());
    let mut live = common::watch(&store, all(), None).await;
    let mut mem_live = common::watch(&mem, all(), None).await;
    let mut streamed: Vec<Event> = Vec::new();
    for step in &steps {
        let cur = mem.current_revision().0;
        match step {
            Step::Put(..) | Step::Delete(_) | Step::Txn { .. } | Step::Compact(_) => {
                same_write(&store, &mem, step, cur).await;
            }
            Step::Read {
                prefix,
                start,
                limit,
                back,
            } => {
                let req = read_request(*prefix, *start, *limit, *back, cur);
                let want = format!("{:?}", mem.range(req.clone()).await);
                assert_eq!(format!("{:?}", store.range(req).await), want);
            }
            Step::Get(k, back) => {
                let rev = Some(Revision(cur.saturating_sub(u64::from(*back) % 5)));
                let want = format!("{:?}", mem.get(&key(*k), rev).await);
                assert_eq!(format!("{:?}", store.get(&key(*k), rev).await), want);
            }
            Step::Reopen => {
                if cur >= 2 && streamed.last().is_none_or(|e| e.revision().0 < cur) {
                    streamed.extend(common::collect_until(&mut live, Revision(cur)).await);
                }
                store.close().await.unwrap();
                drop(store);
                store = Store::open(common::fast_config(dir.path())).await.unwrap();
                live = common::watch(&store, all(), Some(Revision(cur + 1))).await;
            }
        }
        assert_eq!(store.current_revision(), mem.current_revision());
        assert_eq!(store.compacted_revision(), mem.compacted_revision());
    }
    let cur = mem.current_revision();
    if cur.0 >= 2 && streamed.last().is_none_or(|e| e.revision() < cur) {
        streamed.extend(common::collect_until(&mut live, cur).await);
    }
    let want = if cur.0 >= 2 {
        common::collect_until(&mut mem_live, cur).await
    } else {
        Vec::new()
    };
    assert_eq!(streamed, want);
    let (got, want) = (all_ranges(&store).await, all_ranges(&mem).await);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "store (left) and model (right) disagree");
    }
    let from = mem.compacted_revision().max(Revision(2));
    if from <= cur {
        let mut a = common::watch(&store, all(), Some(from)).await;
        let mut b = common::watch(&mem, all(), Some(from)).await;
        assert_eq!(
            common::collect_until(&mut a, cur).await,
            common::collect_until(&mut b, cur).await
        );
    }
    store.close().await.unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn memory_backend_matches_simple_model(steps in proptest::collection::vec(step(), 1..40)) {
        runtime().block_on(memory_matches_simple(steps));
    }

    #[test]
    fn store_matches_memory_backend(steps in proptest::collection::vec(step(), 1..40)) {
        runtime().block_on(store_matches_memory(steps));
    }
}
