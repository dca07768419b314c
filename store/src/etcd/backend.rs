//! The [`Backend`] calls on etcd (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go`:
//! `Get`, `GetList`, the `Txn`s of `Create`, `GuaranteedUpdate` and `conditionalDelete`): bad
//! input refused as the store refuses it, keys through `--etcd-prefix`, one etcd request each.

use super::call::Retry;
use super::{EtcdBackend, UNKNOWN_SIZE, convert, keys, watch};
use crate::mvcc;
use crate::{
    Backend, Error, GetResponse, KeyRange, OpResponse, RangeRequest, RangeResponse, Result,
    Revision, Txn, TxnResponse, WatchRequest, Watcher, WriteResponse,
};
use async_trait::async_trait;
use bytes::Bytes;
use etcd_client as etcd;
use std::sync::atomic::Ordering;

/// The response revision of a read: the requested one, else the header's.
fn served_at(requested: Option<Revision>, header: Option<&etcd::ResponseHeader>) -> Revision {
    requested.unwrap_or_else(|| header.map_or(Revision::ZERO, |h| convert::revision(h.revision())))
}

/// The largest value a transaction writes (the size a too-large answer reports).
fn largest_value(txn: &Txn) -> usize {
    txn.success
        .iter()
        .chain(&txn.failure)
        .map(|op| match op {
            crate::Op::Put { value, .. } => value.len(),
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}

#[async_trait]
impl Backend for EtcdBackend {
    fn current_revision(&self) -> Revision {
        self.inner.current_revision()
    }

    fn compacted_revision(&self) -> Revision {
        self.inner.compacted_revision()
    }

    async fn get(&self, key: &[u8], revision: Option<Revision>) -> Result<GetResponse> {
        self.range(RangeRequest {
            range: KeyRange::Key(Bytes::copy_from_slice(key)),
            start: None,
            limit: None,
            revision,
        })
        .await
        .map(|r| GetResponse {
            kv: r.kvs.into_iter().next(),
            revision: r.revision,
        })
    }

    async fn range(&self, req: RangeRequest) -> Result<RangeResponse> {
        let inner = &self.inner;
        if inner.shutdown.is_cancelled() {
            return Err(Error::Closed);
        }
        let requested = req.revision.filter(|r| *r != Revision::ZERO);
        if let Some(r) = requested {
            inner.check_compacted(r)?;
        }
        let range = match &req.range {
            // No key is empty: an empty single key matches nothing.
            KeyRange::Key(k) if k.is_empty() => None,
            // A key with no place under another prefix is not there (`etcdctl endpoint
            // health`'s `health`, read through the store's etcd endpoint).
            KeyRange::Key(_) => inner
                .keys
                .range(&req.range, req.start.as_ref())
                .unwrap_or(None),
            range => inner
                .keys
                .range(range, req.start.as_ref())
                .map_err(|_| inner.outside(range))?,
        };
        // Nothing can match: still read (an empty range, [\x01, \x01)) for the revision and
        // its errors.
        let range = range.unwrap_or(keys::EtcdRange {
            key: vec![1],
            end: Some(vec![1]),
        });
        let mut options = etcd::GetOptions::new();
        if let Some(end) = range.end {
            options = options.with_range(end);
        }
        if let Some(limit) = req.limit.filter(|l| *l > 0) {
            options = options.with_limit(i64::try_from(limit).unwrap_or(i64::MAX));
        }
        if let Some(r) = requested {
            options = options.with_revision(convert::etcd_revision(r));
        }
        let got = inner
            .call("range", Retry::Read, || {
                let mut kv = inner.kv.clone();
                let (key, options) = (range.key.clone(), options.clone());
                async move { kv.get(key, Some(options)).await }
            })
            .await;
        let mut resp = match got {
            Ok(resp) => resp,
            Err(f) => return Err(inner.read_failure(f, requested).await),
        };
        if let Some(h) = resp.header() {
            inner.observe_revision(h.revision());
        }
        let revision = served_at(requested, resp.header());
        let (more, count) = (resp.more(), usize::try_from(resp.count()).unwrap_or(0));
        let kvs = resp
            .take_kvs()
            .into_iter()
            .filter_map(|kv| convert::owned_key_value(&inner.keys, kv))
            .collect();
        Ok(RangeResponse {
            kvs,
            more,
            count,
            revision,
        })
    }

    async fn put(&self, key: Bytes, value: Bytes) -> Result<WriteResponse> {
        let inner = &self.inner;
        mvcc::validate_txn(&mvcc::put_txn(key.clone(), value.clone()))?;
        if inner.shutdown.is_cancelled() {
            return Err(Error::Closed);
        }
        let etcd_key = self.etcd_key(&key)?;
        let mut resp = inner
            .call("put", Retry::Write, || {
                let mut kv = inner.kv.clone();
                let (key, value) = (etcd_key.clone(), value.to_vec());
                let options = etcd::PutOptions::new().with_prev_key();
                async move { kv.put(key, value, Some(options)).await }
            })
            .await
            .map_err(|f| inner.write_failure(f, value.len()))?;
        if let Some(h) = resp.header() {
            inner.observe_revision(h.revision());
        }
        Ok(WriteResponse {
            revision: served_at(None, resp.header()),
            prev_kv: resp
                .take_prev_key()
                .and_then(|kv| convert::owned_key_value(&inner.keys, kv)),
        })
    }

    async fn delete(&self, key: Bytes) -> Result<WriteResponse> {
        let inner = &self.inner;
        mvcc::validate_txn(&mvcc::delete_txn(key.clone()))?;
        if inner.shutdown.is_cancelled() {
            return Err(Error::Closed);
        }
        let etcd_key = self.etcd_key(&key)?;
        let mut resp = inner
            .call("delete", Retry::Write, || {
                let mut kv = inner.kv.clone();
                let key = etcd_key.clone();
                let options = etcd::DeleteOptions::new().with_prev_key();
                async move { kv.delete(key, Some(options)).await }
            })
            .await
            .map_err(|f| inner.write_failure(f, 0))?;
        if let Some(h) = resp.header() {
            inner.observe_revision(h.revision());
        }
        Ok(WriteResponse {
            revision: served_at(None, resp.header()),
            prev_kv: resp
                .take_prev_kvs()
                .into_iter()
                .next()
                .and_then(|kv| convert::owned_key_value(&inner.keys, kv)),
        })
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        let inner = &self.inner;
        mvcc::validate_txn(&txn)?;
        if inner.shutdown.is_cancelled() {
            return Err(Error::Closed);
        }
        let keys = &inner.keys;
        let outside = |_| {
            let key = txn
                .compares
                .iter()
                .map(|c| &c.key)
                .chain(txn.success.iter().chain(&txn.failure).map(|op| match op {
                    crate::Op::Put { key, .. }
                    | crate::Op::Delete { key }
                    | crate::Op::Get { key } => key,
                }))
                .find(|k| keys.etcd_key(k).is_err())
                .cloned()
                .unwrap_or_default();
            inner.outside_key(&key)
        };
        let compares = txn
            .compares
            .iter()
            .map(|c| convert::compare(keys, c))
            .collect::<Result<Vec<_>, _>>()
            .map_err(outside)?;
        let success = txn
            .success
            .iter()
            .map(|op| convert::op(keys, op))
            .collect::<Result<Vec<_>, _>>()
            .map_err(outside)?;
        let failure = txn
            .failure
            .iter()
            .map(|op| convert::op(keys, op))
            .collect::<Result<Vec<_>, _>>()
            .map_err(outside)?;
        let request = etcd::Txn::new()
            .when(compares)
            .and_then(success)
            .or_else(failure);
        let resp = inner
            .call("txn", Retry::Write, || {
                let mut kv = inner.kv.clone();
                let request = request.clone();
                async move { kv.txn(request).await }
            })
            .await
            .map_err(|f| inner.write_failure(f, largest_value(&txn)))?;
        if let Some(h) = resp.header() {
            inner.observe_revision(h.revision());
        }
        let responses: Vec<OpResponse> = resp
            .op_responses()
            .iter()
            .map(|r| convert::op_response(keys, r))
            .collect();
        Ok(TxnResponse {
            succeeded: resp.succeeded(),
            revision: served_at(None, resp.header()),
            responses,
        })
    }

    async fn watch(&self, req: WatchRequest) -> Result<Watcher> {
        watch::start(&self.inner, req).await
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.inner.compact(revision).await
    }

    async fn key_history(&self, key: &[u8]) -> Result<crate::KeyHistory> {
        crate::key_history::by_watch(self, key).await
    }

    fn size_on_disk(&self) -> Option<u64> {
        let size = self.inner.db_size.load(Ordering::Acquire);
        (size != UNKNOWN_SIZE).then_some(size)
    }
}
