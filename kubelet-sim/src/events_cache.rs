//! Event correlation as client-go's recorder does it before writing: the same event repeated
//! becomes one Event whose `count` and `lastTimestamp` are PATCHed, and many similar events
//! (same object and reason, different messages) are folded into one. Mirrors
//! `staging/src/k8s.io/client-go/tools/record/events_cache.go` (`EventCorrelator`,
//! `EventAggregator`, `eventLogger`).
//!
//! ```text
//!   event ─▶ aggregate: key = source, object, type, reason (not the message)
//!            └ 10th distinct message within 10 min ─▶ "(combined from similar events): <msg>",
//!                                                     keyed by the aggregate key from now on
//!         ─▶ observe: key = everything, message included
//!            ├ first time: POST the Event (count 1)
//!            └ seen: PATCH {count: n + 1, lastTimestamp, message} onto the Event created first
//! ```
//!
//! So a crash-looping container's `BackOff` is one Event with a growing count, as
//! `kubectl describe pod` shows it ("x5 over 3m").
//!
//! Unlike client-go: the caches are keyed by 64-bit hashes of those fields (not the strings),
//! hold [`CACHE_ENTRIES`] entries for all simulated nodes together (client-go: an LRU of 4,096
//! per kubelet) and forget the least recently used half at a time; the spam filter
//! (`EventSourceObjectSpamFilter`, a token bucket per object) is not simulated.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// How many distinct messages of similar events are written before they are combined
/// (`defaultAggregateMaxEvents`).
pub const AGGREGATE_MAX_EVENTS: usize = 10;

/// How long similar events are remembered as similar (`defaultAggregateIntervalInSeconds`).
pub const AGGREGATE_INTERVAL: SignedDuration = SignedDuration::from_secs(600);

/// The message prefix of a combined event (`EventAggregatorByReasonMessageFunc`).
pub const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// How many entries each cache keeps (in two generations: the older half is dropped at once).
pub const CACHE_ENTRIES: usize = 16_384;

/// A cache that keeps about `capacity` most recently used entries: two maps, the newer one
/// filled until it holds half the capacity, then the older one dropped.
#[derive(Debug)]
struct Lru<V> {
    new: HashMap<u64, V>,
    old: HashMap<u64, V>,
    capacity: usize,
}

impl<V> Lru<V> {
    fn new(capacity: usize) -> Self {
        Lru {
            new: HashMap::new(),
            old: HashMap::new(),
            capacity: capacity.max(2),
        }
    }

    /// The entry for `key`, made most recently used.
    fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        if let Some(v) = self.old.remove(&key) {
            self.insert(key, v);
        }
        self.new.get_mut(&key)
    }

    fn insert(&mut self, key: u64, value: V) {
        if self.new.len() >= self.capacity / 2 {
            self.old = std::mem::take(&mut self.new);
        }
        self.new.insert(key, value);
    }
}

/// What the aggregator remembers of similar events.
#[derive(Debug)]
struct AggregateRecord {
    /// Hashes of the distinct messages seen.
    messages: HashSet<u64>,
    /// When the last one was seen.
    last: Timestamp,
}

/// What the logger remembers of an event written.
#[derive(Debug, Clone)]
struct Observed {
    name: String,
    count: i32,
    first_timestamp: Option<Time>,
}

/// What to write for one event.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// A new Event: POST it.
    Create(Event),
    /// A repeat: PATCH `count`, `lastTimestamp` and `message` onto the Event named in
    /// `event.metadata.name`; if it is gone, create `event` (which carries the new count).
    Patch(Event),
}

/// client-go's `EventCorrelator` for events of many simulated kubelets.
#[derive(Debug)]
pub struct EventCorrelator {
    aggregate: Lru<AggregateRecord>,
    observed: Lru<Observed>,
}

impl Default for EventCorrelator {
    fn default() -> Self {
        EventCorrelator {
            aggregate: Lru::new(CACHE_ENTRIES),
            observed: Lru::new(CACHE_ENTRIES),
        }
    }
}

fn hash(parts: &[Option<&str>]) -> u64 {
    let mut h = DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

/// `getEventKey` without the message, and the aggregate key (`EventAggregatorByReasonFunc`).
fn keys(e: &Event) -> (u64, u64) {
    let o = &e.involved_object;
    let source = e.source.as_ref();
    let common = [
        source.and_then(|s| s.component.as_deref()),
        source.and_then(|s| s.host.as_deref()),
        o.kind.as_deref(),
        o.namespace.as_deref(),
        o.name.as_deref(),
        o.uid.as_deref(),
        o.api_version.as_deref(),
        e.type_.as_deref(),
        e.reason.as_deref(),
    ];
    let aggregate = hash(&common);
    let mut full = common.to_vec();
    full.push(o.field_path.as_deref());
    full.push(e.message.as_deref());
    (hash(&full), aggregate)
}

impl EventCorrelator {
    /// Decides how to write `event`, which happened at its `lastTimestamp`
    /// (`EventCorrelator.EventCorrelate`).
    pub fn correlate(&mut self, mut event: Event) -> Write {
        let now = event
            .last_timestamp
            .as_ref()
            .map_or(Timestamp::UNIX_EPOCH, |t| t.0);
        let (event_key, aggregate_key) = keys(&event);
        let message = hash(&[event.message.as_deref()]);
        // EventAggregate.
        let record = match self.aggregate.get_mut(aggregate_key) {
            Some(r) if now.duration_since(r.last) <= AGGREGATE_INTERVAL => r,
            _ => {
                self.aggregate.insert(
                    aggregate_key,
                    AggregateRecord {
                        messages: HashSet::new(),
                        last: now,
                    },
                );
                match self.aggregate.get_mut(aggregate_key) {
                    Some(r) => r,
                    None => return Write::Create(event),
                }
            }
        };
        record.messages.insert(message);
        record.last = now;
        let key = if record.messages.len() < AGGREGATE_MAX_EVENTS {
            event_key
        } else {
            // Keep the set from growing past the limit.
            if let Some(any) = record.messages.iter().next().copied() {
                record.messages.remove(&any);
            }
            event.message = Some(format!(
                "{COMBINED_PREFIX}{}",
                event.message.as_deref().unwrap_or_default()
            ));
            aggregate_key
        };
        // eventObserve.
        match self.observed.get_mut(key) {
            Some(seen) => {
                seen.count += 1;
                event.count = Some(seen.count);
                event.first_timestamp = seen.first_timestamp.clone();
                event.metadata.name = Some(seen.name.clone());
                Write::Patch(event)
            }
            None => {
                self.observed.insert(
                    key,
                    Observed {
                        name: event.metadata.name.clone().unwrap_or_default(),
                        count: 1,
                        first_timestamp: event.first_timestamp.clone(),
                    },
                );
                event.count = Some(1);
                Write::Create(event)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EventSource, ObjectReference};

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn event(name: &str, reason: &str, message: &str, at: i64) -> Event {
        Event {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                kind: Some("Pod".into()),
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("uid-1".into()),
                ..Default::default()
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some("Warning".into()),
            first_timestamp: Some(Time(t(at))),
            last_timestamp: Some(Time(t(at))),
            source: Some(EventSource {
                component: Some("kubelet".into()),
                host: Some("node-0".into()),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_repeated_event_is_patched_with_a_growing_count() {
        let mut c = EventCorrelator::default();
        let msg = "Back-off restarting failed container app in pod web_default(uid-1)";
        assert!(
            matches!(c.correlate(event("web.1", "BackOff", msg, 0)), Write::Create(e) if e.count == Some(1))
        );
        for (i, at) in [10, 30].into_iter().enumerate() {
            let Write::Patch(e) = c.correlate(event(&format!("web.{at}"), "BackOff", msg, at))
            else {
                panic!("a repeat is patched");
            };
            assert_eq!(e.metadata.name.as_deref(), Some("web.1"), "the first Event");
            assert_eq!(e.count, Some(i32::try_from(i).unwrap_or(0) + 2));
            assert_eq!(e.first_timestamp, Some(Time(t(0))));
            assert_eq!(e.last_timestamp, Some(Time(t(at))));
        }
        // Another message or another reason is another Event.
        assert!(matches!(
            c.correlate(event("web.2", "BackOff", "other", 40)),
            Write::Create(_)
        ));
        assert!(matches!(
            c.correlate(event("web.3", "Killing", msg, 40)),
            Write::Create(_)
        ));
    }

    #[test]
    fn the_tenth_similar_event_within_ten_minutes_is_combined() {
        let mut c = EventCorrelator::default();
        for i in 0..9 {
            let w = c.correlate(event(&format!("e{i}"), "Unhealthy", &format!("m{i}"), i));
            assert!(matches!(w, Write::Create(_)), "event {i} is written as is");
        }
        let Write::Create(combined) = c.correlate(event("e9", "Unhealthy", "m9", 9)) else {
            panic!("the first combined event is created");
        };
        assert_eq!(
            combined.message.as_deref(),
            Some("(combined from similar events): m9")
        );
        let Write::Patch(again) = c.correlate(event("e10", "Unhealthy", "m10", 10)) else {
            panic!("later similar events update it");
        };
        assert_eq!(again.metadata.name.as_deref(), Some("e9"));
        assert_eq!(again.count, Some(2));
        assert_eq!(
            again.message.as_deref(),
            Some("(combined from similar events): m10")
        );
        // Ten minutes of quiet: similar events are counted afresh.
        let w = c.correlate(event("e11", "Unhealthy", "m11", 10 + 601));
        assert!(matches!(w, Write::Create(e) if e.message.as_deref() == Some("m11")));
    }

    #[test]
    fn the_cache_forgets_the_least_recently_used() {
        let mut lru = Lru::new(4);
        lru.insert(1, "a");
        lru.insert(2, "b");
        lru.insert(3, "c"); // 1 and 2 become old
        assert!(lru.get_mut(1).is_some(), "1 is used again");
        lru.insert(4, "d"); // 3 and 1 become old, 2 is dropped
        assert!(lru.get_mut(2).is_none());
        assert!(lru.get_mut(1).is_some());
        assert!(lru.get_mut(4).is_some());
    }
}
