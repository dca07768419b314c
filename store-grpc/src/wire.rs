//! The Watch service's answers as they go on the wire: etcd's `WatchResponse`, `mvccpb.Event`
//! and `mvccpb.KeyValue` (`api/etcdserverpb/rpc.proto`, `api/mvccpb/kv.proto`), encoded
//! straight from the store's reference-counted keys and values.
//!
//! The generated `proto` types hold keys and values as `Vec<u8>`: a watch would copy each
//! event's key and value into fresh buffers for every watcher, then copy them again into the
//! gRPC frame. These types keep the store's `Bytes` and write the same protobuf encoding (the
//! same field numbers, proto3's rule of leaving zero values out), so every watcher's copy is
//! the one into its frame. Only encoding is needed: the endpoint never reads these messages.

use crate::proto::etcdserverpb::{self as pb, ResponseHeader};
use crate::proto::mvccpb;
use bytes::{Buf, BufMut, Bytes};
use prost::Message;
use prost::encoding::{self, DecodeContext, WireType};

/// etcd's `mvccpb.KeyValue` over shared bytes.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct KeyValue {
    pub(crate) key: Bytes,
    pub(crate) create_revision: i64,
    pub(crate) mod_revision: i64,
    pub(crate) version: i64,
    pub(crate) value: Bytes,
    pub(crate) lease: i64,
}

impl KeyValue {
    /// A store record, attached to `lease` (0: none).
    pub(crate) fn new(kv: store::KeyValue, lease: i64) -> KeyValue {
        KeyValue {
            key: kv.key,
            create_revision: kv.create_revision.0 as i64,
            mod_revision: kv.mod_revision.0 as i64,
            version: kv.version as i64,
            value: kv.value,
            lease,
        }
    }
}

/// etcd's `mvccpb.Event` over shared bytes, with its encoded sizes (made by [`Event::new`]:
/// a response's encoding asks for them three times over).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Event {
    /// `mvccpb.Event.EventType`: 0 put, 1 delete.
    kind: i32,
    kv: KeyValue,
    prev_kv: Option<KeyValue>,
    /// The encoded sizes of `kv`, of `prev_kv` and of the whole event.
    kv_len: usize,
    prev_len: usize,
    len: usize,
}

impl Event {
    /// An event of `kind` (`mvccpb.Event.EventType`: 0 put, 1 delete).
    pub(crate) fn new(kind: i32, kv: KeyValue, prev_kv: Option<KeyValue>) -> Event {
        let kv_len = kv.encoded_len();
        let prev_len = prev_kv.as_ref().map_or(0, Message::encoded_len);
        let mut len = 1 + encoding::encoded_len_varint(kv_len as u64) + kv_len;
        if kind != 0 {
            len += encoding::int32::encoded_len(1, &kind);
        }
        if prev_kv.is_some() {
            len += 1 + encoding::encoded_len_varint(prev_len as u64) + prev_len;
        }
        Event {
            kind,
            kv,
            prev_kv,
            kv_len,
            prev_len,
            len,
        }
    }

    /// The record changed.
    #[cfg(test)]
    pub(crate) fn kv(&self) -> &KeyValue {
        &self.kv
    }

    /// The revision of the change (a delete's `mod_revision` is the deleting revision).
    pub(crate) fn revision(&self) -> i64 {
        self.kv.mod_revision
    }
}

/// etcd's `WatchResponse`, its events over shared bytes.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct WatchResponse {
    pub(crate) header: Option<ResponseHeader>,
    pub(crate) watch_id: i64,
    pub(crate) created: bool,
    pub(crate) canceled: bool,
    pub(crate) compact_revision: i64,
    pub(crate) cancel_reason: String,
    pub(crate) fragment: bool,
    pub(crate) events: Vec<Event>,
}

impl From<pb::WatchResponse> for WatchResponse {
    /// A response made with the generated type (the control answers: created, canceled,
    /// progress).
    fn from(r: pb::WatchResponse) -> WatchResponse {
        let kv = |kv: mvccpb::KeyValue| KeyValue {
            key: Bytes::from(kv.key),
            create_revision: kv.create_revision,
            mod_revision: kv.mod_revision,
            version: kv.version,
            value: Bytes::from(kv.value),
            lease: kv.lease,
        };
        WatchResponse {
            header: r.header,
            watch_id: r.watch_id,
            created: r.created,
            canceled: r.canceled,
            compact_revision: r.compact_revision,
            cancel_reason: r.cancel_reason,
            fragment: r.fragment,
            events: r
                .events
                .into_iter()
                .map(|e| {
                    Event::new(
                        e.r#type,
                        e.kv.map(kv).unwrap_or_default(),
                        e.prev_kv.map(kv),
                    )
                })
                .collect(),
        }
    }
}

/// Skips every field: these messages are only ever encoded.
fn skip(
    tag: u32,
    wire_type: WireType,
    buf: &mut impl Buf,
    ctx: DecodeContext,
) -> Result<(), prost::DecodeError> {
    encoding::skip_field(wire_type, tag, buf, ctx)
}

impl Message for KeyValue {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        if !self.key.is_empty() {
            encoding::bytes::encode(1, &self.key, buf);
        }
        if self.create_revision != 0 {
            encoding::int64::encode(2, &self.create_revision, buf);
        }
        if self.mod_revision != 0 {
            encoding::int64::encode(3, &self.mod_revision, buf);
        }
        if self.version != 0 {
            encoding::int64::encode(4, &self.version, buf);
        }
        if !self.value.is_empty() {
            encoding::bytes::encode(5, &self.value, buf);
        }
        if self.lease != 0 {
            encoding::int64::encode(6, &self.lease, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        skip(tag, wire_type, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        let mut n = 0;
        if !self.key.is_empty() {
            n += encoding::bytes::encoded_len(1, &self.key);
        }
        if self.create_revision != 0 {
            n += encoding::int64::encoded_len(2, &self.create_revision);
        }
        if self.mod_revision != 0 {
            n += encoding::int64::encoded_len(3, &self.mod_revision);
        }
        if self.version != 0 {
            n += encoding::int64::encoded_len(4, &self.version);
        }
        if !self.value.is_empty() {
            n += encoding::bytes::encoded_len(5, &self.value);
        }
        if self.lease != 0 {
            n += encoding::int64::encoded_len(6, &self.lease);
        }
        n
    }

    fn clear(&mut self) {
        *self = KeyValue::default();
    }
}

impl Message for Event {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        if self.kind != 0 {
            encoding::int32::encode(1, &self.kind, buf);
        }
        encoding::encode_key(2, WireType::LengthDelimited, buf);
        encoding::encode_varint(self.kv_len as u64, buf);
        self.kv.encode_raw(buf);
        if let Some(prev) = &self.prev_kv {
            encoding::encode_key(3, WireType::LengthDelimited, buf);
            encoding::encode_varint(self.prev_len as u64, buf);
            prev.encode_raw(buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        skip(tag, wire_type, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        self.len
    }

    fn clear(&mut self) {
        *self = Event::default();
    }
}

impl Message for WatchResponse {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        if let Some(header) = &self.header {
            encoding::message::encode(1, header, buf);
        }
        if self.watch_id != 0 {
            encoding::int64::encode(2, &self.watch_id, buf);
        }
        if self.created {
            encoding::bool::encode(3, &self.created, buf);
        }
        if self.canceled {
            encoding::bool::encode(4, &self.canceled, buf);
        }
        if self.compact_revision != 0 {
            encoding::int64::encode(5, &self.compact_revision, buf);
        }
        if !self.cancel_reason.is_empty() {
            encoding::string::encode(6, &self.cancel_reason, buf);
        }
        if self.fragment {
            encoding::bool::encode(7, &self.fragment, buf);
        }
        for e in &self.events {
            encoding::message::encode(11, e, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        skip(tag, wire_type, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        let mut n = encoding::message::encoded_len_repeated(11, &self.events);
        if let Some(header) = &self.header {
            n += encoding::message::encoded_len(1, header);
        }
        if self.watch_id != 0 {
            n += encoding::int64::encoded_len(2, &self.watch_id);
        }
        if self.created {
            n += encoding::bool::encoded_len(3, &self.created);
        }
        if self.canceled {
            n += encoding::bool::encoded_len(4, &self.canceled);
        }
        if self.compact_revision != 0 {
            n += encoding::int64::encoded_len(5, &self.compact_revision);
        }
        if !self.cancel_reason.is_empty() {
            n += encoding::string::encoded_len(6, &self.cancel_reason);
        }
        if self.fragment {
            n += encoding::bool::encoded_len(7, &self.fragment);
        }
        n
    }

    fn clear(&mut self) {
        *self = WatchResponse::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, rev: i64, value: &str, lease: i64) -> mvccpb::KeyValue {
        mvccpb::KeyValue {
            key: key.as_bytes().to_vec(),
            create_revision: if value.is_empty() { 0 } else { rev - 1 },
            mod_revision: rev,
            version: i64::from(!value.is_empty()) * 2,
            value: value.as_bytes().to_vec(),
            lease,
        }
    }

    /// Every field, zero and not: the bytes are the generated type's, and decode to it.
    #[test]
    fn encodes_as_the_generated_types_do() {
        let generated = [
            pb::WatchResponse {
                header: Some(ResponseHeader {
                    cluster_id: crate::CLUSTER_ID,
                    member_id: crate::MEMBER_ID,
                    revision: 42,
                    raft_term: 1,
                }),
                watch_id: 7,
                events: vec![
                    mvccpb::Event {
                        r#type: mvccpb::event::EventType::Put as i32,
                        kv: Some(kv("/a", 41, "one", 0x6d70)),
                        prev_kv: Some(kv("/a", 40, "zero", 0)),
                    },
                    mvccpb::Event {
                        r#type: mvccpb::event::EventType::Delete as i32,
                        kv: Some(kv("/b", 42, "", 0)),
                        prev_kv: None,
                    },
                ],
                ..Default::default()
            },
            pb::WatchResponse {
                watch_id: 3,
                created: true,
                canceled: true,
                compact_revision: 9,
                cancel_reason: "etcdserver: mvcc: required revision has been compacted".into(),
                fragment: true,
                ..Default::default()
            },
            pb::WatchResponse::default(),
        ];
        for g in generated {
            let ours = WatchResponse::from(g.clone());
            let bytes = ours.encode_to_vec();
            assert_eq!(ours.encoded_len(), bytes.len());
            assert_eq!(bytes, g.encode_to_vec());
            assert_eq!(pb::WatchResponse::decode(bytes.as_slice()).unwrap(), g);
        }
    }
}
