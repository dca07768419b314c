//! Round trips of certificates.k8s.io/v1 CertificateSigningRequest: what client-go's CSR
//! clients (`kubectl certificate approve`, a signer's `UpdateStatus`) send.

use super::fixtures::{object_meta, object_meta_json};
use super::{round_trip, s, strings, time};
use k8s_pb::api::certificates::v1 as certificates;
use serde_json::json;

#[test]
fn certificate_signing_requests() {
    let request = b"-----BEGIN CERTIFICATE REQUEST-----\n".to_vec();
    let csr = certificates::CertificateSigningRequest {
        metadata: Some(object_meta("alice")),
        spec: Some(certificates::CertificateSigningRequestSpec {
            request: Some(request),
            signer_name: s("kubernetes.io/kube-apiserver-client"),
            expiration_seconds: Some(86400),
            usages: strings(&["client auth"]),
            username: s("kubernetes-admin"),
            uid: Some(String::new()),
            groups: strings(&["system:masters", "system:authenticated"]),
            extra: [(
                "scopes".to_string(),
                certificates::ExtraValue {
                    items: strings(&["a"]),
                },
            )]
            .into(),
        }),
        status: Some(certificates::CertificateSigningRequestStatus {
            conditions: vec![certificates::CertificateSigningRequestCondition {
                r#type: s("Approved"),
                status: s("True"),
                reason: s("KubectlApprove"),
                message: s("This CSR was approved by kubectl certificate approve."),
                last_update_time: time(),
                last_transition_time: time(),
            }],
            certificate: Some(b"cert".to_vec()),
        }),
    };
    round_trip::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>(
        &csr,
        json!({
            "metadata": object_meta_json("alice"),
            "spec": {
                "request": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K",
                "signerName": "kubernetes.io/kube-apiserver-client",
                "expirationSeconds": 86400,
                "usages": ["client auth"],
                "username": "kubernetes-admin",
                "groups": ["system:masters", "system:authenticated"],
                "extra": {"scopes": ["a"]}
            },
            "status": {
                "conditions": [{
                    "type": "Approved", "status": "True", "reason": "KubectlApprove",
                    "message": "This CSR was approved by kubectl certificate approve.",
                    "lastUpdateTime": "2024-05-06T07:08:09Z",
                    "lastTransitionTime": "2024-05-06T07:08:09Z"
                }],
                "certificate": "Y2VydA=="
            }
        }),
    );
}
