//! The DeltaFIFO: client-go's `tools/cache/delta_fifo.go`.
//!
//! The reflector writes what it sees (adds, updates, deletes, whole relists) into the FIFO;
//! the informer pops one key at a time with **all** deltas accumulated for it, oldest first:
//!
//! ```text
//!   queue: [default/a, default/b]           (each key at most once, FIFO order)
//!   items: default/a → [Added(a@5), Updated(a@7)]
//!          default/b → [Deleted(b@9)]
//! ```
//!
//! `replace(list)` (a relist) queues `Replaced` for every listed object and, for every key
//! the FIFO or the cache (`known_objects`, the informer's [`Indexer`]) still has but the list
//! does not, a `Deleted` delta carrying a [`DeletedFinalStateUnknown`] **tombstone**: the
//! object was deleted while the watch was down and its final state is unknown.
//!
//! `resync()` queues `Sync` for every cached object that has no pending deltas. `has_synced()`
//! turns true once the first `replace` has been fully popped.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use kube::Resource;
use tokio::sync::{Notify, watch};

use crate::indexer::Indexer;
use apimachinery::ObjectKey;

/// What happened to an object (client-go's `DeltaType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeltaType {
    /// Seen in a watch ADDED event.
    Added,
    /// Seen in a watch MODIFIED event.
    Updated,
    /// Seen in a watch DELETED event, or missing from a relist (then with a tombstone).
    Deleted,
    /// Listed by a relist (`replace`).
    Replaced,
    /// Re-delivered by a periodic resync.
    Sync,
}

/// An object that was deleted while the watch was down: the last state the cache knew
/// (client-go's `DeletedFinalStateUnknown`).
#[derive(Debug)]
pub struct DeletedFinalStateUnknown<K> {
    /// The key of the deleted object.
    pub key: ObjectKey,
    /// The last known state of the object (possibly stale).
    pub obj: Arc<K>,
}

impl<K> Clone for DeletedFinalStateUnknown<K> {
    fn clone(&self) -> Self {
        DeletedFinalStateUnknown {
            key: self.key.clone(),
            obj: self.obj.clone(),
        }
    }
}

/// The object of a delta or a delete notification: the object, or a tombstone.
#[derive(Debug)]
pub enum DeltaObject<K> {
    /// The object as observed.
    Object(Arc<K>),
    /// A delete detected by a relist: the last known state.
    Tombstone(DeletedFinalStateUnknown<K>),
}

impl<K> Clone for DeltaObject<K> {
    fn clone(&self) -> Self {
        match self {
            DeltaObject::Object(obj) => DeltaObject::Object(obj.clone()),
            DeltaObject::Tombstone(t) => DeltaObject::Tombstone(t.clone()),
        }
    }
}

impl<K: Resource> DeltaObject<K> {
    /// The object, unwrapping a tombstone (client-go's
    /// `DeletionHandlingMetaNamespaceKeyFunc` does the same for keys).
    pub fn object(&self) -> &Arc<K> {
        match self {
            DeltaObject::Object(obj) => obj,
            DeltaObject::Tombstone(t) => &t.obj,
        }
    }

    /// The object's key (a tombstone's own key).
    pub fn key(&self) -> ObjectKey {
        match self {
            DeltaObject::Object(obj) => ObjectKey::of(obj.as_ref()),
            DeltaObject::Tombstone(t) => t.key.clone(),
        }
    }

    /// True for a tombstone.
    pub fn is_tombstone(&self) -> bool {
        matches!(self, DeltaObject::Tombstone(_))
    }
}

/// One change to one object.
#[derive(Debug)]
pub struct Delta<K> {
    /// What happened.
    pub kind: DeltaType,
    /// The object after it happened (or a tombstone).
    pub object: DeltaObject<K>,
}

impl<K> Clone for Delta<K> {
    fn clone(&self) -> Self {
        Delta {
            kind: self.kind,
            object: self.object.clone(),
        }
    }
}

/// A FIFO of keys with the deltas accumulated per key (a cheap-to-clone handle).
pub struct DeltaFifo<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for DeltaFifo<K> {
    fn clone(&self) -> Self {
        DeltaFifo {
            shared: self.shared.clone(),
        }
    }
}

struct Shared<K> {
    state: Mutex<State<K>>,
    /// Wakes `pop` when a key is queued or the FIFO is closed.
    ready: Notify,
    /// The informer's cache: consulted by `delete`, `replace` and `resync`.
    known_objects: Indexer<K>,
    /// Publishes `has_synced`.
    synced: watch::Sender<bool>,
}

struct State<K> {
    items: HashMap<ObjectKey, Vec<Delta<K>>>,
    queue: VecDeque<ObjectKey>,
    /// True once the first `replace` or any add/update/delete happened.
    populated: bool,
    /// Keys queued by the first `replace` not yet popped.
    initial_population_count: usize,
    closed: bool,
}

impl<K> State<K> {
    fn has_synced(&self) -> bool {
        self.populated && self.initial_population_count == 0
    }
}

impl<K: Resource + 'static> DeltaFifo<K> {
    /// An empty FIFO whose deletion detection consults `known_objects`.
    pub fn new(known_objects: Indexer<K>) -> Self {
        DeltaFifo {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    items: HashMap::new(),
                    queue: VecDeque::new(),
                    populated: false,
                    initial_population_count: 0,
                    closed: false,
                }),
                ready: Notify::new(),
                known_objects,
                synced: watch::channel(false).0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends a delta for the object's key, queueing the key if it is new.
    fn queue_action_locked(&self, state: &mut State<K>, kind: DeltaType, object: DeltaObject<K>) {
        let key = object.key();
        let deltas = state.items.entry(key.clone()).or_default();
        let was_empty = deltas.is_empty();
        deltas.push(Delta { kind, object });
        dedup_deltas(deltas);
        if was_empty {
            state.queue.push_back(key);
        }
        self.shared.ready.notify_one();
    }

    /// Queues an `Added` delta.
    pub fn add(&self, obj: Arc<K>) {
        let mut state = self.lock();
        state.populated = true;
        self.queue_action_locked(&mut state, DeltaType::Added, DeltaObject::Object(obj));
    }

    /// Queues an `Updated` delta.
    pub fn update(&self, obj: Arc<K>) {
        let mut state = self.lock();
        state.populated = true;
        self.queue_action_locked(&mut state, DeltaType::Updated, DeltaObject::Object(obj));
    }

    /// Queues a `Deleted` delta, unless neither the FIFO nor the cache knows the object
    /// (it is already gone).
    pub fn delete(&self, obj: Arc<K>) {
        let key = ObjectKey::of(obj.as_ref());
        let mut state = self.lock();
        state.populated = true;
        let known = self.shared.known_objects.get_by_key(&key).is_some();
        if !known && !state.items.contains_key(&key) {
            return;
        }
        self.queue_action_locked(&mut state, DeltaType::Deleted, DeltaObject::Object(obj));
    }

    /// A relist: `Replaced` for every listed object, and a tombstone `Deleted` for every key
    /// the FIFO or the cache has that the list lacks.
    pub fn replace(&self, list: Vec<Arc<K>>) {
        let mut state = self.lock();
        let mut listed = HashSet::with_capacity(list.len());
        for obj in list {
            listed.insert(ObjectKey::of(obj.as_ref()));
            self.queue_action_locked(&mut state, DeltaType::Replaced, DeltaObject::Object(obj));
        }
        // Deletion detection against objects still queued here...
        let queued_missing: Vec<(ObjectKey, Arc<K>)> = state
            .items
            .iter()
            .filter(|(key, _)| !listed.contains(*key))
            .filter_map(|(key, deltas)| Some((key.clone(), deltas.last()?.object.object().clone())))
            .collect();
        // ...and against the cache, for keys with nothing queued.
        let known_missing: Vec<(ObjectKey, Arc<K>)> = self
            .shared
            .known_objects
            .list_keys()
            .into_iter()
            .filter(|key| !listed.contains(key) && !state.items.contains_key(key))
            .filter_map(|key| {
                let obj = self.shared.known_objects.get_by_key(&key)?;
                Some((key, obj))
            })
            .collect();
        for (key, obj) in queued_missing.into_iter().chain(known_missing) {
            let tombstone = DeletedFinalStateUnknown { key, obj };
            self.queue_action_locked(
                &mut state,
                DeltaType::Deleted,
                DeltaObject::Tombstone(tombstone),
            );
        }
        if !state.populated {
            state.populated = true;
            state.initial_population_count = state.queue.len();
            if state.initial_population_count == 0 {
                self.shared.synced.send_replace(true);
            }
        }
    }

    /// Queues `Sync` for every cached object with no pending deltas (a periodic resync).
    pub fn resync(&self) {
        let mut state = self.lock();
        for obj in self.shared.known_objects.list() {
            let key = ObjectKey::of(obj.as_ref());
            if state
                .items
                .get(&key)
                .is_some_and(|deltas| !deltas.is_empty())
            {
                continue;
            }
            self.queue_action_locked(&mut state, DeltaType::Sync, DeltaObject::Object(obj));
        }
    }

    /// Waits for a key, removes it with its deltas and calls
    /// `process(deltas, is_in_initial_list)` **while holding the FIFO lock**, as client-go
    /// does: a concurrent `replace` then sees the cache and the FIFO consistently (it cannot
    /// miss an object popped but not yet written to the cache). `process` must not block.
    /// Returns `None` once the FIFO is closed.
    pub async fn pop<R>(&self, process: impl FnOnce(Vec<Delta<K>>, bool) -> R) -> Option<R> {
        loop {
            let notified = self.shared.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.lock();
                if state.closed {
                    return None;
                }
                while let Some(key) = state.queue.pop_front() {
                    let is_in_initial_list = !state.has_synced();
                    if state.initial_population_count > 0 {
                        state.initial_population_count -= 1;
                    }
                    let Some(deltas) = state.items.remove(&key) else {
                        continue;
                    };
                    let result = process(deltas, is_in_initial_list);
                    if is_in_initial_list && state.has_synced() {
                        self.shared.synced.send_replace(true);
                    }
                    return Some(result);
                }
            }
            notified.await;
        }
    }

    /// Closes the FIFO: pending and future `pop`s return `None`.
    pub fn close(&self) {
        self.lock().closed = true;
        self.shared.ready.notify_waiters();
    }

    /// True once the first relist has been popped completely.
    pub fn has_synced(&self) -> bool {
        self.lock().has_synced()
    }

    /// A receiver that turns `true` when [`DeltaFifo::has_synced`] does.
    pub fn synced(&self) -> watch::Receiver<bool> {
        self.shared.synced.subscribe()
    }

    /// Keys currently queued, in order (for tests and debugging).
    pub fn queued_keys(&self) -> Vec<ObjectKey> {
        self.lock().queue.iter().cloned().collect()
    }
}

/// Collapses two trailing `Deleted` deltas into one, keeping the one that is not a
/// tombstone (client-go's `dedupDeltas` / `isDeletionDup`).
fn dedup_deltas<K>(deltas: &mut Vec<Delta<K>>) {
    let n = deltas.len();
    if n < 2 || deltas[n - 1].kind != DeltaType::Deleted || deltas[n - 2].kind != DeltaType::Deleted
    {
        return;
    }
    if matches!(deltas[n - 1].object, DeltaObject::Tombstone(_)) {
        deltas.pop();
    } else {
        deltas.remove(n - 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    fn cm(name: &str, rv: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                namespace: Some("default".into()),
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn kinds(deltas: &[Delta<ConfigMap>]) -> Vec<DeltaType> {
        deltas.iter().map(|d| d.kind).collect()
    }

    async fn pop_all(fifo: &DeltaFifo<ConfigMap>) -> Vec<(String, Vec<DeltaType>, bool)> {
        let mut out = Vec::new();
        while let Some(Some(entry)) = fifo
            .pop(|deltas, initial| (deltas[0].object.key().to_string(), kinds(&deltas), initial))
            .now_or_never()
        {
            out.push(entry);
        }
        out
    }

    #[tokio::test]
    async fn accumulates_deltas_per_key_in_fifo_order() {
        let fifo = DeltaFifo::new(Indexer::new());
        fifo.add(cm("a", "1"));
        fifo.add(cm("b", "2"));
        fifo.update(cm("a", "3"));
        fifo.delete(cm("a", "3"));
        fifo.delete(cm("a", "3"));
        let popped = pop_all(&fifo).await;
        use DeltaType::*;
        assert_eq!(popped[0].0, "default/a");
        assert_eq!(
            popped[0].1,
            vec![Added, Updated, Deleted],
            "trailing deletes deduped"
        );
        assert_eq!(popped[1].1, vec![Added]);
        assert_eq!(popped.len(), 2);
    }

    #[test]
    fn dedup_keeps_the_full_object_over_the_tombstone() {
        let obj = cm("a", "1");
        let mut deltas = vec![
            Delta {
                kind: DeltaType::Deleted,
                object: DeltaObject::Object(obj.clone()),
            },
            Delta {
                kind: DeltaType::Deleted,
                object: DeltaObject::Tombstone(DeletedFinalStateUnknown {
                    key: ObjectKey::of(obj.as_ref()),
                    obj: obj.clone(),
                }),
            },
        ];
        dedup_deltas(&mut deltas);
        assert_eq!(deltas.len(), 1);
        assert!(!deltas[0].object.is_tombstone());
    }

    #[tokio::test]
    async fn delete_of_unknown_object_is_ignored() {
        let fifo = DeltaFifo::new(Indexer::new());
        fifo.delete(cm("ghost", "1"));
        assert!(fifo.queued_keys().is_empty());
    }

    #[tokio::test]
    async fn replace_emits_tombstones_for_missing_keys_and_tracks_initial_population() {
        let cache = Indexer::new();
        cache.add(cm("kept", "1"));
        cache.add(cm("gone-from-cache", "2"));
        let fifo = DeltaFifo::new(cache.clone());
        let mut synced = fifo.synced();
        fifo.replace(vec![cm("kept", "1"), cm("new", "5")]);
        assert!(!fifo.has_synced());

        let mut tombstones = Vec::new();
        let mut initial_flags = Vec::new();
        for _ in 0..3 {
            fifo.pop(|deltas, initial| {
                initial_flags.push(initial);
                for d in deltas {
                    if let DeltaObject::Tombstone(t) = &d.object {
                        assert_eq!(d.kind, DeltaType::Deleted);
                        tombstones
                            .push((t.key.to_string(), t.obj.metadata.resource_version.clone()));
                    }
                }
            })
            .now_or_never()
            .expect("three keys are queued");
        }
        assert_eq!(
            tombstones,
            vec![("default/gone-from-cache".to_string(), Some("2".to_string()))]
        );
        assert_eq!(initial_flags, vec![true, true, true]);
        assert!(fifo.has_synced());
        assert!(*synced.borrow_and_update());
    }

    #[tokio::test]
    async fn replace_tombstones_queued_but_unlisted_objects() {
        let fifo = DeltaFifo::new(Indexer::new());
        fifo.add(cm("queued", "3"));
        fifo.replace(vec![]);
        let popped = pop_all(&fifo).await;
        assert_eq!(
            popped,
            vec![(
                "default/queued".to_string(),
                vec![DeltaType::Added, DeltaType::Deleted],
                false
            )]
        );
    }

    #[tokio::test]
    async fn resync_syncs_only_keys_without_pending_deltas() {
        let cache = Indexer::new();
        cache.add(cm("idle", "1"));
        cache.add(cm("busy", "2"));
        let fifo = DeltaFifo::new(cache);
        fifo.update(cm("busy", "3"));
        fifo.resync();
        let mut popped = pop_all(&fifo).await;
        popped.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(popped[0].0, "default/busy");
        assert_eq!(popped[0].1, vec![DeltaType::Updated]);
        assert_eq!(popped[1].0, "default/idle");
        assert_eq!(popped[1].1, vec![DeltaType::Sync]);
    }

    #[tokio::test]
    async fn close_ends_pop() {
        let fifo: DeltaFifo<ConfigMap> = DeltaFifo::new(Indexer::new());
        fifo.close();
        assert!(fifo.pop(|_, _| ()).await.is_none());
    }
}
