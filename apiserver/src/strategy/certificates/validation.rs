//! The validation of a CertificateSigningRequest (`pkg/apis/certificates/validation/
//! validation.go`, and `ValidateSignerName` of `pkg/apis/core/validation/names.go`), with
//! Kubernetes' messages.
//!
//! One function checks an object against [`Options`]; create, update, `/status` and
//! `/approval` differ only in the options (`getValidationOptions`): an update may carry on
//! what the stored object already had (a legacy signer, duplicate conditions, unknown usages),
//! `/status` may set the certificate, `/approval` the Approved and Denied conditions.
//!
//! Simplification: a changed Approved or Denied condition is refused with Kubernetes' message
//! but without the `cmp.Diff` of the two conditions that follows it there.

use crate::strategy::FieldError;
use crate::strategy::field::{FieldPath, Rendered};
use apimachinery::validation::{is_dns1123_label, is_dns1123_subdomain};
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};

/// The signer name the v1 API refuses on new objects (`LegacyUnknownSignerName`).
pub const LEGACY_UNKNOWN_SIGNER: &str = "kubernetes.io/legacy-unknown";

/// The condition types that may only be `True`.
const TRUE_CONDITION_TYPES: [&str; 3] = ["Approved", "Denied", "Failed"];

/// Every usage string `certificates.k8s.io/v1` knows (`allValidUsages`), sorted as Go lists
/// them in its "supported values".
pub const VALID_USAGES: [&str; 23] = [
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// `certificateValidationOptions`: what a write may do beyond the create rules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// `/approval`: Approved and Denied conditions may be added or changed.
    pub allow_setting_approval_conditions: bool,
    /// `/status`: `status.certificate` may be set once.
    pub allow_setting_certificate: bool,
    /// The stored object already has both Approved and Denied.
    pub allow_both_approved_and_denied: bool,
    /// The stored object has the legacy signer.
    pub allow_legacy_signer_name: bool,
    /// The stored object has two conditions of one type.
    pub allow_duplicate_condition_types: bool,
    /// The stored object has a condition without a type.
    pub allow_empty_condition_type: bool,
    /// The certificate is unchanged, or the stored one was already invalid.
    pub allow_arbitrary_certificate: bool,
    /// The stored object has an unknown usage.
    pub allow_unknown_usages: bool,
    /// The stored object has a usage twice.
    pub allow_duplicate_usages: bool,
}

impl Options {
    /// `getValidationOptions(new, old)`.
    pub fn of(new: &CertificateSigningRequest, old: Option<&CertificateSigningRequest>) -> Options {
        let Some(old) = old else {
            return Options::default();
        };
        let conditions = old_conditions(old);
        let has = |t: &str| conditions.iter().any(|c| c.type_ == t);
        let mut seen = std::collections::BTreeSet::new();
        let duplicate_types = conditions.iter().any(|c| !seen.insert(c.type_.as_str()));
        let usages = usages(old);
        let mut seen = std::collections::BTreeSet::new();
        let duplicate_usages = usages.iter().any(|u| !seen.insert(u.as_str()));
        Options {
            allow_setting_approval_conditions: false,
            allow_setting_certificate: false,
            allow_both_approved_and_denied: has("Approved") && has("Denied"),
            allow_legacy_signer_name: old.spec.signer_name == LEGACY_UNKNOWN_SIGNER,
            allow_duplicate_condition_types: duplicate_types,
            allow_empty_condition_type: conditions.iter().any(|c| c.type_.is_empty()),
            allow_arbitrary_certificate: certificate(new) == certificate(old)
                || validate_certificate(certificate(old)).is_err(),
            allow_unknown_usages: usages.iter().any(|u| !VALID_USAGES.contains(&u.as_str())),
            allow_duplicate_usages: duplicate_usages,
        }
    }
}

fn old_conditions(csr: &CertificateSigningRequest) -> &[CertificateSigningRequestCondition] {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
}

fn usages(csr: &CertificateSigningRequest) -> &[String] {
    csr.spec.usages.as_deref().unwrap_or_default()
}

/// `status.certificate`'s bytes (empty when unset).
pub fn certificate(csr: &CertificateSigningRequest) -> &[u8] {
    csr.status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .map(|c| c.0.as_slice())
        .unwrap_or_default()
}

/// Go's `%#v` of a `[]byte`: `[]byte{0x2d, 0x2d}`.
fn go_bytes(bytes: &[u8]) -> Rendered {
    let items: Vec<String> = bytes.iter().map(|b| format!("{b:#x}")).collect();
    Rendered(format!("[]byte{{{}}}", items.join(", ")))
}

/// `validateCSR` (the detail of `spec.request`'s error): a PEM `CERTIFICATE REQUEST` whose
/// signature verifies.
fn validate_request(request: &[u8]) -> Result<(), String> {
    apimachinery::pki::parse_csr(request)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// `validateCertificate`: an empty certificate, or PEM `CERTIFICATE` blocks only, each a
/// certificate.
pub fn validate_certificate(pem: &[u8]) -> Result<(), String> {
    apimachinery::pki::check_certificate_pem(pem)
}

/// `validateCertificateSigningRequest`: the object's own fields (metadata is checked by the
/// typed strategy).
pub fn validate(csr: &CertificateSigningRequest, opts: Options) -> Vec<FieldError> {
    let spec = FieldPath::new("spec");
    let mut errs = Vec::new();
    if let Err(detail) = validate_request(&csr.spec.request.0) {
        errs.push(FieldError::invalid(
            &spec.child("request"),
            go_bytes(&csr.spec.request.0),
            &detail,
        ));
    }
    let usages = usages(csr);
    if usages.is_empty() {
        errs.push(FieldError::required(&spec.child("usages"), ""));
    }
    if !opts.allow_unknown_usages {
        for (i, usage) in usages.iter().enumerate() {
            if !VALID_USAGES.contains(&usage.as_str()) {
                errs.push(FieldError::not_supported(
                    &spec.child("usages").index(i),
                    usage,
                    &VALID_USAGES,
                ));
            }
        }
    }
    if !opts.allow_duplicate_usages {
        let mut seen = std::collections::BTreeSet::new();
        for (i, usage) in usages.iter().enumerate() {
            if !seen.insert(usage.as_str()) {
                errs.push(FieldError::duplicate(&spec.child("usages").index(i), usage));
            }
        }
    }
    let signer = &csr.spec.signer_name;
    if !opts.allow_legacy_signer_name && signer == LEGACY_UNKNOWN_SIGNER {
        errs.push(FieldError::invalid(
            &spec.child("signerName"),
            signer,
            "the legacy signerName is not allowed via this API version",
        ));
    } else {
        errs.extend(validate_signer_name(&spec.child("signerName"), signer));
    }
    if let Some(seconds) = csr.spec.expiration_seconds.filter(|s| *s < 600) {
        errs.push(FieldError::invalid(
            &spec.child("expirationSeconds"),
            seconds,
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
    errs.extend(validate_conditions(csr, opts));
    if !opts.allow_arbitrary_certificate
        && let Err(detail) = validate_certificate(certificate(csr))
    {
        errs.push(FieldError::invalid(
            &FieldPath::new("status").child("certificate"),
            "<certificate data>",
            &detail,
        ));
    }
    errs
}

/// `validateConditions`.
fn validate_conditions(csr: &CertificateSigningRequest, opts: Options) -> Vec<FieldError> {
    let path = FieldPath::new("status").child("conditions");
    let mut errs = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let (mut approved, mut denied) = (false, false);
    for (i, c) in old_conditions(csr).iter().enumerate() {
        let at = path.index(i);
        if !opts.allow_empty_condition_type && c.type_.is_empty() {
            errs.push(FieldError::required(&at.child("type"), ""));
        }
        let allowed: &[&str] = if TRUE_CONDITION_TYPES.contains(&c.type_.as_str()) {
            &["True"]
        } else {
            &["False", "True", "Unknown"]
        };
        if c.status.is_empty() {
            errs.push(FieldError::required(&at.child("status"), ""));
        } else if !allowed.contains(&c.status.as_str()) {
            errs.push(FieldError::not_supported(
                &at.child("status"),
                &c.status,
                allowed,
            ));
        }
        if !opts.allow_both_approved_and_denied {
            let exclusive = "Approved and Denied conditions are mutually exclusive";
            match c.type_.as_str() {
                "Approved" => {
                    approved = true;
                    if denied {
                        errs.push(FieldError::invalid(&at.child("type"), &c.type_, exclusive));
                    }
                }
                "Denied" => {
                    denied = true;
                    if approved {
                        errs.push(FieldError::invalid(&at.child("type"), &c.type_, exclusive));
                    }
                }
                _ => {}
            }
        }
        if !opts.allow_duplicate_condition_types && !seen.insert(c.type_.as_str()) {
            errs.push(FieldError::duplicate(&at.child("type"), &c.type_));
        }
    }
    errs
}

/// `validateCertificateSigningRequestUpdate`: the object's rules under `opts`, then what an
/// update may not do to the conditions and the certificate (metadata is checked by the caller).
pub fn validate_update(
    new: &CertificateSigningRequest,
    old: &CertificateSigningRequest,
    opts: Options,
) -> Vec<FieldError> {
    let mut errs = validate(new, opts);
    let path = FieldPath::new("status").child("conditions");
    let of_type =
        |csr: &CertificateSigningRequest, t: &str| -> Vec<CertificateSigningRequestCondition> {
            old_conditions(csr)
                .iter()
                .filter(|c| c.type_ == t)
                .cloned()
                .collect()
        };
    for t in ["Approved", "Denied", "Failed"] {
        if of_type(new, t).len() < of_type(old, t).len() {
            errs.push(FieldError::forbidden(
                &path,
                &format!("updates may not remove a condition of type {t:?}"),
            ));
        }
    }
    if !opts.allow_setting_approval_conditions {
        for t in ["Approved", "Denied"] {
            let (before, after) = (of_type(old, t), of_type(new, t));
            if after.len() < before.len() {
                // Reported above.
            } else if after.len() > before.len() {
                errs.push(FieldError::forbidden(
                    &path,
                    &format!("updates may not add a condition of type {t:?}"),
                ));
            } else if after != before {
                errs.push(FieldError::forbidden(
                    &path,
                    &format!("updates may not modify a condition of type {t:?}"),
                ));
            }
        }
    }
    if certificate(new) != certificate(old) {
        let cert = FieldPath::new("status").child("certificate");
        if !opts.allow_setting_certificate {
            errs.push(FieldError::forbidden(
                &cert,
                "updates may not set certificate content",
            ));
        } else if !certificate(old).is_empty() {
            errs.push(FieldError::forbidden(
                &cert,
                "updates may not modify existing certificate content",
            ));
        }
    }
    errs
}

/// `ValidateSignerName`: `<domain>/<path>`, the domain two or more DNS labels, the path DNS
/// subdomains separated by dots, 571 characters at most.
pub fn validate_signer_name(path: &FieldPath, signer: &str) -> Vec<FieldError> {
    const DOMAIN_MAX: usize = 253;
    const SIGNER_MAX: usize = DOMAIN_MAX + (253 + 63 + 1) + 1;
    if signer.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let segments: Vec<&str> = signer.split('/').collect();
    let [domain, rest] = segments.as_slice() else {
        return vec![FieldError::invalid(
            path,
            signer,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        )];
    };
    let mut errs = Vec::new();
    if domain.len() > DOMAIN_MAX {
        errs.push(FieldError::too_long(path, DOMAIN_MAX));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    for label in &labels {
        let problems = is_dns1123_label(label);
        if !problems.is_empty() {
            for p in problems {
                errs.push(FieldError::invalid(
                    path,
                    *domain,
                    &format!("validating label {label:?}: {p}"),
                ));
            }
            break;
        }
    }
    if labels.len() < 2 {
        errs.push(FieldError::invalid(
            path,
            *domain,
            "should be a domain with at least two segments separated by dots",
        ));
    }
    for label in rest.split('.') {
        let problems = is_dns1123_subdomain(label);
        if !problems.is_empty() {
            for p in problems {
                errs.push(FieldError::invalid(
                    path,
                    *rest,
                    &format!("validating label {label:?}: {p}"),
                ));
            }
            break;
        }
    }
    if signer.len() > SIGNER_MAX {
        errs.push(FieldError::too_long(path, SIGNER_MAX));
    }
    errs
}
