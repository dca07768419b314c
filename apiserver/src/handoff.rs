//! What a writer knows of the object it has just stored, handed to the watch cache so that it
//! does not decode the bytes it receives from the store's watch again.
//!
//! kube-apiserver has no such step: its cacher decodes every event from etcd
//! (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/watcher.go`, `decodeObj`). Here the
//! store runs in the same process, and the value a watch event carries is the very buffer the
//! writer passed to the transaction (`Bytes` is reference counted), so what the writer knows
//! of its object can travel with it: where the resourceVersion goes in the bytes, and the
//! [`ObjectSummary`] the cache keeps for selectors (taken by the writer, from the object it
//! holds anyway):
//!
//! ```text
//!   writer:  encode(obj) = bytes ──offer(bytes, summary(obj))──▶ Handoff { address → summary }
//!            txn put bytes ──▶ store ──watch event (the same bytes)──▶ cacher
//!   cacher:  take(bytes) → summary; bytes + resourceVersion  │ nothing offered → decode(bytes)
//! ```
//!
//! An offer is keyed by the buffer's address and holds a clone of the buffer, so the address
//! cannot be reused by another buffer while the offer lives. Offers are made only for keys
//! under a prefix a cacher watches, and at most [`GENERATION`] × 2 are kept: an offer nobody
//! took (a cacher that stopped, a failed write the writer did not withdraw) is dropped after
//! [`GENERATION`] newer ones, and the cacher then simply decodes. Taking an offer is an
//! optimization only; the result is the same object either way.
//!
//! (Until session 23 the writer's decoded object itself was handed over and kept by the
//! cacher, and a read-modify-write started from the cacher's copy, as kube-apiserver's
//! `GuaranteedUpdate` does with `cachedExistingObject`. The cacher now keeps objects encoded,
//! so an update decodes the stored bytes it read.)

use crate::stored_json::{ResourceVersionSlot, StoredJson};
use crate::watch_cache::ObjectSummary;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::{Mutex, RwLock};

/// Offers kept per generation; the older generation is dropped when the newer one fills.
pub const GENERATION: usize = 2048;

/// What is known of one object, offered with the stored bytes it was encoded to.
struct Offer {
    /// Keeps the buffer (and so its address) alive while the offer is held.
    _bytes: Bytes,
    summary: ObjectSummary,
    /// Where the resourceVersion goes in the bytes.
    slot: Option<ResourceVersionSlot>,
}

#[derive(Default)]
struct Generations {
    current: HashMap<(usize, usize), Offer>,
    previous: HashMap<(usize, usize), Offer>,
}

/// The objects writers have stored and the watch cache has not yet taken.
#[derive(Default)]
pub struct Handoff {
    /// Key prefixes that a cacher watches (only writes under them are offered).
    watched: RwLock<Vec<String>>,
    offers: Mutex<Generations>,
}

/// An offer's key: the address and length of the stored bytes.
fn address(bytes: &Bytes) -> (usize, usize) {
    (bytes.as_ptr() as usize, bytes.len())
}

impl Handoff {
    /// An empty handoff watching no prefix.
    pub fn new() -> Self {
        Handoff::default()
    }

    fn offers(&self) -> std::sync::MutexGuard<'_, Generations> {
        // Plain maps: a panicking holder cannot leave them torn.
        self.offers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A cacher now watches `prefix`: writes of keys under it are offered.
    pub fn watch_prefix(&self, prefix: &str) {
        let mut watched = self.watched.write().unwrap_or_else(|p| p.into_inner());
        watched.retain(|w| w != prefix);
        watched.push(prefix.to_string());
    }

    /// The cacher of `prefix` stopped.
    pub fn unwatch_prefix(&self, prefix: &str) {
        self.watched
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|w| w != prefix);
    }

    /// Whether a write of `key` would be taken by a cacher.
    pub fn wants(&self, key: &[u8]) -> bool {
        self.watched
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|w| key.starts_with(w.as_bytes()))
    }

    /// Offers the summary of the object that `stored.bytes` encode (`summary` is called only
    /// when a cacher watches `key`) for the write of `key` about to store them, with the place
    /// of its resourceVersion in them.
    pub fn offer(&self, key: &[u8], stored: &StoredJson, summary: impl FnOnce() -> ObjectSummary) {
        if !self.wants(key) {
            return;
        }
        let bytes = &stored.bytes;
        let offer = Offer {
            _bytes: bytes.clone(),
            summary: summary(),
            slot: stored.slot,
        };
        let mut offers = self.offers();
        if offers.current.len() >= GENERATION {
            offers.previous = std::mem::take(&mut offers.current);
        }
        offers.current.insert(address(bytes), offer);
    }

    /// Withdraws the offer for `bytes` (its write did not happen).
    pub fn withdraw(&self, bytes: &Bytes) {
        let mut offers = self.offers();
        let key = address(bytes);
        if offers.current.remove(&key).is_none() {
            offers.previous.remove(&key);
        }
    }

    /// The summary offered for `bytes` and the place of its resourceVersion in `bytes`, if
    /// any (each offer is taken once).
    pub fn take(&self, bytes: &Bytes) -> Option<(ObjectSummary, Option<ResourceVersionSlot>)> {
        let mut offers = self.offers();
        let key = address(bytes);
        offers
            .current
            .remove(&key)
            .or_else(|| offers.previous.remove(&key))
            .map(|o| (o.summary, o.slot))
    }

    /// How many offers are held (tests).
    pub fn held(&self) -> usize {
        let offers = self.offers();
        offers.current.len() + offers.previous.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `bytes` as stored bytes without a resourceVersion slot.
    fn plain(bytes: &Bytes) -> StoredJson {
        StoredJson {
            bytes: bytes.clone(),
            slot: None,
        }
    }

    /// A summary told apart by its name.
    fn named(name: &str) -> ObjectSummary {
        ObjectSummary {
            name: name.to_string(),
            ..ObjectSummary::default()
        }
    }

    #[test]
    fn only_watched_keys_are_offered_and_each_offer_is_taken_once() {
        let h = Handoff::new();
        let object = json!({"metadata": {"name": "a"}});
        let stored = crate::stored_json::encode(&object).unwrap();
        let bytes = stored.bytes.clone();
        let mut asked = 0;
        h.offer(b"/registry/core/pods/default/a", &stored, || {
            asked += 1;
            named("a")
        });
        assert_eq!(h.held(), 0, "no cacher watches pods yet");
        assert_eq!(asked, 0, "nor was the summary taken");
        h.watch_prefix("/registry/core/pods/");
        h.offer(b"/registry/core/pods/default/a", &stored, || named("a"));
        h.offer(
            b"/registry/core/nodes/n",
            &plain(&Bytes::from(vec![1])),
            || named("n"),
        );
        assert_eq!(h.held(), 1);
        // Another buffer with the same content is not the same write.
        assert_eq!(h.take(&Bytes::from(bytes.to_vec())), None);
        // The summary comes with the place of its resourceVersion in the bytes.
        assert_eq!(h.take(&bytes.clone()), Some((named("a"), stored.slot)));
        assert!(stored.slot.is_some());
        assert_eq!(h.take(&bytes), None);
        h.offer(b"/registry/core/pods/default/a", &stored, || named("a"));
        h.withdraw(&bytes);
        assert_eq!(h.take(&bytes), None);
        h.unwatch_prefix("/registry/core/pods/");
        assert!(!h.wants(b"/registry/core/pods/default/a"));
    }

    #[test]
    fn offers_nobody_takes_are_dropped_after_two_generations() {
        let h = Handoff::new();
        h.watch_prefix("/k/");
        let first = Bytes::from(vec![0u8; 8]);
        h.offer(b"/k/first", &plain(&first), || named("first"));
        let later: Vec<Bytes> = (0..2 * GENERATION)
            .map(|i| Bytes::from(i.to_string().into_bytes()))
            .collect();
        for b in &later {
            h.offer(b"/k/x", &plain(b), || named("x"));
        }
        assert!(h.held() <= 2 * GENERATION);
        assert_eq!(h.take(&first), None, "the oldest offer was dropped");
        assert_eq!(h.take(&later[later.len() - 1]), Some((named("x"), None)));
    }
}
