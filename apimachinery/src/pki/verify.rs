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

/// Chains remembered by a [`ClientVerifier`] before it forgets them all and starts again: one
/// per client certificate in use, far more than a cluster's components and users.
const MAX_REMEMBERED_CHAINS: usize = 4096;

/// A chain [`ClientVerifier`] verified, and when all its certificates are valid.
#[derive(Debug, Clone)]
struct Verified {
    identity: ClientIdentity,
    not_before: SystemTime,
    not_after: SystemTime,
}

/// [`verify_client_chain`] against one CA, remembering each chain it verified with the window
/// in which every certificate of the chain is valid: the same chain inside that window is the
/// same verdict (the signatures and the CA do not change), so it is not verified again. Outside
/// the window, and for a chain it does not know, it verifies in full; failures are not
/// remembered. A client's every request carries its connection's chain, so this turns one
/// ECDSA verification per request into one per certificate (kube-apiserver verifies per
/// request; the verdicts are the same).
#[derive(Debug)]
pub struct ClientVerifier {
    ca_der: Vec<u8>,
    memo: std::sync::Mutex<std::collections::HashMap<Vec<u8>, Verified>>,
}

impl ClientVerifier {
    /// A verifier for chains issued by the CA certificate `ca_der`.
    pub fn new(ca_der: Vec<u8>) -> ClientVerifier {
        ClientVerifier {
            ca_der,
            memo: std::sync::Mutex::default(),
        }
    }

    /// [`verify_client_chain`]'s verdict on `chain` at `now`.
    pub fn verify(&self, chain: &[CertificateDer<'_>], now: SystemTime) -> Result<ClientIdentity> {
        let key: Vec<u8> = chain
            .iter()
            .flat_map(|c| c.as_ref().iter().copied())
            .collect();
        let known = self.lock().get(&key).cloned();
        if let Some(v) = known
            && v.not_before <= now
            && now <= v.not_after
        {
            return Ok(v.identity);
        }
        let identity = verify_client_chain(&self.ca_der, chain, now)?;
        if let Some((not_before, not_after)) = validity(chain) {
            let mut memo = self.lock();
            if memo.len() >= MAX_REMEMBERED_CHAINS {
                memo.clear();
            }
            memo.insert(
                key,
                Verified {
                    identity: identity.clone(),
                    not_before,
                    not_after,
                },
            );
        }
        Ok(identity)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<Vec<u8>, Verified>> {
        self.memo
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// When every certificate of `chain` is valid: the latest `notBefore` to the earliest
/// `notAfter` (`None` if one does not parse).
fn validity(chain: &[CertificateDer<'_>]) -> Option<(SystemTime, SystemTime)> {
    let mut window: Option<(SystemTime, SystemTime)> = None;
    for cert in chain {
        let (_, parsed) = x509_parser::certificate::X509Certificate::from_der(cert).ok()?;
        let at = |t: x509_parser::time::ASN1Time| {
            let secs = u64::try_from(t.timestamp()).ok()?;
            UNIX_EPOCH.checked_add(std::time::Duration::from_secs(secs))
        };
        let validity = parsed.validity();
        let (from, until) = (at(validity.not_before)?, at(validity.not_after)?);
        window = Some(match window {
            None => (from, until),
            Some((a, b)) => (a.max(from), b.min(until)),
        });
    }
    window
}
