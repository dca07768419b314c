//! Kubernetes' streaming wire protocols: the ones `kubectl exec`, `attach` and `port-forward`
//! (and kube-rs and the Python client) speak to a kubelet.
//!
//! Mirrors `k8s.io/apimachinery/pkg/util/httpstream` (`spdy`, `wsstream`), the client side's
//! `k8s.io/client-go/tools/remotecommand` and `tools/portforward`, and the kubelet's server
//! side in `pkg/kubelet/cri/streaming/{remotecommand,portforward}`.
//!
//! ```text
//!   wsstream   channel.k8s.io / base64 / v4 / v5 channel messages over WebSocket, the
//!              subprotocol choice, WebSocket port-forward's channel layout
//!   status     the error channel's final metav1.Status (exit codes)
//!   spdy       SPDY/3.1 frames, zlib header blocks, a server session, the streams of
//!              port-forward and remotecommand, WebSocket-tunnelled SPDY
//! ```

pub mod spdy;
pub mod status;
pub mod wsstream;

/// Picks the protocol both sides speak, in the client's order of preference, as
/// `httpstream.negotiateProtocol` and wsstream's `handshake` do. An empty offer counts as the
/// empty protocol (which WebSocket servers map to `channel.k8s.io`).
pub fn negotiate_protocol<'a>(
    client_offered: &[&'a str],
    server_supported: &[&str],
) -> Option<&'a str> {
    let empty: [&'a str; 1] = [""];
    let offered: &[&'a str] = if client_offered.is_empty() {
        &empty
    } else {
        client_offered
    };
    offered
        .iter()
        .copied()
        .find(|p| server_supported.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_follows_client_order() {
        let server = ["v5.channel.k8s.io", "v4.channel.k8s.io", "channel.k8s.io"];
        assert_eq!(
            negotiate_protocol(&["v4.channel.k8s.io", "v5.channel.k8s.io"], &server),
            Some("v4.channel.k8s.io")
        );
        assert_eq!(negotiate_protocol(&["nope"], &server), None);
        assert_eq!(negotiate_protocol(&[], &["", "channel.k8s.io"]), Some(""));
    }
}
