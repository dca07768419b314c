//! The channel protocols of exec, attach and port-forward over WebSocket: each message carries
//! one channel's bytes, the channel number first.
//!
//! Mirrors `k8s.io/apimachinery/pkg/util/httpstream/wsstream/conn.go` (the `channel.k8s.io`
//! and `base64.channel.k8s.io` framings), client-go's `tools/remotecommand/websocket.go`
//! (`v5.channel.k8s.io`'s CLOSE signal) and the kubelet's
//! `pkg/kubelet/cri/streaming/{remotecommand,portforward}/websocket.go` (which protocols are
//! served, and port-forward's channel layout).

use base64::Engine as _;

/// Binary framing: the first byte is the channel, the rest its data.
pub const CHANNEL_PROTOCOL: &str = "channel.k8s.io";
/// Text framing: the first character is `'0' + channel`, the rest base64 of the data.
pub const BASE64_CHANNEL_PROTOCOL: &str = "base64.channel.k8s.io";
/// remotecommand v4 over WebSocket: binary framing, the error channel carries a Status JSON.
pub const V4_CHANNEL_PROTOCOL: &str = "v4.channel.k8s.io";
/// v4's base64 twin.
pub const V4_BASE64_CHANNEL_PROTOCOL: &str = "v4.base64.channel.k8s.io";
/// remotecommand v5: v4 plus the CLOSE signal on channel 255.
pub const V5_CHANNEL_PROTOCOL: &str = "v5.channel.k8s.io";
/// Port-forward's protocol name (SPDY's `X-Stream-Protocol-Version`; the kubelet does not
/// serve it as a WebSocket subprotocol).
pub const PORT_FORWARD_PROTOCOL: &str = "portforward.k8s.io";

/// Standard input.
pub const STDIN: u8 = 0;
/// Standard output.
pub const STDOUT: u8 = 1;
/// Standard error.
pub const STDERR: u8 = 2;
/// The error channel: the final status.
pub const ERROR: u8 = 3;
/// Terminal size changes, JSON `{"Width":80,"Height":24}`.
pub const RESIZE: u8 = 4;
/// v5's CLOSE signal channel: the message `[255, channel]` closes `channel`.
pub const CLOSE: u8 = 255;

/// The protocols the kubelet serves exec/attach with, in its order (`remotecommand/websocket.go`;
/// the empty protocol is served as `channel.k8s.io`).
pub const REMOTECOMMAND_PROTOCOLS: [&str; 6] = [
    "",
    CHANNEL_PROTOCOL,
    BASE64_CHANNEL_PROTOCOL,
    V4_CHANNEL_PROTOCOL,
    V4_BASE64_CHANNEL_PROTOCOL,
    V5_CHANNEL_PROTOCOL,
];

/// The protocols the kubelet serves WebSocket port-forward with (`portforward/websocket.go`:
/// the empty protocol, `v4.channel.k8s.io` and `v4.base64.channel.k8s.io`; the clients offer
/// `v4.channel.k8s.io`). `portforward.k8s.io` is the SPDY protocol's name, not served here.
pub const PORT_FORWARD_PROTOCOLS: [&str; 3] = ["", V4_CHANNEL_PROTOCOL, V4_BASE64_CHANNEL_PROTOCOL];

/// How a chosen subprotocol frames messages and what it adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framing {
    /// Text messages with base64 data instead of binary messages.
    pub base64: bool,
    /// The error channel carries a metav1.Status JSON (v4 and later) rather than plain text.
    pub status_json: bool,
    /// v5: channel 255 CLOSE signals are understood.
    pub close_signal: bool,
}

/// The framing of a negotiated subprotocol (`""` is `channel.k8s.io`); `None` if unknown.
pub fn framing(protocol: &str) -> Option<Framing> {
    let f = |base64, status_json, close_signal| {
        Some(Framing {
            base64,
            status_json,
            close_signal,
        })
    };
    match protocol {
        "" | CHANNEL_PROTOCOL => f(false, false, false),
        BASE64_CHANNEL_PROTOCOL => f(true, false, false),
        V4_CHANNEL_PROTOCOL => f(false, true, false),
        V4_BASE64_CHANNEL_PROTOCOL => f(true, true, false),
        V5_CHANNEL_PROTOCOL => f(false, true, true),
        _ => None,
    }
}

/// Chooses the subprotocol from the client's offer (in the client's order), as wsstream's
/// `handshake` does. `None`: nothing in common, the kubelet refuses the upgrade.
pub fn choose_protocol<'a>(offered: &[&'a str], supported: &[&str]) -> Option<&'a str> {
    super::negotiate_protocol(offered, supported)
}

/// One decoded message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Bytes for a channel.
    Data {
        /// The channel number.
        channel: u8,
        /// Its bytes.
        data: Vec<u8>,
    },
    /// v5: the peer closed this channel (stdin's end of file).
    Close {
        /// The channel closed.
        channel: u8,
    },
}

/// Why a message could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// A message with no channel byte.
    #[error("empty websocket message")]
    Empty,
    /// A base64 message whose channel character is not a digit.
    #[error("invalid channel character {0:?}")]
    BadChannel(u8),
    /// A base64 message whose payload is not base64.
    #[error("invalid base64 payload")]
    BadBase64,
    /// A v5 CLOSE message without the channel to close.
    #[error("close signal without a channel")]
    BadClose,
}

/// Encodes `data` for `channel`: binary `[channel, data...]`, or for base64 framings the text
/// `'0'+channel` followed by base64 (returned as UTF-8 bytes; send it as a text message).
pub fn encode(framing: Framing, channel: u8, data: &[u8]) -> Vec<u8> {
    if framing.base64 {
        let mut out = vec![b'0'.wrapping_add(channel)];
        out.extend_from_slice(
            base64::engine::general_purpose::STANDARD
                .encode(data)
                .as_bytes(),
        );
        out
    } else {
        let mut out = Vec::with_capacity(data.len() + 1);
        out.push(channel);
        out.extend_from_slice(data);
        out
    }
}

/// Encodes v5's CLOSE signal for `channel`.
pub fn encode_close(channel: u8) -> Vec<u8> {
    vec![CLOSE, channel]
}

/// Decodes one message under `framing`.
pub fn decode(framing: Framing, message: &[u8]) -> Result<Message, DecodeError> {
    let (&first, rest) = message.split_first().ok_or(DecodeError::Empty)?;
    if framing.base64 {
        let channel = first
            .checked_sub(b'0')
            .filter(|c| *c <= 9)
            .ok_or(DecodeError::BadChannel(first))?;
        let data = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .map_err(|_| DecodeError::BadBase64)?;
        return Ok(Message::Data { channel, data });
    }
    if framing.close_signal && first == CLOSE {
        let channel = *rest.first().ok_or(DecodeError::BadClose)?;
        return Ok(Message::Close { channel });
    }
    Ok(Message::Data {
        channel: first,
        data: rest.to_vec(),
    })
}

/// A terminal size, as sent on the resize channel (`remotecommand.TerminalSize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminalSize {
    /// Columns.
    pub width: u16,
    /// Rows.
    pub height: u16,
}

impl TerminalSize {
    /// The JSON the clients send: `{"Width":80,"Height":24}`.
    pub fn to_json(self) -> String {
        format!(r#"{{"Width":{},"Height":{}}}"#, self.width, self.height)
    }

    /// Reads one resize message.
    pub fn from_json(data: &[u8]) -> Option<Self> {
        let v: serde_json::Value = serde_json::from_slice(data).ok()?;
        Some(Self {
            width: u16::try_from(v.get("Width")?.as_u64()?).ok()?,
            height: u16::try_from(v.get("Height")?.as_u64()?).ok()?,
        })
    }
}

/// WebSocket port-forward: the data channel of the `index`-th requested port.
pub fn port_forward_data_channel(index: usize) -> Option<u8> {
    u8::try_from(index.checked_mul(2)?).ok()
}

/// WebSocket port-forward: the error channel of the `index`-th requested port.
pub fn port_forward_error_channel(index: usize) -> Option<u8> {
    u8::try_from(index.checked_mul(2)?.checked_add(1)?).ok()
}

/// The first message the kubelet writes on each port-forward channel (data and error): the
/// port, 2 bytes little-endian.
pub fn port_prefix(port: u16) -> [u8; 2] {
    port.to_le_bytes()
}

/// The ports of a WebSocket port-forward request: the values of its `port` query parameter,
/// each comma-separated (`?port=80,443&port=8080`), as the kubelet's `NewV4Options` reads
/// them (each `1..=65535`; `None` for an empty, unparsable or zero one). Channel order
/// follows this list. The kubelet writes the 2-byte port first on both channels of each
/// port; the client's messages carry only data.
pub fn parse_ports(query_values: &[&str]) -> Option<Vec<u16>> {
    query_values
        .iter()
        .flat_map(|v| v.split(','))
        .map(|p| p.parse::<u16>().ok().filter(|p| *p != 0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_round_trip_v4() {
        let f = framing(V4_CHANNEL_PROTOCOL).unwrap();
        let m = encode(f, STDOUT, b"hello");
        assert_eq!(m, b"\x01hello");
        assert_eq!(
            decode(f, &m).unwrap(),
            Message::Data {
                channel: STDOUT,
                data: b"hello".to_vec()
            }
        );
        // v4 has no close signal: channel 255 is just a channel.
        assert_eq!(
            decode(f, &[255, 0]).unwrap(),
            Message::Data {
                channel: 255,
                data: vec![0]
            }
        );
        assert_eq!(decode(f, &[]), Err(DecodeError::Empty));
    }

    #[test]
    fn v5_close_signal() {
        let f = framing(V5_CHANNEL_PROTOCOL).unwrap();
        assert_eq!(encode_close(STDIN), vec![255, 0]);
        assert_eq!(
            decode(f, &encode_close(STDIN)).unwrap(),
            Message::Close { channel: STDIN }
        );
        assert_eq!(decode(f, &[255]), Err(DecodeError::BadClose));
    }

    #[test]
    fn base64_round_trip() {
        let f = framing(BASE64_CHANNEL_PROTOCOL).unwrap();
        let m = encode(f, STDERR, b"oops");
        assert_eq!(m, b"2b29wcw==");
        assert_eq!(
            decode(f, &m).unwrap(),
            Message::Data {
                channel: STDERR,
                data: b"oops".to_vec()
            }
        );
        assert_eq!(decode(f, b"x"), Err(DecodeError::BadChannel(b'x')));
        assert_eq!(decode(f, b"1***"), Err(DecodeError::BadBase64));
    }

    #[test]
    fn protocol_choice_and_resize() {
        assert_eq!(
            choose_protocol(
                &["v5.channel.k8s.io", "v4.channel.k8s.io"],
                &REMOTECOMMAND_PROTOCOLS
            ),
            Some(V5_CHANNEL_PROTOCOL)
        );
        assert_eq!(
            choose_protocol(&["SPDY/3.1"], &REMOTECOMMAND_PROTOCOLS),
            None
        );
        assert_eq!(choose_protocol(&[], &REMOTECOMMAND_PROTOCOLS), Some(""));
        assert!(framing("").is_some_and(|f| !f.status_json));
        let size = TerminalSize {
            width: 80,
            height: 24,
        };
        assert_eq!(size.to_json(), r#"{"Width":80,"Height":24}"#);
        assert_eq!(
            TerminalSize::from_json(size.to_json().as_bytes()),
            Some(size)
        );
    }

    #[test]
    fn port_forward_layout() {
        assert_eq!(port_forward_data_channel(1), Some(2));
        assert_eq!(port_forward_error_channel(1), Some(3));
        assert_eq!(port_prefix(8080), [0x90, 0x1f]);
        assert_eq!(parse_ports(&["80,443", "8080"]), Some(vec![80, 443, 8080]));
        assert_eq!(parse_ports(&["0"]), None);
        assert_eq!(parse_ports(&[""]), None);
        assert_eq!(
            choose_protocol(
                &["portforward.k8s.io", "v4.channel.k8s.io"],
                &PORT_FORWARD_PROTOCOLS
            ),
            Some(V4_CHANNEL_PROTOCOL)
        );
        assert_eq!(
            choose_protocol(&["channel.k8s.io"], &PORT_FORWARD_PROTOCOLS),
            None
        );
    }
}
