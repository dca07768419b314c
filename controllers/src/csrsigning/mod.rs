//! The CSR signing controller: it issues the certificates of approved
//! CertificateSigningRequests for Kubernetes' built-in signers with the cluster CA. Mirrors
//! `pkg/controller/certificates/signer/signer.go` (`CSRSigningController`, `signer.handle`,
//! `duration`, `isKubeAPIServerClient`, `isKubeletClient`, `isKubeletServing`), the checks of
//! `pkg/apis/certificates/helpers.go` (`ValidateKubeletClientCSR`, `ValidateKubeletServingCSR`)
//! and `pkg/controller/certificates/certificate_controller_utils.go`; run by
//! kube-controller-manager as `csrsigning`, with `--cluster-signing-cert-file`,
//! `--cluster-signing-key-file` and `--cluster-signing-duration`.
//!
//! ```text
//!   CSR informer ─ add/update ─▶ queue "certificate" (CSR names)
//!     sync(name): decide(csr, parsed request)
//!        not approved, failed, issued, another signer ─▶ nothing
//!        the signer's rules refuse it ─▶ Failed condition (SignerValidationFailure) via /status
//!        else ─▶ sign with the CA for min(expirationSeconds, --cluster-signing-duration)
//!                (at least 10 minutes), backdated 5 minutes ─▶ status.certificate via /status
//! ```
//!
//! The decision is [`decide`], a plain function of the CSR and its parsed request; the async
//! shell is [`controller`]. Unlike Kubernetes, which runs one controller per signer and
//! reloads the CA files when they change, one controller serves the three signers and the CA
//! is read once at start.

pub mod controller;

use std::time::Duration;

use apimachinery::pki::CertificateRequest;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;

/// `kubernetes.io/kube-apiserver-client`: client certificates the API server honours.
pub const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";

/// `kubernetes.io/kube-apiserver-client-kubelet`: kubelets' client certificates.
pub const KUBE_APISERVER_CLIENT_KUBELET: &str = "kubernetes.io/kube-apiserver-client-kubelet";

/// `kubernetes.io/kubelet-serving`: kubelets' serving certificates.
pub const KUBELET_SERVING: &str = "kubernetes.io/kubelet-serving";

/// The signers this controller serves.
pub const SIGNERS: [&str; 3] = [
    KUBE_APISERVER_CLIENT,
    KUBE_APISERVER_CLIENT_KUBELET,
    KUBELET_SERVING,
];

/// `--cluster-signing-duration`'s default: a year (8760h).
pub const DEFAULT_SIGNING_DURATION: Duration = Duration::from_secs(8760 * 60 * 60);

/// The shortest certificate a signer issues (`duration`'s `min`: ten minutes).
pub const MIN_DURATION: Duration = Duration::from_secs(10 * 60);

/// The reason of the `Failed` condition the signer sets.
pub const SIGNER_VALIDATION_FAILURE: &str = "SignerValidationFailure";

/// What the controller does with a CSR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing: why, for the trace (`not approved`, `already issued`, ...).
    Skip(&'static str),
    /// Mark it `Failed` with this message (the signer's rules refuse it).
    Fail(String),
    /// Sign it, valid this long.
    Sign(Duration),
}

/// `signer.handle`'s decision for `csr`, whose `spec.request` parsed as `request`, with the
/// longest duration `max_duration` (`--cluster-signing-duration`).
pub fn decide(
    csr: &CertificateSigningRequest,
    request: &CertificateRequest,
    max_duration: Duration,
) -> Decision {
    if !has_true_condition(csr, "Approved") || has_true_condition(csr, "Denied") {
        return Decision::Skip("not approved");
    }
    if has_true_condition(csr, "Failed") {
        return Decision::Skip("failed");
    }
    if csr
        .status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .is_some_and(|c| !c.0.is_empty())
    {
        return Decision::Skip("already issued");
    }
    if !SIGNERS.contains(&csr.spec.signer_name.as_str()) {
        return Decision::Skip("another signer's");
    }
    let usages: Vec<&str> = csr
        .spec
        .usages
        .iter()
        .flatten()
        .map(String::as_str)
        .collect();
    let check = match csr.spec.signer_name.as_str() {
        KUBE_APISERVER_CLIENT => valid_api_server_client_usages(&usages),
        KUBE_APISERVER_CLIENT_KUBELET => validate_kubelet_client(request, &usages),
        _ => validate_kubelet_serving(request, &usages),
    };
    match check {
        Err(message) => Decision::Fail(message),
        Ok(()) => Decision::Sign(duration(csr.spec.expiration_seconds, max_duration)),
    }
}

/// Whether `csr` has a condition of `type_` with status `True` (`HasTrueCondition`; an
/// Approved or Denied condition without a status counts, as `IsCertificateRequestApproved`
/// reads them).
pub fn has_true_condition(csr: &CertificateSigningRequest, type_: &str) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == type_ && (c.status == "True" || c.status.is_empty()))
}

/// `signer.duration`: the requested `expirationSeconds`, at most `max` and at least
/// [`MIN_DURATION`]; `max` when none was requested.
pub fn duration(expiration_seconds: Option<i32>, max: Duration) -> Duration {
    let Some(seconds) = expiration_seconds else {
        return max;
    };
    let requested = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
    requested.min(max).max(MIN_DURATION)
}

/// `validAPIServerClientUsages`: digital signature, key encipherment and client auth only,
/// client auth required.
fn valid_api_server_client_usages(usages: &[&str]) -> Result<(), String> {
    let mut client_auth = false;
    for usage in usages {
        match *usage {
            "digital signature" | "key encipherment" => {}
            "client auth" => client_auth = true,
            other => return Err(format!("invalid usage for client certificate: {other}")),
        }
    }
    if !client_auth {
        return Err("missing required usage for client certificate: client auth".into());
    }
    Ok(())
}

/// Whether `usages` is exactly one of `allowed` (as sets).
fn usages_equal(usages: &[&str], allowed: &[&[&str]]) -> bool {
    let set: std::collections::BTreeSet<&str> = usages.iter().copied().collect();
    allowed.iter().any(|a| {
        set == a
            .iter()
            .copied()
            .collect::<std::collections::BTreeSet<&str>>()
    })
}

/// `ValidateKubeletClientCSR`.
fn validate_kubelet_client(request: &CertificateRequest, usages: &[&str]) -> Result<(), String> {
    if request.organizations != ["system:nodes"] {
        return Err("subject organization is not system:nodes".into());
    }
    if !request.dns_names.is_empty() {
        return Err("DNS subjectAltNames are not allowed".into());
    }
    if !request.email_addresses.is_empty() {
        return Err("Email subjectAltNames are not allowed".into());
    }
    if !request.ip_addresses.is_empty() {
        return Err("IP subjectAltNames are not allowed".into());
    }
    if !request.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".into());
    }
    if !request.common_name.starts_with("system:node:") {
        return Err("subject common name does not begin with system:node:".into());
    }
    let rsa: &[&str] = &["client auth", "digital signature", "key encipherment"];
    let no_rsa: &[&str] = &["client auth", "digital signature"];
    if !usages_equal(usages, &[rsa, no_rsa]) {
        return Err("usages did not match [client auth digital signature key encipherment]".into());
    }
    Ok(())
}

/// `ValidateKubeletServingCSR`.
fn validate_kubelet_serving(request: &CertificateRequest, usages: &[&str]) -> Result<(), String> {
    if request.organizations != ["system:nodes"] {
        return Err("subject organization is not system:nodes".into());
    }
    if request.dns_names.is_empty() && request.ip_addresses.is_empty() {
        return Err("DNS or IP subjectAltName is required".into());
    }
    if !request.email_addresses.is_empty() {
        return Err("Email subjectAltNames are not allowed".into());
    }
    if !request.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".into());
    }
    let rsa: &[&str] = &["digital signature", "key encipherment", "server auth"];
    let no_rsa: &[&str] = &["digital signature", "server auth"];
    if !usages_equal(usages, &[rsa, no_rsa]) {
        return Err("usages did not match [digital signature key encipherment server auth]".into());
    }
    if !request.common_name.starts_with("system:node:") {
        return Err("subject common name does not begin with system:node:".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
