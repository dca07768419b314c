//! The event spam filter: client-go's `EventSourceObjectSpamFilter`
//! (`tools/record/events_cache.go`).
//!
//! Each (source, involved object) pair gets a token bucket of [`SPAM_BURST`] tokens refilled
//! at one per [`SPAM_REFILL`]; an event that finds its bucket empty is skipped, not written.
//! A ReplicaSet controller creating 10,000 pods therefore writes ~25 `SuccessfulCreate`
//! events about that ReplicaSet, not 10,000 — as in Kubernetes, where the rest never reach
//! the API server:
//!
//! ```text
//!   key = component + host + kind + namespace + name + uid + apiVersion   (getSpamKey)
//!   bucket(key): 25 tokens, +1 every 5 min
//!   event ─▶ take a token? ── yes ─▶ write (create or patch)
//!                          └─ no ──▶ skip
//! ```
//!
//! The buckets live in a bounded cache like client-go's LRU of 4096 entries: a key pushed
//! out starts again with a full bucket.

use std::time::Duration;

use tokio::time::Instant;

use k8s_openapi::api::core::v1::Event;

use crate::clock::SharedClock;
use crate::events::BoundedCache;

/// client-go's `defaultSpamBurst`: events a source may write about one object at once.
pub const SPAM_BURST: f64 = 25.0;
/// client-go's `defaultSpamQPS` (1/300): one more token every five minutes.
pub const SPAM_REFILL: Duration = Duration::from_secs(300);

/// One key's token bucket (`spamRecord`).
struct Bucket {
    tokens: f64,
    refilled_at: Instant,
}

/// Skips events from a source about an object beyond its token bucket.
pub struct SpamFilter {
    clock: SharedClock,
    buckets: BoundedCache<Bucket>,
}

/// `getSpamKey`: the source and the involved object, not the reason or message.
pub fn spam_key(event: &Event) -> String {
    let source = event.source.clone().unwrap_or_default();
    let obj = &event.involved_object;
    [
        source.component.as_deref(),
        source.host.as_deref(),
        obj.kind.as_deref(),
        obj.namespace.as_deref(),
        obj.name.as_deref(),
        obj.uid.as_deref(),
        obj.api_version.as_deref(),
    ]
    .map(|part| part.unwrap_or(""))
    .join("\u{0}")
}

impl SpamFilter {
    /// Full buckets for every key, on `clock`.
    pub fn new(clock: SharedClock) -> Self {
        SpamFilter {
            clock,
            buckets: BoundedCache::new(),
        }
    }

    /// `Filter`: true if `event` must be skipped (its bucket is empty); takes a token if not.
    pub fn skip(&mut self, event: &Event) -> bool {
        let now = self.clock.now();
        let bucket = self.buckets.get_or_insert_with(spam_key(event), || Bucket {
            tokens: SPAM_BURST,
            refilled_at: now,
        });
        let elapsed = now.saturating_duration_since(bucket.refilled_at);
        bucket.tokens =
            (bucket.tokens + elapsed.as_secs_f64() / SPAM_REFILL.as_secs_f64()).min(SPAM_BURST);
        bucket.refilled_at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            false
        } else {
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;
    use k8s_openapi::api::core::v1::{EventSource, ObjectReference};

    fn event(object: &str, reason: &str) -> Event {
        Event {
            involved_object: ObjectReference {
                kind: Some("ReplicaSet".into()),
                namespace: Some("default".into()),
                name: Some(object.into()),
                uid: Some(format!("uid-{object}")),
                api_version: Some("apps/v1".into()),
                ..Default::default()
            },
            reason: Some(reason.into()),
            source: Some(EventSource {
                component: Some("replicaset-controller".into()),
                host: None,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_burst_of_25_per_source_and_object_then_one_per_five_minutes() {
        let clock = FakeClock::new();
        let mut filter = SpamFilter::new(clock.shared());
        let written = (0..100)
            .filter(|_| !filter.skip(&event("web", "SuccessfulCreate")))
            .count();
        assert_eq!(written, 25);
        // Another reason about the same object shares the bucket; another object does not.
        assert!(filter.skip(&event("web", "SuccessfulDelete")));
        assert!(!filter.skip(&event("api", "SuccessfulCreate")));
        // Refill: one token after five minutes, not before.
        clock.advance(SPAM_REFILL - Duration::from_secs(1));
        assert!(filter.skip(&event("web", "SuccessfulCreate")));
        clock.advance(Duration::from_secs(1));
        assert!(!filter.skip(&event("web", "SuccessfulCreate")));
        assert!(filter.skip(&event("web", "SuccessfulCreate")));
    }
}
