//! How the metrics-server reaches the kubelets: HTTPS with its own credentials (the client
//! certificate or bearer token of its kubeconfig), verifying each kubelet's serving
//! certificate with `--kubelet-certificate-authority` (else the CA its kubeconfig trusts for
//! the API server), or without verification (`--kubelet-insecure-tls`); plain HTTP only with
//! `--deprecated-kubelet-completely-insecure`.
//!
//! Mirrors metrics-server's `pkg/scraper/client/resource/configs.go` (`GetKubeletConfig`:
//! the kubelet client is a copy of the API server's rest config, its CA replaced by
//! `--kubelet-certificate-authority` or dropped by `--kubelet-insecure-tls`; with
//! `--deprecated-kubelet-completely-insecure`, `http` and no credentials) and
//! `pkg/scraper/client/resource/client.go` (`https://<node address>:<port>/metrics/resource`).
//!
//! Simplifications: the kubelet is dialled at `127.0.0.1` (see [`crate::scraper`]) and its
//! certificate verified for that address; a kubeconfig's `exec` and `auth-provider`
//! credentials are not used.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use secrecy::ExposeSecret as _;

use client::ClusterSource;

/// The flags about the kubelets' connections.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KubeletClientOptions {
    /// `--deprecated-kubelet-completely-insecure`: plain HTTP, no credentials.
    pub completely_insecure: bool,
    /// `--kubelet-insecure-tls`: do not verify the kubelets' serving certificates.
    pub insecure_tls: bool,
    /// `--kubelet-certificate-authority`: the CA (PEM) their serving certificates are
    /// verified with (default: the CA of the kubeconfig).
    pub certificate_authority: Option<PathBuf>,
}

/// What the scraper dials with: HTTPS settings and a bearer token, or plain HTTP.
#[derive(Clone, Debug)]
pub struct KubeletTransport {
    /// The TLS client configuration; `None`: plain HTTP.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// `Authorization: Bearer` for every request, when the credentials are a token.
    pub bearer: Option<String>,
}

impl KubeletTransport {
    /// Plain HTTP without credentials (`--deprecated-kubelet-completely-insecure`).
    pub fn plain() -> Self {
        KubeletTransport {
            tls: None,
            bearer: None,
        }
    }

    /// `https` or `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }
}

/// The credentials and trust of a kubeconfig's current context.
#[derive(Default)]
struct Credentials {
    /// The CA certificates (DER) the kubeconfig trusts.
    roots: Vec<Vec<u8>>,
    /// The client certificate (PEM) and its key (PEM).
    identity: Option<(Vec<u8>, Vec<u8>)>,
    /// A bearer token.
    token: Option<String>,
}

/// Reads a file a kubeconfig names.
fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The credentials of `source` (none for a bare URL).
async fn credentials(source: &ClusterSource) -> Result<Credentials, String> {
    let ClusterSource::Kubeconfig(path) = source else {
        return Ok(Credentials::default());
    };
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .map_err(|e| format!("{}: {e}", path.display()))?;
    let auth = &config.auth_info;
    let decode = |what: &str, b64: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(|e| format!("{}: {what}: {e}", path.display()))
    };
    let cert = match (&auth.client_certificate_data, &auth.client_certificate) {
        (Some(data), _) => Some(decode("client-certificate-data", data)?),
        (None, Some(file)) => Some(read(Path::new(file))?),
        (None, None) => None,
    };
    let key = match (&auth.client_key_data, &auth.client_key) {
        (Some(data), _) => Some(decode("client-key-data", data.expose_secret())?),
        (None, Some(file)) => Some(read(Path::new(file))?),
        (None, None) => None,
    };
    let token = match (&auth.token, &auth.token_file) {
        (Some(token), _) => Some(token.expose_secret().to_owned()),
        (None, Some(file)) => Some(
            String::from_utf8_lossy(&read(Path::new(file))?)
                .trim()
                .to_owned(),
        ),
        (None, None) => None,
    };
    Ok(Credentials {
        roots: config.root_cert.unwrap_or_default(),
        identity: cert.zip(key),
        token,
    })
}

/// The transport `options` ask for, with the credentials and CA of `source`.
pub async fn transport(
    source: &ClusterSource,
    options: &KubeletClientOptions,
) -> Result<KubeletTransport, String> {
    if options.completely_insecure {
        return Ok(KubeletTransport::plain());
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let credentials = credentials(source).await?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = if options.insecure_tls {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        match &options.certificate_authority {
            Some(path) => {
                let pem = read(path).map_err(|e| format!("--kubelet-certificate-authority {e}"))?;
                for cert in CertificateDer::pem_slice_iter(&pem) {
                    let cert = cert.map_err(|e| format!("--kubelet-certificate-authority: {e}"))?;
                    roots
                        .add(cert)
                        .map_err(|e| format!("--kubelet-certificate-authority: {e}"))?;
                }
            }
            None => {
                for der in credentials.roots {
                    roots
                        .add(CertificateDer::from(der))
                        .map_err(|e| format!("the kubeconfig's certificate authority: {e}"))?;
                }
            }
        }
        if roots.is_empty() {
            return Err("no CA to verify the kubelets with: set --kubelet-certificate-authority, or --kubelet-insecure-tls".into());
        }
        builder.with_root_certificates(roots)
    };
    // No ALPN here: the connector offers `http/1.1` itself.
    let config = match &credentials.identity {
        Some((cert, key)) => {
            let certs = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("client certificate: {e}"))?;
            let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("client key: {e}"))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| format!("client certificate: {e}"))?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(KubeletTransport {
        tls: Some(Arc::new(config)),
        bearer: credentials.token,
    })
}

/// `--kubelet-insecure-tls`: any serving certificate is accepted (the handshake's signature
/// is still checked).
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
