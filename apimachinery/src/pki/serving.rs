//! The API server's TLS configuration (kube-apiserver's `--tls-cert-file`,
//! `--tls-private-key-file` and `--client-ca-file`, as
//! `staging/src/k8s.io/apiserver/pkg/server/secure_serving.go` builds its `tls.Config`).
//!
//! kube-apiserver sets `ClientAuth: tls.RequestClientCert`: a client is asked for a
//! certificate but may send none, and one it sends is not judged at the handshake (only its
//! possession of the key is checked); the x509 authenticator verifies the chain per request,
//! so a bad certificate is a 401, not a failed handshake, and token clients on the same port
//! are unaffected. [`RequestClientCert`] is that verifier.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig};

use super::{Result, invalid};

/// The server's TLS configuration: `cert_pem` (the serving certificate, then any
/// intermediates) with its key `key_pem` (PKCS#8, SEC1 or PKCS#1 PEM), ALPN `http/1.1` only,
/// TLS 1.2 and 1.3 on the ring provider. With `client_ca_pem`, clients are asked for a
/// certificate from that CA but not required to send one, and one they send is not verified
/// here ([`super::verify_client_chain`] does it per request).
pub fn tls_server_config(
    cert_pem: &str,
    key_pem: &str,
    client_ca_pem: Option<&str>,
) -> Result<Arc<ServerConfig>> {
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid("serving certificate", e))?;
    if certs.is_empty() {
        return Err(invalid("serving certificate", "no CERTIFICATE in the PEM"));
    }
    let key =
        PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| invalid("serving key", e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let mut config = match client_ca_pem {
        Some(ca_pem) => {
            let verifier = RequestClientCert::new(ca_pem, &provider)?;
            builder
                .with_client_cert_verifier(Arc::new(verifier))
                .with_single_cert(certs, key)?
        }
        None => builder.with_no_client_auth().with_single_cert(certs, key)?,
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Go's `tls.RequestClientCert`: asks for a client certificate (naming the client CA as the
/// acceptable issuer), does not require one, accepts any, and checks only the handshake's
/// signature (the client holds the certificate's key).
#[derive(Debug)]
pub struct RequestClientCert {
    /// The client CA's subject, sent in the CertificateRequest.
    hints: Vec<DistinguishedName>,
    /// The signature algorithms the handshake's signature may use.
    algorithms: WebPkiSupportedAlgorithms,
}

impl RequestClientCert {
    /// The verifier for clients of the CAs in `ca_pem`.
    pub fn new(ca_pem: &str, provider: &CryptoProvider) -> Result<RequestClientCert> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            let cert = cert.map_err(|e| invalid("client CA certificate", e))?;
            roots
                .add(cert)
                .map_err(|e| invalid("client CA certificate", e))?;
        }
        if roots.is_empty() {
            return Err(invalid(
                "client CA certificate",
                "no CERTIFICATE in the PEM",
            ));
        }
        Ok(RequestClientCert {
            hints: roots.subjects(),
            algorithms: provider.signature_verification_algorithms,
        })
    }
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
