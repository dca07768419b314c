use super::*;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequestCondition, CertificateSigningRequestSpec,
    CertificateSigningRequestStatus,
};

fn request(common_name: &str, organizations: &[&str]) -> CertificateRequest {
    CertificateRequest {
        der: Vec::new(),
        common_name: common_name.into(),
        organizations: organizations.iter().map(|o| o.to_string()).collect(),
        dns_names: Vec::new(),
        ip_addresses: Vec::new(),
        email_addresses: Vec::new(),
        uris: Vec::new(),
    }
}

fn csr(signer: &str, usages: &[&str], conditions: &[&str]) -> CertificateSigningRequest {
    CertificateSigningRequest {
        spec: CertificateSigningRequestSpec {
            signer_name: signer.into(),
            usages: Some(usages.iter().map(|u| u.to_string()).collect()),
            ..Default::default()
        },
        status: Some(CertificateSigningRequestStatus {
            conditions: Some(
                conditions
                    .iter()
                    .map(|t| CertificateSigningRequestCondition {
                        type_: t.to_string(),
                        status: "True".into(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            certificate: None,
        }),
        ..Default::default()
    }
}

const YEAR: Duration = DEFAULT_SIGNING_DURATION;

#[test]
fn only_approved_pending_csrs_of_its_signers_are_signed() {
    let alice = request("alice", &["dev"]);
    let usages = ["digital signature", "client auth"];
    assert_eq!(
        decide(&csr(KUBE_APISERVER_CLIENT, &usages, &[]), &alice, YEAR),
        Decision::Skip("not approved")
    );
    assert_eq!(
        decide(
            &csr(KUBE_APISERVER_CLIENT, &usages, &["Denied"]),
            &alice,
            YEAR
        ),
        Decision::Skip("not approved")
    );
    assert_eq!(
        decide(
            &csr(KUBE_APISERVER_CLIENT, &usages, &["Approved", "Failed"]),
            &alice,
            YEAR
        ),
        Decision::Skip("failed")
    );
    assert_eq!(
        decide(
            &csr("example.com/mine", &usages, &["Approved"]),
            &alice,
            YEAR
        ),
        Decision::Skip("another signer's")
    );
    let mut issued = csr(KUBE_APISERVER_CLIENT, &usages, &["Approved"]);
    if let Some(s) = issued.status.as_mut() {
        s.certificate = Some(ByteString(b"cert".to_vec()));
    }
    assert_eq!(
        decide(&issued, &alice, YEAR),
        Decision::Skip("already issued")
    );
    assert_eq!(
        decide(
            &csr(KUBE_APISERVER_CLIENT, &usages, &["Approved"]),
            &alice,
            YEAR
        ),
        Decision::Sign(YEAR)
    );
}

#[test]
fn the_client_signer_refuses_other_usages_with_kubernetes_messages() {
    let alice = request("alice", &["dev"]);
    assert_eq!(
        decide(
            &csr(
                KUBE_APISERVER_CLIENT,
                &["client auth", "server auth"],
                &["Approved"]
            ),
            &alice,
            YEAR
        ),
        Decision::Fail("invalid usage for client certificate: server auth".into())
    );
    assert_eq!(
        decide(
            &csr(KUBE_APISERVER_CLIENT, &["digital signature"], &["Approved"]),
            &alice,
            YEAR
        ),
        Decision::Fail("missing required usage for client certificate: client auth".into())
    );
}

#[test]
fn kubelet_signers_check_subjects_names_and_usages() {
    let node = request("system:node:node-0", &["system:nodes"]);
    let client = ["digital signature", "client auth"];
    assert_eq!(
        decide(
            &csr(KUBE_APISERVER_CLIENT_KUBELET, &client, &["Approved"]),
            &node,
            YEAR
        ),
        Decision::Sign(YEAR)
    );
    assert_eq!(
        decide(
            &csr(KUBE_APISERVER_CLIENT_KUBELET, &client, &["Approved"]),
            &request("alice", &["dev"]),
            YEAR
        ),
        Decision::Fail("subject organization is not system:nodes".into())
    );
    assert_eq!(
        decide(
            &csr(
                KUBE_APISERVER_CLIENT_KUBELET,
                &["client auth"],
                &["Approved"]
            ),
            &node,
            YEAR
        ),
        Decision::Fail(
            "usages did not match [client auth digital signature key encipherment]".into()
        )
    );
    let serving = ["digital signature", "server auth"];
    assert_eq!(
        decide(&csr(KUBELET_SERVING, &serving, &["Approved"]), &node, YEAR),
        Decision::Fail("DNS or IP subjectAltName is required".into())
    );
    let mut named = node.clone();
    named.dns_names.push("node-0".into());
    assert_eq!(
        decide(&csr(KUBELET_SERVING, &serving, &["Approved"]), &named, YEAR),
        Decision::Sign(YEAR)
    );
}

#[test]
fn the_duration_is_the_requested_one_within_bounds() {
    assert_eq!(duration(None, YEAR), YEAR);
    assert_eq!(duration(Some(3600), YEAR), Duration::from_secs(3600));
    assert_eq!(duration(Some(60), YEAR), MIN_DURATION);
    assert_eq!(duration(Some(i32::MAX), YEAR), YEAR);
}
