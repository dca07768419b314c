//! Reads: single-key gets and prefix ranges with pagination (etcd's `RangeRequest`).

use crate::{KeyValue, Revision};
use bytes::Bytes;

/// Which keys a range or watch covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KeyRange {
    /// Exactly this key.
    Key(Bytes),
    /// Every key that starts with these bytes (an empty prefix is every key).
    Prefix(Bytes),
}

impl KeyRange {
    /// Whether `key` falls in this range.
    pub fn contains(&self, key: &[u8]) -> bool {
        match self {
            KeyRange::Key(k) => k.as_ref() == key,
            KeyRange::Prefix(p) => key.starts_with(p),
        }
    }
}

/// A range read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeRequest {
    /// The keys to read.
    pub range: KeyRange,
    /// Only keys `>= start` (used to continue a paginated list); `None` starts at the beginning.
    pub start: Option<Bytes>,
    /// At most this many keys; `None` or `Some(0)` means no limit.
    pub limit: Option<usize>,
    /// Read as of this revision; `None` reads the latest. Older than the compaction point gives
    /// [`crate::Error::Compacted`], newer than the current one [`crate::Error::FutureRevision`].
    pub revision: Option<Revision>,
}

impl RangeRequest {
    /// Every key under `prefix`, at the latest revision, unpaginated.
    pub fn prefix(prefix: impl Into<Bytes>) -> Self {
        RangeRequest {
            range: KeyRange::Prefix(prefix.into()),
            start: None,
            limit: None,
            revision: None,
        }
    }
}

/// The answer to a [`RangeRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeResponse {
    /// Matching keys in ascending key order.
    pub kvs: Vec<KeyValue>,
    /// Whether more keys matched than `limit` allowed.
    pub more: bool,
    /// How many keys matched in total from `start` on (including those returned).
    pub count: usize,
    /// The revision the read was served at (the store's current revision for latest reads).
    pub revision: Revision,
}

/// The answer to a single-key get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetResponse {
    /// The key's version at the read revision, if it existed then.
    pub kv: Option<KeyValue>,
    /// The revision the read was served at.
    pub revision: Revision,
}

impl KeyRange {
    /// The smallest key a scan must start at to honour both the range and `start`.
    pub(crate) fn scan_start(&self, start: Option<&Bytes>) -> Bytes {
        let lower = match self {
            KeyRange::Key(k) | KeyRange::Prefix(k) => k.clone(),
        };
        match start {
            Some(s) if *s > lower => s.clone(),
            _ => lower,
        }
    }
}

/// Collects one page of a range: keeps the first `limit` keys and counts them all.
pub(crate) struct Page {
    limit: usize,
    kvs: Vec<KeyValue>,
    count: usize,
}

impl Page {
    /// An empty page for a request's `limit` (`None`/0 = unlimited).
    pub(crate) fn new(limit: Option<usize>) -> Self {
        Page {
            limit: limit.filter(|l| *l > 0).unwrap_or(usize::MAX),
            kvs: Vec::new(),
            count: 0,
        }
    }

    /// Adds the next matching key (keys must come in ascending order).
    pub(crate) fn push(&mut self, kv: KeyValue) {
        self.count += 1;
        if self.kvs.len() < self.limit {
            self.kvs.push(kv);
        }
    }

    /// Whether the page holds `limit` keys: later matches are only counted ([`Page::count`]).
    pub(crate) fn is_full(&self) -> bool {
        self.kvs.len() >= self.limit
    }

    /// Counts a matching key past the page's limit without reading its value.
    pub(crate) fn count(&mut self) {
        self.count += 1;
    }

    /// The response, served at `revision`.
    pub(crate) fn finish(self, revision: Revision) -> RangeResponse {
        RangeResponse {
            more: self.count > self.kvs.len(),
            kvs: self.kvs,
            count: self.count,
            revision,
        }
    }
}
