//! The cluster's PKI: its certificate authority, the certificates it issues (the API server's
//! serving certificate, client certificates, signed CSRs), the check of a client's chain, and
//! the API server's TLS configuration.
//!
//! Mirrors kubeadm's `cmd/kubeadm/app/util/pkiutil/pki_helpers.go` (the CA `ca.crt`/`ca.key`
//! with CN `kubernetes` and ten years of validity, certificates of one year signed by it,
//! `NotBefore` backdated by `CertificateBackdate` from `cmd/kubeadm/app/constants`), client-go's
//! `staging/src/k8s.io/client-go/util/cert` and `util/keyutil` (PEM files, the key file mode
//! 0600), the CSR signing of `pkg/controller/certificates/authority/authority.go` (the CSR's
//! subject and names kept, usages from `policies.go`'s `keyUsagesFromStrings`, `csr.rs`) and
//! kube-apiserver's client-certificate authenticator
//! `staging/src/k8s.io/apiserver/pkg/authentication/request/x509/x509.go` (CN the user name,
//! O the groups; the chain verified per request, not at the handshake).
//!
//! ```text
//!  Ca::load_or_create(dir) ── ca.crt, ca.key (0600; written atomically, kept across restarts)
//!    ├─ issue_serving(hosts)        CN kube-apiserver, SANs, server auth ─▶ tls_server_config
//!    ├─ issue_client(cn, groups)    CN user, O groups, client auth     ─▶ kubeconfigs
//!    └─ sign_csr(csr, usages)       the CSR's subject, its usages      ─▶ CSR signer
//!  parse_csr(pem), key_usages(usages), signing_validity(now, ttl, CA end): what the API
//!             server's CSR validation and the controller-manager's signer read
//!  handshake: a client certificate is requested, not required, and not judged (Go's
//!             tls.RequestClientCert); the client only proves it holds the key
//!  per request: verify_client_chain(ca, peer chain, now) ─▶ ClientIdentity { CN, O } or 401
//! ```
//!
//! Keys are ECDSA P-256 in PKCS#8 PEM (`PRIVATE KEY`), which Go (kubectl), rustls (kube-rs)
//! and OpenSSL (Python) all read; kubeadm's default is RSA 2048, which `ring` cannot generate.
//! Simplifications: one CA for serving and client certificates (kubeadm has front-proxy and
//! etcd CAs too), no revocation.

mod ca;
mod csr;
mod der;
mod files;
mod serving;
mod verify;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

pub use ca::Ca;
pub use csr::{
    CSR_PEM_TYPE, CertificateRequest, CsrError, KeyUsages, SIGNING_BACKDATE, SIGNING_SHORT,
    check_certificate_pem, key_usages, parse_csr, signing_validity,
};
pub use files::write_cert_and_key;
pub use serving::{RequestClientCert, tls_server_config};
pub use verify::{ClientIdentity, ClientVerifier, verify_client_chain};

/// The DER of the first certificate in a PEM text (a CA file such as `--client-ca-file`).
pub fn first_certificate(pem: &str) -> Result<Vec<u8>> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let invalid = |reason: String| CertError::Invalid {
        what: "CA certificate",
        reason,
    };
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .ok_or_else(|| invalid("no PEM CERTIFICATE block".into()))?
        .map(|c| c.to_vec())
        .map_err(|e| invalid(e.to_string()))
}

/// The CA certificate's file in the PKI directory (kubeadm's `ca.crt`).
pub const CA_CERT_FILE: &str = "ca.crt";

/// The CA key's file in the PKI directory (kubeadm's `ca.key`).
pub const CA_KEY_FILE: &str = "ca.key";

/// The CA's common name (kubeadm's CA: `kubernetes`).
pub const CA_COMMON_NAME: &str = "kubernetes";

/// The serving certificate's common name (kubeadm's `apiserver.crt`: `kube-apiserver`).
pub const SERVING_COMMON_NAME: &str = "kube-apiserver";

/// How long the CA is valid (kubeadm's `CACertificateValidityPeriod`: ten years).
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);

/// How long an issued certificate is valid by default (kubeadm's
/// `CertificateValidityPeriod`: one year).
pub const CERT_VALIDITY: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// How far before its creation a certificate starts to be valid, for clocks a little behind
/// (kubeadm's `CertificateBackdate`: five minutes).
pub const CERT_BACKDATE: Duration = Duration::from_secs(5 * 60);

/// When a certificate is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// The first instant it is valid.
    pub not_before: SystemTime,
    /// The last instant it is valid.
    pub not_after: SystemTime,
}

impl Validity {
    /// From [`CERT_BACKDATE`] ago until `duration` from now.
    pub fn from_now(duration: Duration) -> Validity {
        let now = SystemTime::now();
        Validity {
            not_before: now.checked_sub(CERT_BACKDATE).unwrap_or(now),
            not_after: now.checked_add(duration).unwrap_or(now),
        }
    }

    /// An issued certificate's default: [`CERT_VALIDITY`] from now.
    pub fn default_cert() -> Validity {
        Validity::from_now(CERT_VALIDITY)
    }
}

/// A certificate and its private key, both PEM (the key PKCS#8 `PRIVATE KEY`).
#[derive(Clone, PartialEq, Eq)]
pub struct IssuedCert {
    /// The certificate, PEM `CERTIFICATE`.
    pub cert_pem: String,
    /// Its private key, PEM `PRIVATE KEY`.
    pub key_pem: String,
}

impl std::fmt::Debug for IssuedCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedCert")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"[secret key elided]")
            .finish()
    }
}

/// Errors of the PKI: its files, issuing certificates, building the TLS configuration, and the
/// verdicts on a client's certificate chain (the texts of the latter as Go's `crypto/x509`
/// words them, which kube-apiserver logs for a rejected client certificate).
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// Reading or writing a file of the PKI failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file (or directory).
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// One of a certificate's and key's files is there without the other.
    #[error("found {} but not {}", present.display(), missing.display())]
    Incomplete {
        /// The file that is there.
        present: PathBuf,
        /// The file that is not.
        missing: PathBuf,
    },
    /// A PEM or DER input is not what it should be.
    #[error("invalid {what}: {reason}")]
    Invalid {
        /// What was read (`CA certificate`, `private key`, `certificate signing request`, …).
        what: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// Generating or signing a certificate failed (an invalid host name, say).
    #[error("cannot issue the certificate: {0}")]
    Issue(String),
    /// A CSR names a usage that is not one of `certificates.k8s.io/v1`'s (the message as
    /// `keyUsagesFromStrings` words it: `unrecognized usage values: ["x"]`).
    #[error("{0}")]
    UnsupportedUsage(String),
    /// The TLS configuration could not be built from the certificate and key.
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// The client presented no certificate.
    #[error("x509: no client certificate")]
    NoCertificate,
    /// The client's certificate (or one of its chain) has expired.
    #[error(
        "x509: certificate has expired or is not yet valid: current time {now} is after {not_after}"
    )]
    Expired {
        /// The time of the check, RFC 3339.
        now: String,
        /// The end of the certificate's validity, RFC 3339.
        not_after: String,
    },
    /// The client's certificate (or one of its chain) is not valid yet.
    #[error(
        "x509: certificate has expired or is not yet valid: current time {now} is before {not_before}"
    )]
    NotYetValid {
        /// The time of the check, RFC 3339.
        now: String,
        /// The start of the certificate's validity, RFC 3339.
        not_before: String,
    },
    /// The chain does not lead to the CA (signed by another CA, or self-signed).
    #[error("x509: certificate signed by unknown authority")]
    UnknownAuthority,
    /// The certificate's extended key usages do not include client authentication.
    #[error("x509: certificate specifies an incompatible key usage")]
    NotForClientAuth,
    /// The certificate cannot be parsed, or its chain is refused for another reason.
    #[error("x509: malformed certificate: {0}")]
    Malformed(String),
    /// The certificate's subject has no common name: there is no user name to take.
    #[error("x509: certificate has no common name (no user name)")]
    NoCommonName,
}

/// The PKI's results.
pub type Result<T, E = CertError> = std::result::Result<T, E>;

/// An `Invalid` error.
fn invalid(what: &'static str, reason: impl std::fmt::Display) -> CertError {
    CertError::Invalid {
        what,
        reason: reason.to_string(),
    }
}

/// An `Issue` error from rcgen's.
fn issue_error(e: rcgen::Error) -> CertError {
    CertError::Issue(e.to_string())
}
