//! Certificate signing requests as Kubernetes reads them: the PEM `CERTIFICATE REQUEST` of a
//! `certificates.k8s.io/v1` CertificateSigningRequest parsed and its signature checked
//! (`pkg/apis/certificates/helpers.go` `ParseCSR` and Go's `CheckSignature`), the usage
//! strings turned into X.509 key usages (`pkg/controller/certificates/authority/policies.go`
//! `keyUsagesFromStrings`) and the validity a signer gives the certificate
//! (`PermissiveSigningPolicy.apply`: backdated, shortened, capped by the CA).
//!
//! ```text
//!   spec.request (PEM) ─▶ parse_csr ─▶ CertificateRequest { subject, SANs, DER }
//!   spec.usages        ─▶ key_usages ─▶ KeyUsages { key usages, extended key usages }
//!   now, TTL, CA end   ─▶ signing_validity ─▶ Validity { now - 5m, now + TTL (- 5m) }
//! ```

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use rcgen::{ExtendedKeyUsagePurpose, KeyUsagePurpose};
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer as _;

use super::{CertError, Result, Validity};

/// The PEM block type of a certificate signing request.
pub const CSR_PEM_TYPE: &str = "CERTIFICATE REQUEST";

/// How far before signing a signed CSR's certificate starts to be valid (the signer's
/// `Backdate`: five minutes).
pub const SIGNING_BACKDATE: Duration = Duration::from_secs(5 * 60);

/// Certificates shorter than this are not shortened by the backdate (the signer's `Short`:
/// eight hours, of which five minutes is about 1%).
pub const SIGNING_SHORT: Duration = Duration::from_secs(8 * 60 * 60);

/// A parsed certificate signing request whose signature has been checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateRequest {
    /// The request, DER.
    pub der: Vec<u8>,
    /// The subject's common name (empty when it has none).
    pub common_name: String,
    /// The subject's organizations, in order.
    pub organizations: Vec<String>,
    /// DNS subject alternative names.
    pub dns_names: Vec<String>,
    /// IP subject alternative names.
    pub ip_addresses: Vec<IpAddr>,
    /// Email subject alternative names.
    pub email_addresses: Vec<String>,
    /// URI subject alternative names.
    pub uris: Vec<String>,
}

/// Why a `spec.request` is refused, worded as Kubernetes words it (the detail of
/// `spec.request: Invalid value: ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CsrError {
    /// The first PEM block is missing or is not a `CERTIFICATE REQUEST` (`ParseCSR`).
    #[error("PEM block type must be CERTIFICATE REQUEST")]
    NotACsr,
    /// The DER does not parse as a PKCS#10 request (Go's `x509.ParseCertificateRequest`).
    #[error("x509: malformed certificate request")]
    Malformed,
    /// The request's signature does not verify (Go's `CheckSignature`; the ECDSA wording).
    #[error("x509: ECDSA verification failure")]
    BadSignature,
}

/// Parses the first PEM block of `pem` as a certificate signing request and checks its
/// signature: what `ValidateCertificateSigningRequestCreate` checks of `spec.request`, and what
/// the signer reads.
pub fn parse_csr(pem: &[u8]) -> Result<CertificateRequest, CsrError> {
    // Go's pem.Decode takes the first block of any type; ParseCSR then wants a request.
    let mut reader = pem;
    let (kind, der) = match rustls::pki_types::pem::from_buf(&mut reader) {
        Ok(Some((kind, der))) => (kind, der),
        _ => return Err(CsrError::NotACsr),
    };
    if kind != rustls::pki_types::pem::SectionKind::Csr {
        return Err(CsrError::NotACsr);
    }
    let (_, parsed) = x509_parser::certification_request::X509CertificationRequest::from_der(&der)
        .map_err(|_| CsrError::Malformed)?;
    parsed
        .verify_signature()
        .map_err(|_| CsrError::BadSignature)?;
    let subject = &parsed.certification_request_info.subject;
    let common_name = subject
        .iter_common_name()
        .next()
        .and_then(|a| a.as_str().ok())
        .unwrap_or_default()
        .to_string();
    let organizations = subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok())
        .map(str::to_string)
        .collect();
    let mut request = CertificateRequest {
        der: der.clone(),
        common_name,
        organizations,
        dns_names: Vec::new(),
        ip_addresses: Vec::new(),
        email_addresses: Vec::new(),
        uris: Vec::new(),
    };
    for extension in parsed.requested_extensions().into_iter().flatten() {
        let ParsedExtension::SubjectAlternativeName(san) = extension else {
            continue;
        };
        for name in &san.general_names {
            match name {
                GeneralName::DNSName(d) => request.dns_names.push(d.to_string()),
                GeneralName::RFC822Name(e) => request.email_addresses.push(e.to_string()),
                GeneralName::URI(u) => request.uris.push(u.to_string()),
                GeneralName::IPAddress(bytes) => {
                    if let Ok(v4) = <[u8; 4]>::try_from(*bytes) {
                        request.ip_addresses.push(IpAddr::from(v4));
                    } else if let Ok(v6) = <[u8; 16]>::try_from(*bytes) {
                        request.ip_addresses.push(IpAddr::from(v6));
                    }
                }
                _ => {}
            }
        }
    }
    Ok(request)
}

/// The key usages and extended key usages of a certificate, from the
/// `certificates.k8s.io/v1` usage strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyUsages {
    /// The `keyUsage` bits.
    pub key_usages: Vec<KeyUsagePurpose>,
    /// The `extKeyUsage` purposes, without duplicates, in Go's order of `x509.ExtKeyUsage`.
    pub extended: Vec<ExtendedKeyUsagePurpose>,
}

/// `keyUsagesFromStrings`: the X.509 usages the `usages` strings name. An unknown string is
/// [`CertError::UnsupportedUsage`] (Go: `unrecognized usage values: ["x"]`).
pub fn key_usages(usages: &[&str]) -> Result<KeyUsages> {
    let mut key_usages = Vec::new();
    let mut extended: Vec<(u8, ExtendedKeyUsagePurpose)> = Vec::new();
    let mut unrecognized = Vec::new();
    for usage in usages {
        let key = match *usage {
            "signing" | "digital signature" => Some(KeyUsagePurpose::DigitalSignature),
            "content commitment" => Some(KeyUsagePurpose::ContentCommitment),
            "key encipherment" => Some(KeyUsagePurpose::KeyEncipherment),
            "key agreement" => Some(KeyUsagePurpose::KeyAgreement),
            "data encipherment" => Some(KeyUsagePurpose::DataEncipherment),
            "cert sign" => Some(KeyUsagePurpose::KeyCertSign),
            "crl sign" => Some(KeyUsagePurpose::CrlSign),
            "encipher only" => Some(KeyUsagePurpose::EncipherOnly),
            "decipher only" => Some(KeyUsagePurpose::DecipherOnly),
            _ => None,
        };
        if let Some(key) = key {
            if !key_usages.contains(&key) {
                key_usages.push(key);
            }
            continue;
        }
        // Go's x509.ExtKeyUsage numbering, which sorts them.
        let ext = match *usage {
            "any" => Some((0, ExtendedKeyUsagePurpose::Any)),
            "server auth" => Some((1, ExtendedKeyUsagePurpose::ServerAuth)),
            "client auth" => Some((2, ExtendedKeyUsagePurpose::ClientAuth)),
            "code signing" => Some((3, ExtendedKeyUsagePurpose::CodeSigning)),
            "email protection" | "s/mime" => Some((4, ExtendedKeyUsagePurpose::EmailProtection)),
            "ipsec end system" => Some((
                5,
                ExtendedKeyUsagePurpose::Other(vec![1, 3, 6, 1, 5, 5, 7, 3, 5]),
            )),
            "ipsec tunnel" => Some((
                6,
                ExtendedKeyUsagePurpose::Other(vec![1, 3, 6, 1, 5, 5, 7, 3, 6]),
            )),
            "ipsec user" => Some((
                7,
                ExtendedKeyUsagePurpose::Other(vec![1, 3, 6, 1, 5, 5, 7, 3, 7]),
            )),
            "timestamping" => Some((8, ExtendedKeyUsagePurpose::TimeStamping)),
            "ocsp signing" => Some((9, ExtendedKeyUsagePurpose::OcspSigning)),
            "microsoft sgc" => Some((
                10,
                ExtendedKeyUsagePurpose::Other(vec![1, 3, 6, 1, 4, 1, 311, 10, 3, 3]),
            )),
            "netscape sgc" => Some((
                11,
                ExtendedKeyUsagePurpose::Other(vec![2, 16, 840, 1, 113730, 4, 1]),
            )),
            _ => None,
        };
        match ext {
            Some(ext) if !extended.iter().any(|(n, _)| *n == ext.0) => extended.push(ext),
            Some(_) => {}
            None => unrecognized.push(format!("{usage:?}")),
        }
    }
    if !unrecognized.is_empty() {
        return Err(CertError::UnsupportedUsage(format!(
            "unrecognized usage values: [{}]",
            unrecognized.join(" ")
        )));
    }
    extended.sort_by_key(|(n, _)| *n);
    Ok(KeyUsages {
        key_usages,
        extended: extended.into_iter().map(|(_, e)| e).collect(),
    })
}

/// The validity of a certificate signed at `now` for `ttl` by a CA valid until
/// `signer_not_after` (`PermissiveSigningPolicy.apply`): from [`SIGNING_BACKDATE`] before
/// `now`; until `now + ttl` for a TTL under [`SIGNING_SHORT`], else `now + ttl - backdate`
/// (the certificate lasts `ttl` in all); never past the CA's end. Refused once the CA has
/// expired, with Kubernetes' messages.
pub fn signing_validity(
    now: SystemTime,
    ttl: Duration,
    signer_not_after: SystemTime,
) -> Result<Validity> {
    let not_before = now.checked_sub(SIGNING_BACKDATE).unwrap_or(now);
    let end = if ttl < SIGNING_SHORT {
        now.checked_add(ttl)
    } else {
        now.checked_add(ttl.saturating_sub(SIGNING_BACKDATE))
    };
    let not_after = match end {
        Some(end) if end < signer_not_after => end,
        _ => signer_not_after,
    };
    let rfc3339 = |t: SystemTime| {
        jiff::Timestamp::try_from(t)
            .map(|t| t.to_string())
            .unwrap_or_default()
    };
    if not_before >= signer_not_after {
        return Err(CertError::Issue(format!(
            "the signer has expired: NotAfter={}",
            rfc3339(signer_not_after)
        )));
    }
    if now >= signer_not_after {
        return Err(CertError::Issue(format!(
            "refusing to sign a certificate that expired in the past: NotAfter={}",
            rfc3339(signer_not_after)
        )));
    }
    Ok(Validity {
        not_before,
        not_after,
    })
}

/// `validateCertificate` of `pkg/apis/certificates/validation`: what a CSR's
/// `status.certificate` may hold: nothing, or PEM `CERTIFICATE` blocks only, each a
/// certificate. The error is Kubernetes' detail.
pub fn check_certificate_pem(pem: &[u8]) -> Result<(), String> {
    use rustls::pki_types::pem::SectionKind;
    if pem.is_empty() {
        return Ok(());
    }
    let mut reader = pem;
    let mut blocks = 0;
    loop {
        match rustls::pki_types::pem::from_buf(&mut reader) {
            Ok(Some((SectionKind::Certificate, der))) => {
                x509_parser::certificate::X509Certificate::from_der(&der)
                    .map_err(|_| "x509: malformed certificate".to_string())?;
                blocks += 1;
            }
            Ok(Some((kind, _))) => {
                return Err(format!(
                    "only CERTIFICATE PEM blocks are allowed, found {:?}",
                    pem_label(kind)
                ));
            }
            Ok(None) => break,
            Err(_) => return Err("x509: malformed certificate".to_string()),
        }
    }
    if blocks == 0 {
        return Err("must contain at least one CERTIFICATE PEM block".to_string());
    }
    Ok(())
}

/// A PEM section's label.
fn pem_label(kind: rustls::pki_types::pem::SectionKind) -> &'static str {
    use rustls::pki_types::pem::SectionKind as K;
    match kind {
        K::Certificate => "CERTIFICATE",
        K::PublicKey => "PUBLIC KEY",
        K::RsaPrivateKey => "RSA PRIVATE KEY",
        K::PrivateKey => "PRIVATE KEY",
        K::EcPrivateKey => "EC PRIVATE KEY",
        K::Crl => "X509 CRL",
        K::Csr => "CERTIFICATE REQUEST",
        _ => "UNKNOWN",
    }
}
