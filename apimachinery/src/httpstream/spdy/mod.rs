//! SPDY/3.1 as Kubernetes streams exec, attach and port-forward over it: frames, the session,
//! the streams each protocol opens, and SPDY tunnelled inside WebSocket messages.
//!
//! Mirrors `k8s.io/apimachinery/pkg/util/httpstream/spdy` (on moby/spdystream), the kubelet's
//! `pkg/kubelet/cri/streaming/{portforward,remotecommand}/httpstream.go`, and client-go's
//! `tools/portforward/tunneling_connection.go`.
//!
//! ```text
//!   frame       frame layout, zlib header blocks        spdystream spdy/{types,read,write}.go
//!   dictionary  SPDY/3's zlib dictionary                SPDY draft 3, 2.6.10.1
//!   session     the server session                      spdystream connection.go
//!   streams     port-forward and remotecommand streams  kubelet streaming/*/httpstream.go
//!   tunnel      WebSocket messages as a byte stream     client-go tunneling_connection.go
//! ```

pub mod dictionary;
pub mod frame;
pub mod session;
pub mod streams;
pub mod tunnel;

pub use frame::{Frame, FrameError, Headers};
pub use session::{Session, SessionClosed, Stream, StreamWriter};

/// The HTTP upgrade's protocol token for SPDY (`Upgrade: SPDY/3.1`).
pub const UPGRADE_PROTOCOL: &str = "SPDY/3.1";
/// The request and response header naming the stream protocol (`X-Stream-Protocol-Version`).
pub const STREAM_PROTOCOL_HEADER: &str = "X-Stream-Protocol-Version";
