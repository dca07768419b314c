//! The API server's client to the kubelets over HTTPS: kube-apiserver's
//! `--kubelet-client-certificate`, `--kubelet-client-key` and
//! `--kubelet-certificate-authority`.
//!
//! Mirrors `pkg/kubelet/client/kubelet_client.go` (`KubeletClientConfig`: the client
//! certificate presented to every kubelet, the CA their serving certificates are verified
//! with; `MakeTransport`) as `pkg/controlplane/apiserver/options` wires the flags. With it,
//! [`super::proxy::forward`] dials `https://`; without it, plain HTTP.
//!
//! Simplification: the server name verified is the address dialled (`127.0.0.1`, every
//! simulated kubelet is on this machine), where kube-apiserver verifies the node's address
//! or name from its `status.addresses`. Without `--kubelet-certificate-authority`
//! kube-apiserver skips verification; here a CA is required for HTTPS.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// The API server's TLS client settings for the kubelets (cheap to clone).
#[derive(Clone)]
pub struct KubeletClientTls {
    connector: TlsConnector,
}

impl std::fmt::Debug for KubeletClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeletClientTls").finish_non_exhaustive()
    }
}

impl KubeletClientTls {
    /// A client presenting `cert_pem` (the chain after the leaf) with its key `key_pem`, and
    /// trusting the kubelets' serving certificates signed by the CAs in `ca_pem`. `Err` says
    /// which PEM is unusable.
    pub fn from_pem(cert_pem: &str, key_pem: &str, ca_pem: &str) -> Result<Self, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            let cert = cert.map_err(|e| format!("--kubelet-certificate-authority: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("--kubelet-certificate-authority: {e}"))?;
        }
        if roots.is_empty() {
            return Err("--kubelet-certificate-authority: no CERTIFICATE in the PEM".into());
        }
        let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("--kubelet-client-certificate: {e}"))?;
        if certs.is_empty() {
            return Err("--kubelet-client-certificate: no CERTIFICATE in the PEM".into());
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(|e| format!("--kubelet-client-key: {e}"))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)
            .map_err(|e| format!("--kubelet-client-certificate/--kubelet-client-key: {e}"))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(KubeletClientTls {
            connector: TlsConnector::from(Arc::new(config)),
        })
    }

    /// The TLS handshake over `tcp`, verifying the kubelet's certificate for the IP address
    /// `addr` dialled; `Err` is the handshake's error as text.
    pub async fn connect(
        &self,
        addr: std::net::IpAddr,
        tcp: TcpStream,
    ) -> Result<TlsStream<TcpStream>, String> {
        self.connector
            .connect(ServerName::IpAddress(addr.into()), tcp)
            .await
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apimachinery::pki::{Ca, Validity};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// A TLS server on a free port serving `cert`, asking for client certificates of `ca`;
    /// it answers each connection with how many certificates the client presented.
    async fn server(ca: &Ca) -> std::net::SocketAddr {
        let serving = ca
            .issue_serving(&["127.0.0.1".into()], Validity::default_cert())
            .expect("serving");
        let config = apimachinery::pki::tls_server_config(
            &serving.cert_pem,
            &serving.key_pem,
            Some(ca.cert_pem()),
        )
        .expect("config");
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let peers = tls.get_ref().1.peer_certificates().map_or(0, <[_]>::len);
                    let _ = tls.write_all(format!("{peers}").as_bytes()).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn the_kubelet_is_verified_and_sees_the_client_certificate() {
        let ca = Ca::generate_in_memory(Validity::default_cert()).expect("ca");
        let addr = server(&ca).await;
        let client = ca
            .issue_client(
                "kube-apiserver-kubelet-client",
                &["system:masters"],
                Validity::default_cert(),
            )
            .expect("client");
        let tls = KubeletClientTls::from_pem(&client.cert_pem, &client.key_pem, ca.cert_pem())
            .expect("client config");
        let tcp = TcpStream::connect(addr).await.expect("dial");
        let mut stream = tls.connect(addr.ip(), tcp).await.expect("handshake");
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer).await;
        assert_eq!(answer, "1", "the kubelet got the client certificate");

        // A kubelet whose certificate another CA signed is refused.
        let other = Ca::generate_in_memory(Validity::default_cert()).expect("other ca");
        let wrong = KubeletClientTls::from_pem(&client.cert_pem, &client.key_pem, other.cert_pem())
            .expect("client config");
        let tcp = TcpStream::connect(addr).await.expect("dial");
        let err = wrong
            .connect(addr.ip(), tcp)
            .await
            .expect_err("unknown issuer");
        assert!(err.contains("certificate"), "{err}");
    }

    #[test]
    fn unusable_pems_are_named() {
        let ca = Ca::generate_in_memory(Validity::default_cert()).expect("ca");
        let client = ca
            .issue_client("x", &[], Validity::default_cert())
            .expect("client");
        let err =
            KubeletClientTls::from_pem(&client.cert_pem, &client.key_pem, "").expect_err("no CA");
        assert!(err.starts_with("--kubelet-certificate-authority"), "{err}");
        let err = KubeletClientTls::from_pem("", &client.key_pem, ca.cert_pem())
            .expect_err("no certificate");
        assert!(err.starts_with("--kubelet-client-certificate"), "{err}");
        let err =
            KubeletClientTls::from_pem(&client.cert_pem, "", ca.cert_pem()).expect_err("no key");
        assert!(err.starts_with("--kubelet-client-key"), "{err}");
    }
}
