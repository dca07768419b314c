use super::*;
use crate::strategy::messages;
use serde_json::json;

/// A CSR for `alice` in group `dev` (ECDSA P-256), base64 as `spec.request` holds it.
pub(crate) const REQUEST_BASE64: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlIWU1JR0FBZ0VBTUI0eEREQUtCZ05WQkFvTUEyUmxkakVPTUF3R0ExVUVBd3dGWVd4cFkyVXdXVEFUQmdjcQpoa2pPUFFJQkJnZ3Foa2pPUFFNQkJ3TkNBQVFrTk5Xdk1yRlJHRGdaNS9peU81WWxNREI4WDRTQS9iTm00QjBKCjhpTXlveUlLQ1J6UFZWT0IwRnhwSHNYUWpORk5XcHg4SHJ1N3RmUE9PdkVNWkNzSG9BQXdDZ1lJS29aSXpqMEUKQXdJRFJ3QXdSQUlnVGVCMjJ0WXZ6V1ZWRnZ5cXVtdHJWOHh5STFzRWRQTkFmd05VQWVuVVlXY0NJSEhrNVJwVQpWV0VFZzZhSDdqUzBOaVFuTlJ1ZjFNTWlETUE5SEFOd0ZVY0sKLS0tLS1FTkQgQ0VSVElGSUNBVEUgUkVRVUVTVC0tLS0tCg==";

fn csr() -> Value {
    json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": "alice", "uid": "u-1", "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"request": REQUEST_BASE64, "signerName": "kubernetes.io/kube-apiserver-client",
                 "usages": ["digital signature", "client auth"], "expirationSeconds": 86400},
    })
}

fn strategy() -> CertificateSigningRequestStrategy {
    CertificateSigningRequestStrategy::new()
}

fn created() -> Value {
    let s = strategy();
    let mut obj = csr();
    obj["spec"]["username"] = json!("mallory");
    obj["status"] = json!({"conditions": [{"type": "Approved", "status": "True"}]});
    s.set_requester(
        &mut obj,
        Some(&UserInfo::new("alice", &["dev", "system:authenticated"])),
    );
    let errs = s.admit_create(&mut obj).expect("decodes");
    assert_eq!(messages(&errs), Vec::<String>::new());
    obj
}

#[test]
fn create_records_the_requester_and_clears_the_status() {
    let obj = created();
    assert_eq!(obj["spec"]["username"], "alice");
    assert_eq!(
        obj["spec"]["groups"],
        json!(["dev", "system:authenticated"])
    );
    assert!(obj["spec"].get("uid").is_none());
    assert_eq!(obj["status"], json!({}));
}

#[test]
fn create_validation_has_kubernetes_messages() {
    let s = strategy();
    let mut bad = csr();
    bad["spec"]["request"] = json!("aGk="); // "hi"
    bad["spec"]["signerName"] = json!("example");
    bad["spec"]["usages"] = json!(["client auth", "flying", "client auth"]);
    bad["spec"]["expirationSeconds"] = json!(60);
    let errs = messages(&s.admit_create(&mut bad).expect("decodes"));
    assert_eq!(
        errs,
        vec![
            "spec.request: Invalid value: []byte{0x68, 0x69}: PEM block type must be CERTIFICATE REQUEST",
            "spec.usages[1]: Unsupported value: \"flying\": supported values: \"any\", \"cert sign\", \"client auth\", \"code signing\", \"content commitment\", \"crl sign\", \"data encipherment\", \"decipher only\", \"digital signature\", \"email protection\", \"encipher only\", \"ipsec end system\", \"ipsec tunnel\", \"ipsec user\", \"key agreement\", \"key encipherment\", \"microsoft sgc\", \"netscape sgc\", \"ocsp signing\", \"s/mime\", \"server auth\", \"signing\", \"timestamping\"",
            "spec.usages[2]: Duplicate value: \"client auth\"",
            "spec.signerName: Invalid value: \"example\": must be a fully qualified domain and path of the form 'example.com/signer-name'",
            "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)",
        ]
    );
    let mut no_signer = csr();
    no_signer["spec"]["signerName"] = json!("");
    no_signer["spec"]["usages"] = json!([]);
    assert_eq!(
        messages(&s.admit_create(&mut no_signer).expect("decodes")),
        vec![
            "spec.usages: Required value",
            "spec.signerName: Required value"
        ]
    );
    let mut one_label = csr();
    one_label["spec"]["signerName"] = json!("example/signer");
    assert_eq!(
        messages(&s.admit_create(&mut one_label).expect("decodes")),
        vec![
            "spec.signerName: Invalid value: \"example\": should be a domain with at least two segments separated by dots"
        ]
    );
}

#[test]
fn main_updates_keep_spec_and_status() {
    let s = strategy();
    let old = approved(&created());
    let mut new = old.clone();
    new["spec"]["signerName"] = json!("example.com/other");
    new["metadata"]["labels"] = json!({"team": "a"});
    // The registry has already put the stored status back (the status subresource split).
    let (errs, bumps) = s.admit_update(&mut new, &old, true).expect("decodes");
    assert_eq!(messages(&errs), Vec::<String>::new());
    assert!(!bumps);
    assert_eq!(new["spec"], old["spec"]);
    assert_eq!(new["metadata"]["labels"], json!({"team": "a"}));
}

fn approved(stored: &Value) -> Value {
    let mut new = stored.clone();
    new["status"] = json!({"conditions": [{"type": "Approved", "status": "True", "reason": "KubectlApprove",
                                           "message": "This CSR was approved by kubectl certificate approve."}]});
    let now: jiff::Timestamp = "2024-01-01T00:05:00Z".parse().expect("a time");
    let errs = strategy()
        .admit_subresource_update("approval", &mut new, stored, now)
        .expect("handled")
        .expect("decodes");
    assert_eq!(messages(&errs), Vec::<String>::new());
    new
}

#[test]
fn approval_sets_the_conditions_with_times_and_nothing_else() {
    let stored = created();
    let new = approved(&stored);
    let condition = &new["status"]["conditions"][0];
    assert_eq!(condition["type"], "Approved");
    assert_eq!(condition["lastUpdateTime"], "2024-01-01T00:05:00Z");
    assert_eq!(condition["lastTransitionTime"], "2024-01-01T00:05:00Z");
    assert!(new["status"].get("certificate").is_none());

    // Approved and Denied together are refused.
    let now = jiff::Timestamp::UNIX_EPOCH;
    let mut both = new.clone();
    both["status"]["conditions"]
        .as_array_mut()
        .expect("a list")
        .push(json!({"type": "Denied", "status": "True"}));
    let errs = strategy()
        .admit_subresource_update("approval", &mut both, &new, now)
        .expect("handled")
        .expect("decodes");
    assert_eq!(
        messages(&errs),
        vec![
            "status.conditions[1].type: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive"
        ]
    );
    // An approval cannot be taken back.
    let mut removed = new.clone();
    removed["status"]["conditions"] = json!([]);
    let errs = strategy()
        .admit_subresource_update("approval", &mut removed, &new, now)
        .expect("handled")
        .expect("decodes");
    assert_eq!(
        messages(&errs),
        vec![
            "status.conditions: Forbidden: updates may not remove a condition of type \"Approved\""
        ]
    );
}

#[test]
fn status_sets_the_certificate_once_and_cannot_approve() {
    let stored = approved(&created());
    let ca = apimachinery::pki::Ca::generate_in_memory(apimachinery::pki::Validity::default_cert())
        .expect("a CA");
    let cert = ca.cert_pem().to_string();
    let b64 = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(&cert)
    };
    let now = jiff::Timestamp::UNIX_EPOCH;
    let mut issued = stored.clone();
    issued["status"]["certificate"] = json!(b64);
    let errs = strategy()
        .admit_subresource_update("status", &mut issued, &stored, now)
        .expect("handled")
        .expect("decodes");
    assert_eq!(messages(&errs), Vec::<String>::new());
    assert_eq!(
        condition(&decode::<CertificateSigningRequest>(&issued).expect("a CSR")),
        "Approved,Issued"
    );

    let mut again = issued.clone();
    again["status"]["certificate"] = json!("LS0t");
    let errs = strategy()
        .admit_subresource_update("status", &mut again, &issued, now)
        .expect("handled")
        .expect("decodes");
    assert_eq!(
        messages(&errs),
        vec![
            "status.certificate: Invalid value: \"<certificate data>\": must contain at least one CERTIFICATE PEM block",
            "status.certificate: Forbidden: updates may not modify existing certificate content",
        ]
    );

    // `/status` cannot add a Denied condition.
    let mut denied = stored.clone();
    denied["status"]["conditions"]
        .as_array_mut()
        .expect("a list")
        .push(json!({"type": "Denied", "status": "True"}));
    let errs = strategy()
        .admit_subresource_update("status", &mut denied, &stored, now)
        .expect("handled")
        .expect("decodes");
    assert!(
        messages(&errs).contains(
            &"status.conditions: Forbidden: updates may not add a condition of type \"Denied\""
                .to_string()
        ),
        "{errs:?}"
    );
    // Nor the main resource set a certificate.
    assert!(
        strategy()
            .admit_subresource_update("scale", &mut denied, &stored, now)
            .is_none()
    );
}

#[test]
fn the_table_row_is_kubectls() {
    let s = strategy();
    let now: jiff::Timestamp = "2024-01-01T00:10:00Z".parse().expect("a time");
    let row = s.table_row(&created(), now);
    assert_eq!(
        row,
        vec![
            json!("10m"),
            json!("kubernetes.io/kube-apiserver-client"),
            json!("alice"),
            json!("24h"),
            json!("Pending")
        ]
    );
    let names: Vec<_> = s
        .table_columns()
        .iter()
        .map(|c| c.name.to_string())
        .collect();
    assert_eq!(
        names,
        [
            "Age",
            "SignerName",
            "Requestor",
            "RequestedDuration",
            "Condition"
        ]
    );
    let denied = {
        let mut d = created();
        d["status"] = json!({"conditions": [{"type": "Denied", "status": "True"}, {"type": "Failed", "status": "True"}]});
        d
    };
    assert_eq!(s.table_row(&denied, now)[4], json!("Denied,Failed"));
}
