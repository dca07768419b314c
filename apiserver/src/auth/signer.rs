//! Who may approve and who may sign a CertificateSigningRequest: kube-apiserver's
//! `CertificateApproval` and `CertificateSigning` admission plugins
//! (`plugin/pkg/admission/certificates/approval/admission.go`, `signing/admission.go`) over
//! `IsAuthorizedForSignerName` of `plugin/pkg/admission/certificates/util.go`.
//!
//! ```text
//!  PUT .../certificatesigningrequests/NAME/approval ─▶ `approve` on signers/<signerName>
//!  PUT .../certificatesigningrequests/NAME/status   ─▶ `sign` on signers/<signerName>
//!      (only when status.certificate or the conditions change)
//!  each: the exact signer name, else its domain's wildcard (`kubernetes.io/*`), in group
//!  certificates.k8s.io; else 403 `user not permitted to approve requests with signerName "x"`
//! ```
//!
//! The stored object's signer name is the one checked (a request cannot change it). Like the
//! escalation check, it is built only under RBAC, for users outside `system:masters`.

use super::attributes::Attributes;
use super::rbac::cache::PolicyCache;
use super::user::UserInfo;
use crate::error::ApiError;
use crate::registry::ResourceInfo;
use crate::storage::target;
use crate::strategy::certificates::GROUP;
use serde_json::Value;
use std::sync::Arc;

/// The CSR resource.
const RESOURCE: &str = "certificatesigningrequests";

/// Whether writes of `info` are checked (the CSRs).
pub fn applies_to(info: &ResourceInfo) -> bool {
    info.gvr.group == GROUP && info.gvr.resource == RESOURCE
}

/// The check for one request's write of a CSR subresource.
#[derive(Debug, Clone)]
pub struct SignerCheck {
    policy: Arc<PolicyCache>,
    user: UserInfo,
}

impl SignerCheck {
    /// The check for `user` over the RBAC objects in `policy`.
    pub fn new(policy: Arc<PolicyCache>, user: UserInfo) -> SignerCheck {
        SignerCheck { policy, user }
    }

    /// Whether the write of `new` through `subresource` (`approval` or `status`) over the
    /// stored `old` is allowed; other subresources are not checked.
    pub fn check(
        &self,
        info: &ResourceInfo,
        subresource: &str,
        new: &Value,
        old: &Value,
    ) -> Result<(), ApiError> {
        let verb = match subresource {
            "approval" => "approve",
            "status" => {
                let unchanged = |field: &str| {
                    new.pointer(&format!("/status/{field}"))
                        == old.pointer(&format!("/status/{field}"))
                };
                if unchanged("certificate") && unchanged("conditions") {
                    return Ok(());
                }
                "sign"
            }
            _ => return Ok(()),
        };
        let signer = old
            .pointer("/spec/signerName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if self.authorized(verb, signer) {
            return Ok(());
        }
        let name = old
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let target = target(info, name);
        let message = format!(
            "{} {} is forbidden: user not permitted to {verb} requests with signerName {}",
            target.group_resource(),
            apimachinery::fmt::go_quote(name),
            apimachinery::fmt::go_quote(signer)
        );
        Err(ApiError::Forbidden { target, message })
    }

    /// `IsAuthorizedForSignerName`: `verb` on `signers/<signer>`, else on `signers/<domain>/*`.
    pub fn authorized(&self, verb: &str, signer: &str) -> bool {
        let domain = signer.split('/').next().unwrap_or_default();
        [signer.to_string(), format!("{domain}/*")]
            .into_iter()
            .any(|name| {
                let attrs = Attributes {
                    user: self.user.clone(),
                    verb: verb.into(),
                    resource_request: true,
                    api_group: GROUP.into(),
                    api_version: "*".into(),
                    resource: "signers".into(),
                    name,
                    ..Attributes::default()
                };
                self.policy
                    .read(|s| super::rbac::authorize(s, &attrs))
                    .allowed
            })
    }
}
