//! Conversions between etcd's messages and the store's types: key-values, events, compares
//! and transaction operations (the `clientv3.Op`/`clientv3.Cmp` building of
//! `staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go`, e.g. `notFound`).

use super::keys::{KeyMap, OutsidePrefix};
use crate::{
    Compare, CompareOp, CompareTarget, Event, EventKind, KeyValue, Op, OpResponse, Revision,
};
use etcd_client as etcd;

/// A revision from etcd (an `int64`, never negative in a response).
pub(crate) fn revision(r: i64) -> Revision {
    Revision(u64::try_from(r).unwrap_or(0))
}

/// A revision for etcd.
pub(crate) fn etcd_revision(r: Revision) -> i64 {
    i64::try_from(r.0).unwrap_or(i64::MAX)
}

/// The store's record of an etcd key-value (`None` for a key outside the prefix).
pub(crate) fn key_value(keys: &KeyMap, kv: &etcd::KeyValue) -> Option<KeyValue> {
    Some(KeyValue {
        key: keys.store_key(kv.key().to_vec())?,
        value: bytes::Bytes::copy_from_slice(kv.value()),
        create_revision: revision(kv.create_revision()),
        mod_revision: revision(kv.mod_revision()),
        version: u64::try_from(kv.version()).unwrap_or(0),
    })
}

/// The store's record of an etcd key-value it owns (no copy of key and value).
pub(crate) fn owned_key_value(keys: &KeyMap, kv: etcd::KeyValue) -> Option<KeyValue> {
    let (create, modified, version) = (kv.create_revision(), kv.mod_revision(), kv.version());
    let (key, value) = kv.into_key_value();
    Some(KeyValue {
        key: keys.store_key(key)?,
        value: bytes::Bytes::from(value),
        create_revision: revision(create),
        mod_revision: revision(modified),
        version: u64::try_from(version).unwrap_or(0),
    })
}

/// A watch event (`None` for a key outside the prefix).
pub(crate) fn event(keys: &KeyMap, e: &etcd::Event) -> Option<Event> {
    let kind = match e.event_type() {
        etcd::EventType::Put => EventKind::Put,
        etcd::EventType::Delete => EventKind::Delete,
    };
    Some(Event {
        kind,
        kv: key_value(keys, e.kv()?)?,
        prev_kv: e.prev_kv().and_then(|kv| key_value(keys, kv)),
    })
}

/// A store compare as an etcd compare (`clientv3.Compare(clientv3.ModRevision(key), "=", rev)`).
pub(crate) fn compare(keys: &KeyMap, c: &Compare) -> Result<etcd::Compare, OutsidePrefix> {
    let key = keys.etcd_key(&c.key)?;
    let op = match c.op {
        CompareOp::Equal => etcd::CompareOp::Equal,
        CompareOp::NotEqual => etcd::CompareOp::NotEqual,
        CompareOp::Less => etcd::CompareOp::Less,
        CompareOp::Greater => etcd::CompareOp::Greater,
    };
    Ok(match &c.target {
        CompareTarget::ModRevision(r) => etcd::Compare::mod_revision(key, op, etcd_revision(*r)),
        CompareTarget::CreateRevision(r) => {
            etcd::Compare::create_revision(key, op, etcd_revision(*r))
        }
        CompareTarget::Version(v) => {
            etcd::Compare::version(key, op, i64::try_from(*v).unwrap_or(i64::MAX))
        }
        CompareTarget::Value(v) => etcd::Compare::value(key, op, v.to_vec()),
    })
}

/// A store operation as an etcd one; puts and deletes ask for the previous value.
pub(crate) fn op(keys: &KeyMap, op: &Op) -> Result<etcd::TxnOp, OutsidePrefix> {
    Ok(match op {
        Op::Put { key, value } => etcd::TxnOp::put(
            keys.etcd_key(key)?,
            value.to_vec(),
            Some(etcd::PutOptions::new().with_prev_key()),
        ),
        Op::Delete { key } => etcd::TxnOp::delete(
            keys.etcd_key(key)?,
            Some(etcd::DeleteOptions::new().with_prev_key()),
        ),
        Op::Get { key } => etcd::TxnOp::get(keys.etcd_key(key)?, None),
    })
}

/// The response of one transaction operation.
pub(crate) fn op_response(keys: &KeyMap, resp: &etcd::TxnOpResponse) -> OpResponse {
    match resp {
        etcd::TxnOpResponse::Put(p) => OpResponse::Put {
            prev_kv: p.prev_key().and_then(|kv| key_value(keys, kv)),
        },
        etcd::TxnOpResponse::Delete(d) => OpResponse::Delete {
            prev_kv: d.prev_kvs().first().and_then(|kv| key_value(keys, kv)),
        },
        etcd::TxnOpResponse::Get(g) => OpResponse::Get {
            kv: g.kvs().first().and_then(|kv| key_value(keys, kv)),
        },
        // The store never nests transactions.
        etcd::TxnOpResponse::Txn(_) => OpResponse::Get { kv: None },
    }
}
