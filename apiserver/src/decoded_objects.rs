//! The decoded objects that the write path and the watch cache hand each other (the
//! [`Handoff`]): a writer's just-stored object goes to the cacher, so that it does not decode
//! the bytes it receives from the store's watch again; a cacher's current object goes to a
//! writer starting a read-modify-write, so that it does not decode the bytes it just read.
//!
//! kube-apiserver has no such step: its cacher decodes every event from etcd
//! (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/watcher.go`, `decodeObj`). Here the
//! store runs in the same process, and the value a watch event carries is the very buffer the
//! writer passed to the transaction (`Bytes` is reference counted), so the writer's decoded
//! object can travel with it:
//!
//! ```text
//!   writer:  encode(obj) = bytes ──offer(bytes, obj)──▶ Handoff { address of bytes → obj }
//!            txn put bytes ──▶ store ──watch event (the same bytes)──▶ cacher
//!   cacher:  take(bytes) → obj (set resourceVersion)  │ nothing offered → decode(bytes)
//! ```
//!
//! An offer is keyed by the buffer's address and holds a clone of the buffer, so the address
//! cannot be reused by another buffer while the offer lives. Offers are made only for keys
//! under a prefix a cacher watches, and at most [`GENERATION`] × 2 are kept: an offer nobody
//! took (a cacher that stopped, a failed write the writer did not withdraw) is dropped after
//! [`GENERATION`] newer ones, and the cacher then simply decodes. Taking an offer is an
//! optimization only; the result is the same object either way.
//!
//! The other way round, a read-modify-write starts from the cacher's current object when the
//! cacher holds the key at the revision just read from the store ([`Handoff::current`]),
//! instead of decoding the stored bytes: kube-apiserver's `GuaranteedUpdate` likewise starts
//! from the watch cache's copy (`cachedExistingObject`).
//!
//! A traced delete stores no object to stamp its trace context on, so it hands the context
//! over the same way, keyed by the store key ([`Handoff::offer_delete`]): the cacher puts it on
//! the DELETED event's object, so that whoever reacts to the deletion (the garbage collector)
//! continues the delete's trace instead of the object's previous write's. This one is not an
//! optimization: a watch served from the store's history (older than the cacher's ring)
//! delivers the object as last stored, with its previous write's context.

use crate::stored_json::{ResourceVersionSlot, StoredJson};
use bytes::Bytes;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock, Weak};
use store::Revision;

/// Offers kept per generation; the older generation is dropped when the newer one fills.
pub const GENERATION: usize = 2048;

/// One object offered with the stored bytes it was encoded to.
struct Offer {
    /// Keeps the buffer (and so its address) alive while the offer is held.
    _bytes: Bytes,
    object: Value,
    /// Where the resourceVersion goes in the bytes.
    slot: Option<ResourceVersionSlot>,
}

#[derive(Default)]
struct Generations {
    current: HashMap<(usize, usize), Offer>,
    previous: HashMap<(usize, usize), Offer>,
}

/// The current objects a cacher holds, for writers to start a read-modify-write from
/// (kube-apiserver's `GuaranteedUpdate` starts from the watch cache's copy of the object).
pub trait CurrentObjects: Send + Sync {
    /// The object at `key` if the cache holds it as of exactly `revision` (the key's
    /// mod revision just read from the store), else `None`.
    fn current(&self, key: &[u8], revision: Revision) -> Option<Arc<Value>>;
}

/// A prefix a cacher watches, and where its current objects can be read.
struct Watched {
    prefix: String,
    objects: Option<Weak<dyn CurrentObjects>>,
}

/// The objects writers have stored and the watch cache has not yet taken, and the watch
/// cache's current objects for writers to start from.
#[derive(Default)]
pub struct Handoff {
    /// Key prefixes that a cacher watches (only writes under them are offered).
    watched: RwLock<Vec<Watched>>,
    offers: Mutex<Generations>,
    /// The trace context of each traced delete about to be written, by store key.
    deletes: Mutex<HashMap<Bytes, String>>,
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

    /// Writes of keys under `prefix` are offered, with no cached objects to read (tests).
    #[cfg(test)]
    pub(crate) fn watch_prefix(&self, prefix: &str) {
        self.register(prefix, None);
    }

    /// A cacher now watches `prefix` and holds the current objects under it in `objects`.
    pub fn watch_prefix_with(&self, prefix: &str, objects: Weak<dyn CurrentObjects>) {
        self.register(prefix, Some(objects));
    }

    fn register(&self, prefix: &str, objects: Option<Weak<dyn CurrentObjects>>) {
        let mut watched = self.watched.write().unwrap_or_else(|p| p.into_inner());
        watched.retain(|w| w.prefix != prefix);
        watched.push(Watched {
            prefix: prefix.to_string(),
            objects,
        });
    }

    /// The cacher of `prefix` stopped.
    pub fn unwatch_prefix(&self, prefix: &str) {
        self.watched
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|w| w.prefix != prefix);
    }

    /// Whether a write of `key` would be taken by a cacher.
    pub fn wants(&self, key: &[u8]) -> bool {
        self.watched
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|w| key.starts_with(w.prefix.as_bytes()))
    }

    /// The watch cache's object at `key` as of `revision`, if a cacher holds exactly that.
    pub fn current(&self, key: &[u8], revision: Revision) -> Option<Arc<Value>> {
        self.current_objects(key)?.current(key, revision)
    }

    /// The current objects of the cacher whose prefix `key` (a key, or a list's prefix that
    /// lies within one cacher's) starts with, if one watches it: for a list to look up each
    /// of its keys without finding the cacher again.
    pub fn current_objects(&self, key: &[u8]) -> Option<Arc<dyn CurrentObjects>> {
        self.watched
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|w| key.starts_with(w.prefix.as_bytes()))?
            .objects
            .as_ref()?
            .upgrade()
    }

    /// Offers `object` (what `stored` decodes to, whatever its resourceVersion) for the write
    /// of `key` about to store `stored.bytes`, with the place of its resourceVersion in them;
    /// does nothing for a key no cacher watches.
    pub fn offer(&self, key: &[u8], stored: &StoredJson, object: &Value) {
        if self.wants(key) {
            self.hold(stored, object.clone());
        }
    }

    /// [`Handoff::offer`] of an object the writer no longer needs: moved out of `object`
    /// (leaving `Null`) instead of copied. Returns whether it was (the key is watched).
    pub fn offer_moving(&self, key: &[u8], stored: &StoredJson, object: &mut Value) -> bool {
        let wanted = self.wants(key);
        if wanted {
            self.hold(stored, std::mem::take(object));
        }
        wanted
    }

    /// Keeps `object` for the cacher that will see `stored.bytes`.
    fn hold(&self, stored: &StoredJson, object: Value) {
        let bytes = &stored.bytes;
        let offer = Offer {
            _bytes: bytes.clone(),
            object,
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

    /// The object offered for `bytes` and the place of its resourceVersion in `bytes`, if
    /// any (each offer is taken once).
    pub fn take(&self, bytes: &Bytes) -> Option<(Value, Option<ResourceVersionSlot>)> {
        let mut offers = self.offers();
        let key = address(bytes);
        offers
            .current
            .remove(&key)
            .or_else(|| offers.previous.remove(&key))
            .map(|o| (o.object, o.slot))
    }

    fn deletes(&self) -> std::sync::MutexGuard<'_, HashMap<Bytes, String>> {
        self.deletes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Offers the `traceparent` of a delete of `key` about to be written, for the cacher to
    /// stamp on the DELETED event's object; does nothing for a key no cacher watches. At most
    /// [`GENERATION`] are held: past that, offers nobody took are dropped.
    pub fn offer_delete(&self, key: &[u8], traceparent: &str) {
        if !self.wants(key) {
            return;
        }
        let mut deletes = self.deletes();
        if deletes.len() >= GENERATION {
            deletes.clear();
        }
        deletes.insert(Bytes::copy_from_slice(key), traceparent.to_owned());
    }

    /// Withdraws the delete offer of `key` made with `traceparent` (its delete did not happen;
    /// another writer's offer for the same key stays).
    pub fn withdraw_delete(&self, key: &[u8], traceparent: &str) {
        let mut deletes = self.deletes();
        if deletes.get(key).is_some_and(|t| t == traceparent) {
            deletes.remove(key);
        }
    }

    /// The trace context offered for the delete of `key`, if any (taken once).
    pub fn take_delete(&self, key: &[u8]) -> Option<String> {
        self.deletes().remove(key)
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

    #[test]
    fn only_watched_keys_are_offered_and_each_offer_is_taken_once() {
        let h = Handoff::new();
        let object = json!({"metadata": {"name": "a"}});
        let stored = crate::stored_json::encode(&object).unwrap();
        let bytes = stored.bytes.clone();
        h.offer(b"/registry/pods/default/a", &stored, &object);
        assert_eq!(h.held(), 0, "no cacher watches pods yet");
        h.watch_prefix("/registry/pods/");
        h.offer(b"/registry/pods/default/a", &stored, &object);
        h.offer(
            b"/registry/minions/n",
            &plain(&Bytes::from(vec![1])),
            &json!({}),
        );
        assert_eq!(h.held(), 1);
        // Another buffer with the same content is not the same write.
        assert_eq!(h.take(&Bytes::from(bytes.to_vec())), None);
        // The object comes with the place of its resourceVersion in the bytes.
        assert_eq!(h.take(&bytes.clone()), Some((object.clone(), stored.slot)));
        assert!(stored.slot.is_some());
        assert_eq!(h.take(&bytes), None);
        h.offer(b"/registry/pods/default/a", &stored, &object);
        h.withdraw(&bytes);
        assert_eq!(h.take(&bytes), None);
        h.unwatch_prefix("/registry/pods/");
        assert!(!h.wants(b"/registry/pods/default/a"));
    }

    #[test]
    fn a_delete_hands_over_its_trace_context_once() {
        let h = Handoff::new();
        let key = b"/registry/deployments/default/web";
        h.offer_delete(key, "00-a");
        assert_eq!(h.take_delete(key), None, "no cacher watches deployments");
        h.watch_prefix("/registry/deployments/");
        h.offer_delete(key, "00-a");
        h.withdraw_delete(key, "00-b");
        assert_eq!(
            h.take_delete(key).as_deref(),
            Some("00-a"),
            "only its own is withdrawn"
        );
        assert_eq!(h.take_delete(key), None, "taken once");
        h.offer_delete(key, "00-a");
        h.withdraw_delete(key, "00-a");
        assert_eq!(h.take_delete(key), None);
    }

    #[test]
    fn offers_nobody_takes_are_dropped_after_two_generations() {
        let h = Handoff::new();
        h.watch_prefix("/k/");
        let first = Bytes::from(vec![0u8; 8]);
        h.offer(b"/k/first", &plain(&first), &json!(0));
        let later: Vec<Bytes> = (0..2 * GENERATION)
            .map(|i| Bytes::from(i.to_string().into_bytes()))
            .collect();
        for b in &later {
            h.offer(b"/k/x", &plain(b), &json!(1));
        }
        assert!(h.held() <= 2 * GENERATION);
        assert_eq!(h.take(&first), None, "the oldest offer was dropped");
        assert_eq!(h.take(&later[later.len() - 1]), Some((json!(1), None)));
    }
}
