//! SPDY/3.1 frames: their binary layout, and header blocks compressed with zlib and SPDY's
//! dictionary (one compression context per direction for the whole connection).
//!
//! Mirrors moby/spdystream's `spdy/{types,read,write}.go` (the framer Kubernetes' `httpstream/spdy`
//! uses); the layout is the SPDY Protocol Draft 3.1 specification's, section 2.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use tokio::io::{AsyncRead, AsyncReadExt};

/// The protocol version in every control frame.
pub const VERSION: u16 = 3;
/// FIN: the sender's last frame on the stream.
pub const FLAG_FIN: u8 = 0x01;
/// UNIDIRECTIONAL (SYN_STREAM): the receiver will not reply with data.
pub const FLAG_UNIDIRECTIONAL: u8 = 0x02;
/// Largest frame payload accepted (24-bit length).
pub const MAX_FRAME_LENGTH: usize = 0x00ff_ffff;

/// Headers: name → values (SPDY joins several values of a name with NUL).
pub type Headers = Vec<(String, Vec<String>)>;

/// Value of the first header named `name` (case-insensitively).
pub fn header<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .and_then(|(_, v)| v.first())
        .map(String::as_str)
}

/// One SPDY frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Opens a stream.
    SynStream {
        /// Flags (FIN, UNIDIRECTIONAL).
        flags: u8,
        /// The new stream's id (odd from clients).
        stream_id: u32,
        /// The stream it is associated with, 0 for none.
        associated_to: u32,
        /// Priority 0 (highest) to 7.
        priority: u8,
        /// Credential slot.
        slot: u8,
        /// Its headers.
        headers: Headers,
    },
    /// Accepts a stream.
    SynReply {
        /// Flags (FIN).
        flags: u8,
        /// The stream.
        stream_id: u32,
        /// Reply headers.
        headers: Headers,
    },
    /// Aborts a stream.
    RstStream {
        /// The stream.
        stream_id: u32,
        /// Status code (1 PROTOCOL_ERROR, 3 REFUSED_STREAM, 5 CANCEL, ...).
        status: u32,
    },
    /// Connection settings.
    Settings {
        /// Flags (0x01 CLEAR_SETTINGS).
        flags: u8,
        /// Entries: (flags, id, value).
        entries: Vec<(u8, u32, u32)>,
    },
    /// Liveness check; echoed by the receiver.
    Ping {
        /// Its id.
        id: u32,
    },
    /// The sender is closing the connection.
    GoAway {
        /// The last stream the sender accepted.
        last_good_stream_id: u32,
        /// Status (0 OK, 1 PROTOCOL_ERROR, 2 INTERNAL_ERROR).
        status: u32,
    },
    /// More headers for a stream.
    Headers {
        /// Flags (FIN).
        flags: u8,
        /// The stream.
        stream_id: u32,
        /// The headers.
        headers: Headers,
    },
    /// Flow-control credit.
    WindowUpdate {
        /// The stream.
        stream_id: u32,
        /// Bytes added to the window.
        delta: u32,
    },
    /// Stream data.
    Data {
        /// The stream.
        stream_id: u32,
        /// Flags (FIN).
        flags: u8,
        /// The bytes.
        data: Vec<u8>,
    },
}

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The connection failed or ended mid-frame.
    #[error("spdy connection: {0}")]
    Io(#[from] std::io::Error),
    /// A control frame of another SPDY version.
    #[error("unsupported spdy version {0}")]
    Version(u16),
    /// A malformed frame.
    #[error("invalid spdy frame: {0}")]
    Invalid(&'static str),
    /// The header block did not inflate.
    #[error("spdy header block: {0}")]
    Compression(String),
}

/// Compresses header blocks: one zlib stream for all the frames a side sends.
pub struct HeaderCompressor {
    z: Compress,
}

impl HeaderCompressor {
    /// A fresh context primed with SPDY's dictionary (as spdystream's `NewWriterLevelDict`).
    pub fn new() -> Result<Self, FrameError> {
        let mut z = Compress::new(Compression::best(), true);
        z.set_dictionary(&super::dictionary::dictionary())
            .map_err(|e| FrameError::Compression(e.to_string()))?;
        Ok(Self { z })
    }

    /// Compresses one block, sync-flushed so the peer can inflate it at once.
    pub fn compress(&mut self, block: &[u8]) -> Result<Vec<u8>, FrameError> {
        let mut out = Vec::with_capacity(block.len() + 64);
        let start_in = self.z.total_in();
        loop {
            let consumed = (self.z.total_in() - start_in) as usize;
            if out.capacity() - out.len() < 64 {
                out.reserve(256);
            }
            self.z
                .compress_vec(&block[consumed..], &mut out, FlushCompress::Sync)
                .map_err(|e| FrameError::Compression(e.to_string()))?;
            let done_in = (self.z.total_in() - start_in) as usize == block.len();
            // A sync flush is complete when all input is taken and there was room to spare.
            if done_in && out.len() < out.capacity() {
                return Ok(out);
            }
        }
    }
}

/// Inflates header blocks: one zlib stream for all the frames a side receives.
pub struct HeaderDecompressor {
    z: Decompress,
}

impl Default for HeaderDecompressor {
    fn default() -> Self {
        Self {
            z: Decompress::new(true),
        }
    }
}

impl HeaderDecompressor {
    /// Inflates one block, setting SPDY's dictionary when zlib asks for it.
    pub fn decompress(&mut self, block: &[u8]) -> Result<Vec<u8>, FrameError> {
        let mut out = Vec::with_capacity(block.len() * 4 + 64);
        let start_in = self.z.total_in();
        loop {
            let consumed = (self.z.total_in() - start_in) as usize;
            if out.capacity() - out.len() < 256 {
                out.reserve(1024);
            }
            match self
                .z
                .decompress_vec(&block[consumed..], &mut out, FlushDecompress::Sync)
            {
                Ok(Status::Ok | Status::BufError | Status::StreamEnd) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.z
                        .set_dictionary(&super::dictionary::dictionary())
                        .map_err(|e| FrameError::Compression(e.to_string()))?;
                    continue;
                }
                Err(e) => return Err(FrameError::Compression(e.to_string())),
            }
            let consumed = (self.z.total_in() - start_in) as usize;
            if consumed == block.len() && out.len() < out.capacity() {
                return Ok(out);
            }
            if consumed == block.len() && out.len() == out.capacity() {
                continue;
            }
            if consumed < block.len() && out.len() < out.capacity() {
                return Err(FrameError::Compression("stalled".into()));
            }
        }
    }
}

fn encode_header_block(headers: &Headers) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(headers.len() as u32).to_be_bytes());
    for (name, values) in headers {
        let name = name.to_ascii_lowercase();
        let value = values.join("\0");
        out.extend_from_slice(&(name.len() as u32).to_be_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(value.len() as u32).to_be_bytes());
        out.extend_from_slice(value.as_bytes());
    }
    out
}

fn take<'a>(buf: &mut &'a [u8], n: usize) -> Result<&'a [u8], FrameError> {
    if buf.len() < n {
        return Err(FrameError::Invalid("short frame"));
    }
    let (head, rest) = buf.split_at(n);
    *buf = rest;
    Ok(head)
}

fn u32_at(buf: &mut &[u8]) -> Result<u32, FrameError> {
    let b = take(buf, 4)?;
    Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn decode_header_block(mut buf: &[u8]) -> Result<Headers, FrameError> {
    let count = u32_at(&mut buf)? as usize;
    let mut headers = Vec::with_capacity(count.min(64));
    for _ in 0..count {
        let n = u32_at(&mut buf)? as usize;
        let name = String::from_utf8(take(&mut buf, n)?.to_vec())
            .map_err(|_| FrameError::Invalid("header name"))?;
        let n = u32_at(&mut buf)? as usize;
        let value = String::from_utf8(take(&mut buf, n)?.to_vec())
            .map_err(|_| FrameError::Invalid("header value"))?;
        headers.push((name, value.split('\0').map(str::to_string).collect()));
    }
    Ok(headers)
}

fn control(kind: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + payload.len());
    out.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.push(flags);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(payload);
    out
}

impl Frame {
    /// The frame's bytes; header blocks go through `z`.
    pub fn encode(&self, z: &mut HeaderCompressor) -> Result<Vec<u8>, FrameError> {
        let id = |v: u32| (v & 0x7fff_ffff).to_be_bytes();
        Ok(match self {
            Frame::SynStream {
                flags,
                stream_id,
                associated_to,
                priority,
                slot,
                headers,
            } => {
                let mut p = Vec::new();
                p.extend_from_slice(&id(*stream_id));
                p.extend_from_slice(&id(*associated_to));
                p.push((priority & 0x7) << 5);
                p.push(*slot);
                p.extend_from_slice(&z.compress(&encode_header_block(headers))?);
                control(1, *flags, &p)
            }
            Frame::SynReply {
                flags,
                stream_id,
                headers,
            }
            | Frame::Headers {
                flags,
                stream_id,
                headers,
            } => {
                let mut p = id(*stream_id).to_vec();
                p.extend_from_slice(&z.compress(&encode_header_block(headers))?);
                let kind = if matches!(self, Frame::SynReply { .. }) {
                    2
                } else {
                    8
                };
                control(kind, *flags, &p)
            }
            Frame::RstStream { stream_id, status } => {
                control(3, 0, &[id(*stream_id), status.to_be_bytes()].concat())
            }
            Frame::Settings { flags, entries } => {
                let mut p = (entries.len() as u32).to_be_bytes().to_vec();
                for (f, key, value) in entries {
                    p.push(*f);
                    p.extend_from_slice(&key.to_be_bytes()[1..]);
                    p.extend_from_slice(&value.to_be_bytes());
                }
                control(4, *flags, &p)
            }
            Frame::Ping { id: ping } => control(6, 0, &ping.to_be_bytes()),
            Frame::GoAway {
                last_good_stream_id,
                status,
            } => control(
                7,
                0,
                &[id(*last_good_stream_id), status.to_be_bytes()].concat(),
            ),
            Frame::WindowUpdate { stream_id, delta } => {
                control(9, 0, &[id(*stream_id), id(*delta)].concat())
            }
            Frame::Data {
                stream_id,
                flags,
                data,
            } => {
                if data.len() > MAX_FRAME_LENGTH {
                    return Err(FrameError::Invalid("data frame too long"));
                }
                let mut out = Vec::with_capacity(8 + data.len());
                out.extend_from_slice(&id(*stream_id));
                out.push(*flags);
                out.extend_from_slice(&(data.len() as u32).to_be_bytes()[1..]);
                out.extend_from_slice(data);
                out
            }
        })
    }

    /// Reads one frame; `Ok(None)` at a clean end of the connection between frames.
    pub async fn read<R: AsyncRead + Unpin>(
        r: &mut R,
        z: &mut HeaderDecompressor,
    ) -> Result<Option<Frame>, FrameError> {
        let mut head = [0u8; 8];
        let n = r.read(&mut head[..1]).await?;
        if n == 0 {
            return Ok(None);
        }
        r.read_exact(&mut head[1..]).await?;
        let flags = head[4];
        let len = u32::from_be_bytes([0, head[5], head[6], head[7]]) as usize;
        let mut payload = vec![0u8; len];
        r.read_exact(&mut payload).await?;
        let word = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        if word & 0x8000_0000 == 0 {
            return Ok(Some(Frame::Data {
                stream_id: word,
                flags,
                data: payload,
            }));
        }
        let version = ((word >> 16) & 0x7fff) as u16;
        if version != VERSION {
            return Err(FrameError::Version(version));
        }
        Self::decode_control((word & 0xffff) as u16, flags, &payload, z).map(Some)
    }

    fn decode_control(
        kind: u16,
        flags: u8,
        payload: &[u8],
        z: &mut HeaderDecompressor,
    ) -> Result<Frame, FrameError> {
        let mut p = payload;
        let id = |p: &mut &[u8]| u32_at(p).map(|v| v & 0x7fff_ffff);
        Ok(match kind {
            1 => {
                let stream_id = id(&mut p)?;
                let associated_to = id(&mut p)?;
                let pri = take(&mut p, 2)?;
                let headers = decode_header_block(&z.decompress(p)?)?;
                Frame::SynStream {
                    flags,
                    stream_id,
                    associated_to,
                    priority: pri[0] >> 5,
                    slot: pri[1],
                    headers,
                }
            }
            2 | 8 => {
                let stream_id = id(&mut p)?;
                let headers = decode_header_block(&z.decompress(p)?)?;
                if kind == 2 {
                    Frame::SynReply {
                        flags,
                        stream_id,
                        headers,
                    }
                } else {
                    Frame::Headers {
                        flags,
                        stream_id,
                        headers,
                    }
                }
            }
            3 => Frame::RstStream {
                stream_id: id(&mut p)?,
                status: u32_at(&mut p)?,
            },
            4 => {
                let count = u32_at(&mut p)? as usize;
                let mut entries = Vec::with_capacity(count.min(16));
                for _ in 0..count {
                    let e = take(&mut p, 8)?;
                    entries.push((
                        e[0],
                        u32::from_be_bytes([0, e[1], e[2], e[3]]),
                        u32::from_be_bytes([e[4], e[5], e[6], e[7]]),
                    ));
                }
                Frame::Settings { flags, entries }
            }
            6 => Frame::Ping {
                id: u32_at(&mut p)?,
            },
            7 => Frame::GoAway {
                last_good_stream_id: id(&mut p)?,
                status: u32_at(&mut p)?,
            },
            9 => Frame::WindowUpdate {
                stream_id: id(&mut p)?,
                delta: id(&mut p)?,
            },
            _ => return Err(FrameError::Invalid("unknown control frame type")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Headers {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), vec![v.to_string()]))
            .collect()
    }

    #[tokio::test]
    async fn every_frame_round_trips() {
        let frames = vec![
            Frame::SynStream {
                flags: FLAG_FIN | FLAG_UNIDIRECTIONAL,
                stream_id: 1,
                associated_to: 0,
                priority: 3,
                slot: 0,
                headers: h(&[
                    ("streamtype", "error"),
                    ("port", "8080"),
                    ("requestid", "0"),
                ]),
            },
            Frame::SynReply {
                flags: 0,
                stream_id: 1,
                headers: vec![],
            },
            Frame::RstStream {
                stream_id: 3,
                status: 5,
            },
            Frame::Settings {
                flags: 1,
                entries: vec![(0, 7, 65536), (1, 4, 100)],
            },
            Frame::Ping { id: 42 },
            Frame::GoAway {
                last_good_stream_id: 9,
                status: 0,
            },
            Frame::Headers {
                flags: FLAG_FIN,
                stream_id: 5,
                headers: vec![("multi".into(), vec!["a".into(), "b".into()])],
            },
            Frame::WindowUpdate {
                stream_id: 5,
                delta: 1024,
            },
            Frame::Data {
                stream_id: 5,
                flags: FLAG_FIN,
                data: b"payload".to_vec(),
            },
            Frame::Data {
                stream_id: 7,
                flags: 0,
                data: vec![],
            },
        ];
        let mut c = HeaderCompressor::new().unwrap();
        let mut wire = Vec::new();
        for f in &frames {
            wire.extend(f.encode(&mut c).unwrap());
        }
        let mut d = HeaderDecompressor::default();
        let mut r = wire.as_slice();
        for f in &frames {
            assert_eq!(Frame::read(&mut r, &mut d).await.unwrap().as_ref(), Some(f));
        }
        assert!(Frame::read(&mut r, &mut d).await.unwrap().is_none());
    }

    #[test]
    fn header_blocks_use_the_dictionary() {
        let mut c = HeaderCompressor::new().unwrap();
        let block = encode_header_block(&h(&[
            ("content-type", "text/plain"),
            ("user-agent", "kubectl"),
        ]));
        let first = c.compress(&block).unwrap();
        // zlib header with FDICT set, then the dictionary's Adler-32.
        assert_eq!(first[0] & 0x0f, 8);
        assert_ne!(first[1] & 0x20, 0);
        let dict = crate::httpstream::spdy::dictionary::dictionary();
        let (mut a, mut b) = (1u32, 0u32);
        for byte in &dict {
            a = (a + u32::from(*byte)) % 65521;
            b = (b + a) % 65521;
        }
        assert_eq!(&first[2..6], &((b << 16) | a).to_be_bytes());
        // Later blocks continue the same stream (no new zlib header) and still inflate.
        let second = c.compress(&block).unwrap();
        let mut d = HeaderDecompressor::default();
        assert_eq!(d.decompress(&first).unwrap(), block);
        assert_eq!(d.decompress(&second).unwrap(), block);
        assert!(second.len() < first.len());
    }

    #[test]
    fn header_lookup_and_bad_frames() {
        let headers = h(&[("StreamType", "data")]);
        assert_eq!(header(&headers, "streamtype"), Some("data"));
        let mut d = HeaderDecompressor::default();
        assert!(Frame::decode_control(99, 0, &[], &mut d).is_err());
        assert!(Frame::decode_control(3, 0, &[0, 0], &mut d).is_err());
    }
}
