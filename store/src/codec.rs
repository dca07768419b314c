//! Byte encodings of everything the store writes to disk: WAL records and sled keys/values.
//!
//! etcd keeps these in protobuf (`api/mvccpb/kv.proto`, `server/storage/wal/walpb/record.proto`)
//! and encodes bbolt keys as revisions (`server/storage/mvcc/revision.go`). Here they are small
//! hand-written big-/little-endian layouts, so there is no schema compiler:
//!
//! ```text
//! sled `revs`  rev u64 BE                           -> the WAL payload of that revision's write
//!                                                      (minus changes compaction dropped)
//! WAL payload  1 | rev u64 | n u32 | n × Change      (a write, one revision)
//!              2 | compact_rev u64                  (a compaction)
//! Change       kind u8 | create u64 | version u64 | prev_mod u64 | klen u32 | key | vlen u32 | value
//! sled `meta`  "compacted"                          -> rev u64 LE
//!
//! Written by miniplane before the `revs` tree (read once, to migrate them; `kvstore.rs`):
//! sled `index` escape(key) 00 00 | rev u64 BE       -> Record (every kept version/tombstone)
//! sled `log`   rev u64 BE | sub u32 BE              -> prev_mod_rev u64 LE | key
//! Record       kind u8 | create u64 | mod u64 | version u64 | value        (LE integers)
//! ```
//!
//! `escape` writes every 0x00 byte of a key as `00 FF` and ends the key with `00 00`; that keeps the
//! byte order of keys and lets the revision follow the key without ambiguity. Anything that
//! does not decode is [`Error::Corrupt`].

use crate::{Error, Event, EventKind, KeyValue, Result, Revision};
use bytes::Bytes;

const KIND_PUT: u8 = 1;
const KIND_DELETE: u8 = 2;
const WAL_WRITE: u8 = 1;
const WAL_COMPACT: u8 = 2;

fn corrupt(what: &str) -> Error {
    Error::Corrupt(what.to_string())
}

/// A cursor over bytes read from disk; every read is bounds-checked.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() < n {
            return Err(corrupt("record is truncated"));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }

    fn bytes(&mut self) -> Result<Bytes> {
        let n = self.u32()? as usize;
        Ok(Bytes::copy_from_slice(self.take(n)?))
    }
}

fn kind_byte(kind: EventKind) -> u8 {
    match kind {
        EventKind::Put => KIND_PUT,
        EventKind::Delete => KIND_DELETE,
    }
}

fn kind_of(b: u8) -> Result<EventKind> {
    match b {
        KIND_PUT => Ok(EventKind::Put),
        KIND_DELETE => Ok(EventKind::Delete),
        _ => Err(corrupt("unknown event kind")),
    }
}

/// One key's change in a write, as logged in the WAL and stored in sled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    /// Put or delete.
    pub kind: EventKind,
    /// The key.
    pub key: Bytes,
    /// The new value (empty for a delete).
    pub value: Bytes,
    /// The key's create revision after the change (zero for a delete).
    pub create: Revision,
    /// The key's version after the change (zero for a delete).
    pub version: u64,
    /// `mod_revision` of the version this change replaced (zero if the key was absent).
    pub prev_mod: Revision,
}

impl Change {
    /// The change an evaluated event describes.
    pub(crate) fn from_event(e: &Event) -> Self {
        Change {
            kind: e.kind,
            key: e.kv.key.clone(),
            value: e.kv.value.clone(),
            create: e.kv.create_revision,
            version: e.kv.version,
            prev_mod: e
                .prev_kv
                .as_ref()
                .map_or(Revision::ZERO, |p| p.mod_revision),
        }
    }
}

/// A decoded WAL payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WalEntry {
    /// A write that produced revision `rev`.
    Write {
        /// The write's revision.
        rev: Revision,
        /// Its changes.
        changes: Vec<Change>,
    },
    /// A compaction to `rev`.
    Compact {
        /// The new compaction point.
        rev: Revision,
    },
}

/// Appends the WAL payload of a write to `out`.
pub(crate) fn encode_write(out: &mut Vec<u8>, rev: Revision, events: &[Event]) {
    out.push(WAL_WRITE);
    out.extend_from_slice(&rev.0.to_le_bytes());
    out.extend_from_slice(&(events.len() as u32).to_le_bytes());
    for e in events {
        let prev = e
            .prev_kv
            .as_ref()
            .map_or(Revision::ZERO, |p| p.mod_revision);
        let kv = &e.kv;
        encode_change(
            out,
            e.kind,
            kv.create_revision,
            kv.version,
            prev,
            &kv.key,
            &kv.value,
        );
    }
}

/// Appends one `Change` (see the module's table).
fn encode_change(
    out: &mut Vec<u8>,
    kind: EventKind,
    create: Revision,
    version: u64,
    prev_mod: Revision,
    key: &[u8],
    value: &[u8],
) {
    out.push(kind_byte(kind));
    out.extend_from_slice(&create.0.to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&prev_mod.0.to_le_bytes());
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(value);
}

/// Encodes the changes of revision `rev` for the sled `revs` tree: the layout of a WAL write.
pub(crate) fn encode_changes(rev: Revision, changes: &[Change]) -> Vec<u8> {
    let size: usize = changes
        .iter()
        .map(|c| 33 + c.key.len() + c.value.len())
        .sum();
    let mut out = Vec::with_capacity(13 + size);
    out.push(WAL_WRITE);
    out.extend_from_slice(&rev.0.to_le_bytes());
    out.extend_from_slice(&(changes.len() as u32).to_le_bytes());
    for c in changes {
        encode_change(
            &mut out, c.kind, c.create, c.version, c.prev_mod, &c.key, &c.value,
        );
    }
    out
}

/// Decodes a value of the sled `revs` tree written by [`encode_changes`].
pub(crate) fn decode_changes(buf: &[u8]) -> Result<(Revision, Vec<Change>)> {
    match decode_wal(buf)? {
        WalEntry::Write { rev, changes } => Ok((rev, changes)),
        WalEntry::Compact { .. } => Err(corrupt("a compaction record among revisions")),
    }
}

/// The sled `revs` key of revision `rev` (big-endian, so keys sort by revision).
pub(crate) fn rev_key(rev: Revision) -> [u8; 8] {
    rev.0.to_be_bytes()
}

/// Appends the WAL payload of a compaction to `out`.
pub(crate) fn encode_compact(out: &mut Vec<u8>, rev: Revision) {
    out.push(WAL_COMPACT);
    out.extend_from_slice(&rev.0.to_le_bytes());
}

/// Decodes one WAL payload.
pub(crate) fn decode_wal(payload: &[u8]) -> Result<WalEntry> {
    let mut r = Reader { buf: payload };
    match r.u8()? {
        WAL_WRITE => {
            let rev = Revision(r.u64()?);
            let n = r.u32()? as usize;
            let mut changes = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                let kind = kind_of(r.u8()?)?;
                let create = Revision(r.u64()?);
                let version = r.u64()?;
                let prev_mod = Revision(r.u64()?);
                let key = r.bytes()?;
                let value = r.bytes()?;
                changes.push(Change {
                    kind,
                    key,
                    value,
                    create,
                    version,
                    prev_mod,
                });
            }
            Ok(WalEntry::Write { rev, changes })
        }
        WAL_COMPACT => Ok(WalEntry::Compact {
            rev: Revision(r.u64()?),
        }),
        _ => Err(corrupt("unknown WAL record type")),
    }
}

/// Encodes a version as the `index` tree of the earlier layout stored it (tests of the
/// migration write that layout).
#[cfg(test)]
pub(crate) fn encode_record(c: &Change, rev: Revision) -> Vec<u8> {
    let mut out = Vec::with_capacity(25 + c.value.len());
    out.push(kind_byte(c.kind));
    out.extend_from_slice(&c.create.0.to_le_bytes());
    out.extend_from_slice(&rev.0.to_le_bytes());
    out.extend_from_slice(&c.version.to_le_bytes());
    out.extend_from_slice(&c.value);
    out
}

/// Decodes a version of `key` stored in the earlier layout's `index` tree.
pub(crate) fn decode_record(key: &Bytes, buf: &[u8]) -> Result<(EventKind, KeyValue)> {
    let mut r = Reader { buf };
    let kind = kind_of(r.u8()?)?;
    let create_revision = Revision(r.u64()?);
    let mod_revision = Revision(r.u64()?);
    let version = r.u64()?;
    Ok((
        kind,
        KeyValue {
            key: key.clone(),
            value: Bytes::copy_from_slice(r.buf),
            create_revision,
            mod_revision,
            version,
        },
    ))
}

/// Appends the order-preserving escape of `key` (without the terminator) to `out`.
pub(crate) fn escape_into(out: &mut Vec<u8>, key: &[u8]) {
    for &b in key {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
}

/// The earlier layout's `index` key of `key` at `rev`.
pub(crate) fn index_key(key: &[u8], rev: Revision) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 10);
    escape_into(&mut out, key);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&rev.0.to_be_bytes());
    out
}

/// Splits an earlier layout's `index` key into the user key and the revision.
pub(crate) fn decode_index_key(buf: &[u8]) -> Result<(Bytes, Revision)> {
    let mut key = Vec::with_capacity(buf.len());
    let mut i = 0;
    while i + 1 < buf.len() {
        match (buf[i], buf[i + 1]) {
            (0, 0) => {
                let rest = &buf[i + 2..];
                let rev: [u8; 8] = rest
                    .try_into()
                    .map_err(|_| corrupt("index key without revision"))?;
                return Ok((Bytes::from(key), Revision(u64::from_be_bytes(rev))));
            }
            (0, 0xFF) => {
                key.push(0);
                i += 2;
            }
            (0, _) => return Err(corrupt("bad escape in index key")),
            (b, _) => {
                key.push(b);
                i += 1;
            }
        }
    }
    Err(corrupt("unterminated index key"))
}

/// The earlier layout's `log` key of the `sub`-th change of revision `rev` (tests of the
/// migration write that layout).
#[cfg(test)]
pub(crate) fn log_key(rev: Revision, sub: u32) -> [u8; 12] {
    let mut out = [0u8; 12];
    out[..8].copy_from_slice(&rev.0.to_be_bytes());
    out[8..].copy_from_slice(&sub.to_be_bytes());
    out
}

/// The revision of an earlier layout's `log` key.
pub(crate) fn decode_log_key(buf: &[u8]) -> Result<Revision> {
    let rev: [u8; 8] = buf
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| corrupt("short log key"))?;
    Ok(Revision(u64::from_be_bytes(rev)))
}

/// The earlier layout's `log` value: the replaced version's revision and the key (tests of the
/// migration write that layout).
#[cfg(test)]
pub(crate) fn encode_log_value(prev_mod: Revision, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + key.len());
    out.extend_from_slice(&prev_mod.0.to_le_bytes());
    out.extend_from_slice(key);
    out
}

/// Splits an earlier layout's `log` value into the replaced version's revision and the key.
pub(crate) fn decode_log_value(buf: &[u8]) -> Result<(Revision, Bytes)> {
    let mut r = Reader { buf };
    let prev = Revision(r.u64()?);
    Ok((prev, Bytes::copy_from_slice(r.buf)))
}

/// Encodes a revision for the `meta` tree and the checkpoint file.
pub(crate) fn encode_rev(rev: Revision) -> [u8; 8] {
    rev.0.to_le_bytes()
}

/// Decodes a revision written by [`encode_rev`].
pub(crate) fn decode_rev(buf: &[u8]) -> Result<Revision> {
    let a: [u8; 8] = buf.try_into().map_err(|_| corrupt("bad revision"))?;
    Ok(Revision(u64::from_le_bytes(a)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_keys_keep_key_order_and_round_trip() {
        let keys: [&[u8]; 5] = [b"a", b"a\0", b"a\0b", b"a\x01", b"ab"];
        let encoded: Vec<Vec<u8>> = keys.iter().map(|k| index_key(k, Revision(7))).collect();
        let mut sorted = encoded.clone();
        sorted.sort();
        assert_eq!(encoded, sorted);
        for (k, e) in keys.iter().zip(&encoded) {
            let (key, rev) = decode_index_key(e).unwrap();
            assert_eq!((key.as_ref(), rev), (*k, Revision(7)));
        }
    }

    #[test]
    fn truncated_wal_payload_is_corrupt_not_a_panic() {
        let ev = Event {
            kind: EventKind::Put,
            kv: KeyValue {
                key: Bytes::from_static(b"k"),
                value: Bytes::from_static(b"value"),
                create_revision: Revision(2),
                mod_revision: Revision(2),
                version: 1,
            },
            prev_kv: None,
        };
        let mut buf = Vec::new();
        encode_write(&mut buf, Revision(2), std::slice::from_ref(&ev));
        let WalEntry::Write { rev, changes } = decode_wal(&buf).unwrap() else {
            panic!("expected a write");
        };
        assert_eq!((rev, changes), (Revision(2), vec![Change::from_event(&ev)]));
        for cut in 0..buf.len() {
            assert!(matches!(decode_wal(&buf[..cut]), Err(Error::Corrupt(_))));
        }
    }
}
