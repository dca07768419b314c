//! How a watch's ready events are packed into `WatchResponse`s: every event already waiting
//! for the watch goes out in one response, whole revisions only, up to a bound; a single
//! revision over the byte bound is sent alone, in fragments if the watch asked for them.
//!
//! This mirrors etcd's `eventBatch` (`server/storage/mvcc/watcher_group.go`: at most
//! `watchBatchMaxRevs` = 1000 revisions a response, a revision never split between two) and
//! `sendFragments` (`server/etcdserver/api/v3rpc/watch.go`: a response of a watch created with
//! `fragment` is cut, event by event, into parts under `--max-request-bytes`, every part but
//! the last marked `fragment`).
//!
//! Simplified: the byte bound is counted on the events' encoded size (the response's header
//! and framing, a few dozen bytes, are not counted), and it applies to every watch: etcd bounds
//! only catching-up watches by revisions and sends a live watch one response per revision;
//! here a live watch that has fallen behind gets its waiting revisions in one response too.

use crate::wire::Event;

/// etcd's `watchBatchMaxRevs`: the most revisions one response carries.
pub(crate) const MAX_REVISIONS: usize = 1000;
/// The most bytes of events one response carries (etcd's default `--max-request-bytes`,
/// 1.5 MiB, the size from which it fragments a response); a single revision may exceed it.
pub(crate) const MAX_BYTES: usize = 3 * 512 * 1024;

/// The events of one response, and whether more fragments of its revision follow.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Part {
    /// The events, in revision order.
    pub(crate) events: Vec<Event>,
    /// More events of the same revision follow in the next response (etcd's `fragment`).
    pub(crate) fragment: bool,
}

/// Events gathered for one watch, in revision order, until [`Batch::full`].
#[derive(Debug, Default)]
pub(crate) struct Batch {
    events: Vec<Event>,
    bytes: usize,
    revisions: usize,
}

/// The revision of an event.
fn revision(e: &Event) -> i64 {
    e.revision()
}

/// An event's size in a response: its encoding and its field's tag and length.
fn size(e: &Event) -> usize {
    prost::encoding::message::encoded_len(11, e)
}

impl Batch {
    /// Adds an event; events come in revision order.
    pub(crate) fn push(&mut self, e: Event) {
        if self.events.last().map(revision) != Some(revision(&e)) {
            self.revisions += 1;
        }
        self.bytes += size(&e);
        self.events.push(e);
    }

    /// Nothing gathered.
    pub(crate) fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Enough for a response: no more events should be gathered before sending.
    pub(crate) fn full(&self) -> bool {
        self.revisions >= MAX_REVISIONS || self.bytes >= MAX_BYTES
    }

    /// The responses' events: whole revisions, at most [`MAX_REVISIONS`] and [`MAX_BYTES`]
    /// each, in order. A revision larger than [`MAX_BYTES`] is a response of its own, cut into
    /// fragments when `fragment` (as etcd, at least one event each).
    pub(crate) fn into_parts(self, fragment: bool) -> Vec<Part> {
        if self.revisions <= MAX_REVISIONS && self.bytes <= MAX_BYTES {
            // Within both bounds (the usual case): one response as gathered.
            return vec![Part {
                events: self.events,
                fragment: false,
            }];
        }
        let mut parts = Vec::new();
        let mut current = Part::default();
        let (mut bytes, mut revisions) = (0, 0);
        let mut events = self.events.into_iter().peekable();
        while let Some(first) = events.next() {
            // One revision's events.
            let rev = revision(&first);
            let mut group = vec![first];
            while let Some(e) = events.next_if(|e| revision(e) == rev) {
                group.push(e);
            }
            let group_bytes: usize = group.iter().map(size).sum();
            if !current.events.is_empty()
                && (revisions + 1 > MAX_REVISIONS || bytes + group_bytes > MAX_BYTES)
            {
                parts.push(std::mem::take(&mut current));
                (bytes, revisions) = (0, 0);
            }
            if fragment && group_bytes > MAX_BYTES && group.len() > 1 {
                if !current.events.is_empty() {
                    parts.push(std::mem::take(&mut current));
                }
                parts.extend(fragments(group));
                (bytes, revisions) = (0, 0);
                continue;
            }
            current.events.extend(group);
            bytes += group_bytes;
            revisions += 1;
        }
        if !current.events.is_empty() {
            parts.push(current);
        }
        parts
    }
}

/// One revision's events cut into parts under [`MAX_BYTES`] (at least one event each), every
/// part but the last marked `fragment`.
fn fragments(group: Vec<Event>) -> Vec<Part> {
    let mut parts: Vec<Part> = Vec::new();
    let mut current = Part::default();
    let mut bytes = 0;
    for e in group {
        let n = size(&e);
        if !current.events.is_empty() && bytes + n >= MAX_BYTES {
            current.fragment = true;
            parts.push(std::mem::take(&mut current));
            bytes = 0;
        }
        bytes += n;
        current.events.push(e);
    }
    parts.push(current);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(key: &str, rev: i64, value_len: usize) -> Event {
        let kv = crate::wire::KeyValue {
            key: bytes::Bytes::copy_from_slice(key.as_bytes()),
            mod_revision: rev,
            create_revision: rev,
            version: 1,
            value: bytes::Bytes::from(vec![b'v'; value_len]),
            lease: 0,
        };
        Event::new(0, kv, None)
    }

    fn batch(events: impl IntoIterator<Item = Event>) -> Batch {
        let mut b = Batch::default();
        for e in events {
            b.push(e);
        }
        b
    }

    /// (key, revision) of every event of every part, part by part.
    fn layout(parts: &[Part]) -> Vec<Vec<(String, i64)>> {
        parts
            .iter()
            .map(|p| {
                p.events
                    .iter()
                    .map(|e| {
                        let key = String::from_utf8(e.kv().key.to_vec()).unwrap();
                        (key, e.revision())
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn ready_events_of_several_revisions_go_out_in_one_response() {
        let b = batch([event("a", 5, 10), event("b", 5, 10), event("c", 6, 10)]);
        assert!(!b.full());
        let parts = b.into_parts(false);
        assert_eq!(
            layout(&parts),
            [vec![("a".into(), 5), ("b".into(), 5), ("c".into(), 6)]]
        );
        assert!(!parts[0].fragment);
    }

    #[test]
    fn a_response_holds_at_most_max_revisions_and_never_splits_one() {
        // MAX_REVISIONS + 1 revisions, the last of them with two events.
        let mut events: Vec<_> = (1..=MAX_REVISIONS as i64)
            .map(|r| event(&format!("k{r}"), r, 1))
            .collect();
        let last = MAX_REVISIONS as i64 + 1;
        events.push(event("x", last, 1));
        events.push(event("y", last, 1));
        let b = batch(events);
        assert!(b.full());
        let parts = b.into_parts(false);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].events.len(), MAX_REVISIONS);
        assert_eq!(layout(&parts)[1], [("x".into(), last), ("y".into(), last)]);
    }

    #[test]
    fn the_byte_bound_cuts_between_revisions_and_keeps_their_order() {
        // Each event a third of the bound: two revisions of one event, then one of two.
        let third = MAX_BYTES / 3;
        let b = batch([
            event("a", 1, third),
            event("b", 2, third),
            event("c", 3, third),
            event("d", 3, third),
        ]);
        assert!(b.full());
        let parts = b.into_parts(false);
        assert_eq!(
            layout(&parts),
            [
                vec![("a".into(), 1), ("b".into(), 2)],
                vec![("c".into(), 3), ("d".into(), 3)],
            ]
        );
    }

    #[test]
    fn a_revision_over_the_bound_is_fragmented_only_when_asked() {
        let half = MAX_BYTES / 2 + 1;
        let big = || {
            [
                event("p", 1, 1),
                event("a", 2, half),
                event("b", 2, half),
                event("c", 2, half),
            ]
        };
        // Without `fragment`: one response of its own, whatever its size.
        let whole = batch(big()).into_parts(false);
        assert_eq!(layout(&whole).len(), 2);
        assert_eq!(whole[1].events.len(), 3);
        assert!(whole.iter().all(|p| !p.fragment));
        // With it: one event a part here, every part but the last marked.
        let cut = batch(big()).into_parts(true);
        assert_eq!(
            layout(&cut),
            [
                vec![("p".into(), 1)],
                vec![("a".into(), 2)],
                vec![("b".into(), 2)],
                vec![("c".into(), 2)],
            ]
        );
        let marks: Vec<bool> = cut.iter().map(|p| p.fragment).collect();
        assert_eq!(marks, [false, true, true, false]);
    }
}
