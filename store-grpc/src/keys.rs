//! etcd's key ranges (`key` + `range_end`, as `clientv3` builds them) on the store's
//! [`KeyRange`] (one key, or a prefix): etcd's `v3rpc/key.go` checks and
//! `mvcc/index.go` range forms.
//!
//! | `range_end` | keys | store read |
//! |---|---|---|
//! | empty | `key` only | `Key(key)` |
//! | `"\0"` | every key `>= key` ("from key"; with `key = "\0"` every key) | `Prefix("")` from `key` |
//! | `prefix_end(key)` | every key starting with `key` | `Prefix(key)` |
//! | `<= key` | none | — |
//! | `prefix_end(p)`, `p` a prefix of `key` | the rest of prefix `p` from `key` (a next page) | `Prefix(p)` from `key` |
//! | anything else | `[key, range_end)` | `Prefix(common prefix)` from `key`, cut at `range_end` |

use bytes::Bytes;
use store::{Backend, KeyRange, KeyValue, RangeRequest, Revision};

/// Keys read per store call when a range has to be cut at its end.
const PAGE: usize = 1000;

/// The store read that covers an etcd key range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scan {
    /// `range_end <= key`: no key.
    Empty {
        /// The request's key (a read still checks its revision).
        key: Bytes,
    },
    /// Keys of `range`, from `start` on, below `end` if set.
    Keys {
        /// What the store reads.
        range: KeyRange,
        /// The first key (inclusive), when the range starts after its prefix.
        start: Option<Bytes>,
        /// The first key past the range, when the prefix reaches further.
        end: Option<Bytes>,
    },
}

pub(crate) use store::etcd::prefix_end;

/// The store read for etcd's `key` and `range_end`.
pub(crate) fn plan(key: &[u8], range_end: &[u8]) -> Scan {
    let from = |k: &[u8]| (!k.is_empty()).then(|| Bytes::copy_from_slice(k));
    if range_end.is_empty() {
        return Scan::Keys {
            range: KeyRange::Key(Bytes::copy_from_slice(key)),
            start: None,
            end: None,
        };
    }
    if range_end == [0] {
        return Scan::Keys {
            range: KeyRange::Prefix(Bytes::new()),
            start: from(key),
            end: None,
        };
    }
    if range_end <= key {
        return Scan::Empty {
            key: Bytes::copy_from_slice(key),
        };
    }
    if range_end == prefix_end(key).as_slice() {
        return Scan::Keys {
            range: KeyRange::Prefix(Bytes::copy_from_slice(key)),
            start: None,
            end: None,
        };
    }
    // The rest of a prefix from `key` on (a paginated prefix read's next page: `key` is the
    // last key read plus `\0`, `range_end` the prefix's end): the store reads it from
    // `key` with no end to cut at, so the page and its count come in one store read.
    if let Some(len) = (0..key.len())
        .rev()
        .find(|&l| prefix_end(&key[..l]) == range_end)
    {
        return Scan::Keys {
            range: KeyRange::Prefix(Bytes::copy_from_slice(&key[..len])),
            start: from(key),
            end: None,
        };
    }
    let common = key
        .iter()
        .zip(range_end)
        .take_while(|(a, b)| a == b)
        .count();
    Scan::Keys {
        range: KeyRange::Prefix(Bytes::copy_from_slice(&key[..common])),
        start: from(key),
        end: Some(Bytes::copy_from_slice(range_end)),
    }
}

impl Scan {
    /// Whether `key` is in the range (for watch events).
    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        match self {
            Scan::Empty { .. } => false,
            Scan::Keys { range, start, end } => {
                range.contains(key)
                    && start.as_ref().is_none_or(|s| key >= s.as_ref())
                    && end.as_ref().is_none_or(|e| key < e.as_ref())
            }
        }
    }

    /// The store range a watch on this scan covers (events are then filtered by
    /// [`Scan::contains`]).
    pub(crate) fn watch_range(&self) -> KeyRange {
        match self {
            Scan::Empty { key } => KeyRange::Key(key.clone()),
            Scan::Keys { range, .. } => range.clone(),
        }
    }
}

/// The keys of one range read, before sorting and filtering.
#[derive(Debug, Default)]
pub(crate) struct Read {
    /// Matching keys in key order (at most `limit`).
    pub(crate) kvs: Vec<KeyValue>,
    /// Whether more keys matched than `limit`.
    pub(crate) more: bool,
    /// How many keys matched.
    pub(crate) count: usize,
    /// The revision the read was served at.
    pub(crate) revision: Revision,
}

/// Reads a scan at `revision` (`None`: latest), at most `limit` keys (`None`: all).
pub(crate) async fn read(
    backend: &dyn Backend,
    scan: &Scan,
    revision: Option<Revision>,
    limit: Option<usize>,
) -> store::Result<Read> {
    let (range, start, end) = match scan {
        Scan::Empty { key } => {
            // Nothing matches, but a bad revision is still an error.
            let got = backend.get(key, revision).await?;
            return Ok(Read {
                revision: got.revision,
                ..Read::default()
            });
        }
        Scan::Keys { range, start, end } => (range, start, end),
    };
    let Some(end) = end else {
        let r = backend
            .range(RangeRequest {
                range: range.clone(),
                start: start.clone(),
                limit,
                revision,
            })
            .await?;
        return Ok(Read {
            kvs: r.kvs,
            more: r.more,
            count: r.count,
            revision: r.revision,
        });
    };
    // A range cut at `end`: read pages until a key reaches it (all at one revision).
    let mut out = Read::default();
    let mut next = start.clone();
    let mut at = revision;
    loop {
        let page = backend
            .range(RangeRequest {
                range: range.clone(),
                start: next.clone(),
                limit: Some(PAGE),
                revision: at,
            })
            .await?;
        at = Some(page.revision);
        out.revision = page.revision;
        let mut past_end = false;
        let mut last = None;
        for kv in page.kvs {
            if kv.key.as_ref() >= end.as_ref() {
                past_end = true;
                break;
            }
            last = Some(kv.key.clone());
            out.count += 1;
            if limit.is_none_or(|l| out.kvs.len() < l) {
                out.kvs.push(kv);
            } else {
                out.more = true;
            }
        }
        if let Some(last) = last {
            let mut after = last.to_vec();
            after.push(0);
            next = Some(Bytes::from(after));
        }
        if past_end || !page.more {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(range: KeyRange, start: Option<&str>, end: Option<&str>) -> Scan {
        Scan::Keys {
            range,
            start: start.map(|s| Bytes::copy_from_slice(s.as_bytes())),
            end: end.map(|s| Bytes::copy_from_slice(s.as_bytes())),
        }
    }

    #[test]
    fn prefix_end_increments_the_last_byte_below_0xff() {
        assert_eq!(prefix_end(b"/registry/"), b"/registry0");
        assert_eq!(prefix_end(b"a\xff\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), b"\0");
        assert_eq!(prefix_end(b""), b"\0");
    }

    #[test]
    fn the_four_range_end_forms() {
        assert_eq!(
            plan(b"/a", b""),
            keys(KeyRange::Key(Bytes::from_static(b"/a")), None, None)
        );
        assert_eq!(
            plan(b"/a", b"\0"),
            keys(KeyRange::Prefix(Bytes::new()), Some("/a"), None)
        );
        // `etcdctl get --prefix ""` sends key "\0", range_end "\0": every key.
        assert_eq!(
            plan(b"\0", b"\0"),
            keys(KeyRange::Prefix(Bytes::new()), Some("\0"), None)
        );
        assert_eq!(
            plan(b"/registry/", b"/registry0"),
            keys(
                KeyRange::Prefix(Bytes::from_static(b"/registry/")),
                None,
                None
            )
        );
        assert_eq!(
            plan(b"/registry/a", b"/registry/c"),
            keys(
                KeyRange::Prefix(Bytes::from_static(b"/registry/")),
                Some("/registry/a"),
                Some("/registry/c")
            )
        );
        assert!(matches!(plan(b"/b", b"/a"), Scan::Empty { .. }));
        assert!(matches!(plan(b"/b", b"/b"), Scan::Empty { .. }));
        // A prefix's next page: from a key to the prefix's end, no end to cut at.
        assert_eq!(
            plan(b"/registry/pods/default/b\0", b"/registry/pods0"),
            keys(
                KeyRange::Prefix(Bytes::from_static(b"/registry/pods/")),
                Some("/registry/pods/default/b\0"),
                None
            )
        );
    }

    #[test]
    fn contains_follows_the_range() {
        let between = plan(b"b", b"d");
        assert!(!between.contains(b"a"));
        assert!(between.contains(b"b"));
        assert!(between.contains(b"c\xff"));
        assert!(!between.contains(b"d"));
        let from = plan(b"b", b"\0");
        assert!(!from.contains(b"a"));
        assert!(from.contains(b"zzz"));
        let one = plan(b"b", b"");
        assert!(one.contains(b"b"));
        assert!(!one.contains(b"bb"));
        assert!(!plan(b"d", b"b").contains(b"c"));
    }

    #[tokio::test]
    async fn read_cuts_a_range_at_its_end_and_counts_past_the_limit() {
        let backend = store::MemoryBackend::new();
        for k in ["a", "b", "c", "d", "e"] {
            backend
                .put(Bytes::from(k), Bytes::from_static(b"v"))
                .await
                .unwrap();
        }
        let r = read(&backend, &plan(b"b", b"e"), None, Some(2))
            .await
            .unwrap();
        let got: Vec<&[u8]> = r.kvs.iter().map(|kv| kv.key.as_ref()).collect();
        assert_eq!(got, [b"b".as_ref(), b"c"]);
        assert_eq!(r.count, 3);
        assert!(r.more);
        let all = read(&backend, &plan(b"b", b"e"), None, None).await.unwrap();
        assert_eq!(all.kvs.len(), 3);
        assert!(!all.more);
        let none = read(&backend, &plan(b"e", b"b"), None, None).await.unwrap();
        assert_eq!(none.count, 0);
        assert!(
            read(&backend, &plan(b"e", b"b"), Some(Revision(99)), None)
                .await
                .is_err()
        );
    }
}
