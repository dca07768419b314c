//! The per-request check of a client's certificate chain, as kube-apiserver's x509
//! authenticator makes it (`staging/src/k8s.io/apiserver/pkg/authentication/request/x509/x509.go`:
//! `Authenticator.AuthenticateRequest` verifies `req.TLS.PeerCertificates` against the client
//! CA with `ExtKeyUsageClientAuth`, then `CommonNameUserConversion` takes the user).

use std::time::{SystemTime, UNIX_EPOCH};

use rustls::pki_types::{CertificateDer, UnixTime};
use webpki::{EndEntityCert, KeyUsage};
use x509_parser::prelude::FromDer as _;

use super::{CertError, Result};

/// Who a verified client certificate says the client is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    /// The subject's common name: the user name.
    pub common_name: String,
    /// The subject's organizations, in order: the groups.
    pub organizations: Vec<String>,
}

/// Verifies a client's chain (`chain[0]` its certificate, the rest intermediates, as the TLS
/// handshake delivered them) against the CA certificate `ca_der` at `now`, for client
/// authentication, and returns the identity in its certificate.
///
/// The errors say why: [`CertError::Expired`] / [`CertError::NotYetValid`],
/// [`CertError::UnknownAuthority`] (another CA, or a bad signature),
/// [`CertError::NotForClientAuth`], [`CertError::Malformed`], [`CertError::NoCommonName`],
/// [`CertError::NoCertificate`] (an empty chain).
pub fn verify_client_chain(
    ca_der: &[u8],
    chain: &[CertificateDer<'_>],
    now: SystemTime,
) -> Result<ClientIdentity> {
    let Some((leaf, intermediates)) = chain.split_first() else {
        return Err(CertError::NoCertificate);
    };
    let ca = CertificateDer::from(ca_der);
    let anchor = webpki::anchor_from_trusted_cert(&ca)
        .map_err(|e| CertError::Malformed(format!("the CA certificate: {e}")))?;
    let end_entity =
        EndEntityCert::try_from(leaf).map_err(|e| CertError::Malformed(e.to_string()))?;
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let time = UnixTime::since_unix_epoch(since_epoch);
    end_entity
        .verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &[anchor],
            intermediates,
            time,
            KeyUsage::client_auth(),
            None,
            None,
        )
        .map_err(verdict)?;
    identity(leaf)
}

/// The error for webpki's verdict.
fn verdict(e: webpki::Error) -> CertError {
    use webpki::Error as E;
    match e {
        E::CertExpired { time, not_after } => CertError::Expired {
            now: rfc3339(time),
            not_after: rfc3339(not_after),
        },
        E::CertNotValidYet { time, not_before } => CertError::NotYetValid {
            now: rfc3339(time),
            not_before: rfc3339(not_before),
        },
        E::UnknownIssuer | E::InvalidSignatureForPublicKey => CertError::UnknownAuthority,
        E::RequiredEkuNotFoundContext(_) => CertError::NotForClientAuth,
        other => CertError::Malformed(other.to_string()),
    }
}

/// A `UnixTime` as RFC 3339 (Go prints times in its errors so).
fn rfc3339(t: UnixTime) -> String {
    i64::try_from(t.as_secs())
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .map_or_else(|| format!("{}s", t.as_secs()), |ts| ts.to_string())
}

/// The user and groups of a certificate's subject (Go's `pkix.Name`: the last CN, every O).
fn identity(cert: &CertificateDer<'_>) -> Result<ClientIdentity> {
    let (_, parsed) = x509_parser::certificate::X509Certificate::from_der(cert)
        .map_err(|e| CertError::Malformed(e.to_string()))?;
    let subject = parsed.subject();
    let text = |a: &x509_parser::x509::AttributeTypeAndValue<'_>| {
        a.as_str()
            .map(str::to_string)
            .map_err(|e| CertError::Malformed(format!("subject: {e}")))
    };
    let mut common_name = None;
    for cn in subject.iter_common_name() {
        common_name = Some(text(cn)?);
    }
    let organizations = subject
        .iter_organization()
        .map(text)
        .collect::<Result<Vec<_>>>()?;
    match common_name {
        Some(common_name) if !common_name.is_empty() => Ok(ClientIdentity {
            common_name,
            organizations,
        }),
        _ => Err(CertError::NoCommonName),
    }
}
