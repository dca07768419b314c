use std::os::unix::fs::PermissionsExt as _;
use std::time::{Duration, SystemTime};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use x509_parser::prelude::FromDer as _;

use super::*;

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

fn ca() -> Ca {
    Ca::generate_in_memory(Validity::from_now(CA_VALIDITY)).expect("a CA")
}

fn chain(cert_pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .expect("PEM certificates")
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path)
        .expect("the file")
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn the_ca_persists_across_load_or_create() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let pki = dir.path().join("pki");
    let first = Ca::load_or_create(&pki).expect("created");
    let second = Ca::load_or_create(&pki).expect("loaded");
    assert_eq!(first.cert_pem(), second.cert_pem());
    assert_eq!(mode(&pki.join(CA_KEY_FILE)), 0o600);
    assert_eq!(mode(&pki.join(CA_CERT_FILE)), 0o644);
    let mut names: Vec<_> = std::fs::read_dir(&pki)
        .expect("the directory")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    assert_eq!(names, [CA_CERT_FILE, CA_KEY_FILE], "no temporary file left");

    // The loaded CA signs what the first one's certificate verifies.
    let client = second
        .issue_client("alice", &[], Validity::default_cert())
        .expect("issued");
    let id = verify_client_chain(
        first.cert_der(),
        &chain(&client.cert_pem),
        SystemTime::now(),
    )
    .expect("verified");
    assert_eq!(id.common_name, "alice");

    let (_, cert) = x509_parser::certificate::X509Certificate::from_der(first.cert_der())
        .expect("a certificate");
    assert!(cert.is_ca());
    let cn: Vec<_> = cert
        .subject()
        .iter_common_name()
        .map(|a| a.as_str().expect("a string"))
        .collect();
    assert_eq!(cn, [CA_COMMON_NAME]);
    let years = (cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp())
        / (365 * 24 * 60 * 60);
    assert_eq!(years, 10);
}

#[test]
fn processes_creating_the_ca_together_end_up_with_one() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let pki = dir.path().join("pki");
    let barrier = std::sync::Barrier::new(4);
    let created: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    Ca::load_or_create(&pki)
                        .expect("created or loaded")
                        .cert_pem()
                        .to_string()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect()
    });
    let on_disk = Ca::load_or_create(&pki).expect("loaded");
    for cert_pem in created {
        assert_eq!(cert_pem, on_disk.cert_pem());
    }
}

#[test]
fn a_key_left_without_its_certificate_is_replaced_but_a_lone_certificate_is_an_error() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let first = Ca::load_or_create(dir.path()).expect("created");
    std::fs::remove_file(dir.path().join(CA_CERT_FILE)).expect("removed");
    let second = Ca::load_or_create(dir.path()).expect("created again");
    assert_ne!(first.cert_pem(), second.cert_pem());

    std::fs::remove_file(dir.path().join(CA_KEY_FILE)).expect("removed");
    let err = Ca::load_or_create(dir.path()).expect_err("no key");
    assert!(matches!(err, CertError::Incomplete { .. }), "{err}");
    assert!(err.to_string().contains("ca.key"), "{err}");
}

#[test]
fn a_key_that_is_not_the_certificates_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    Ca::load_or_create(dir.path()).expect("created");
    let other = tempfile::tempdir().expect("a temporary directory");
    Ca::load_or_create(other.path()).expect("created");
    std::fs::copy(other.path().join(CA_KEY_FILE), dir.path().join(CA_KEY_FILE)).expect("copied");
    let err = Ca::load_or_create(dir.path()).expect_err("a mismatched key");
    assert!(err.to_string().contains("not the key"), "{err}");
}

#[test]
fn a_client_certificate_carries_its_user_and_every_group() {
    let ca = ca();
    let client = ca
        .issue_client(
            "alice",
            &["system:masters", "dev"],
            Validity::default_cert(),
        )
        .expect("issued");
    assert!(client.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
    let key =
        rustls::pki_types::PrivateKeyDer::from_pem_slice(client.key_pem.as_bytes()).expect("a key");
    assert!(matches!(key, rustls::pki_types::PrivateKeyDer::Pkcs8(_)));
    let id = verify_client_chain(ca.cert_der(), &chain(&client.cert_pem), SystemTime::now())
        .expect("verified");
    assert_eq!(
        id,
        ClientIdentity {
            common_name: "alice".to_string(),
            organizations: vec!["system:masters".to_string(), "dev".to_string()],
        }
    );
    // One year, from five minutes ago.
    let certs = chain(&client.cert_pem);
    let (_, cert) =
        x509_parser::certificate::X509Certificate::from_der(&certs[0]).expect("a certificate");
    let validity = cert.validity();
    assert_eq!(
        validity.not_after.timestamp() - validity.not_before.timestamp(),
        (CERT_VALIDITY + CERT_BACKDATE).as_secs() as i64
    );
}

#[test]
fn a_certificate_of_another_ca_is_an_unknown_authority() {
    let (ca, other) = (ca(), ca());
    let client = other
        .issue_client("mallory", &["system:masters"], Validity::default_cert())
        .expect("issued");
    let err = verify_client_chain(ca.cert_der(), &chain(&client.cert_pem), SystemTime::now())
        .expect_err("another CA");
    assert!(matches!(err, CertError::UnknownAuthority), "{err:?}");
    assert_eq!(
        err.to_string(),
        "x509: certificate signed by unknown authority"
    );
}

#[test]
fn an_expired_certificate_and_one_not_yet_valid_are_refused() {
    let ca = ca();
    let now = SystemTime::now();
    let past = Validity {
        not_before: now - 2 * DAY,
        not_after: now - DAY,
    };
    let expired = ca.issue_client("alice", &[], past).expect("issued");
    let err =
        verify_client_chain(ca.cert_der(), &chain(&expired.cert_pem), now).expect_err("expired");
    assert!(matches!(err, CertError::Expired { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("x509: certificate has expired or is not yet valid: current time "),
        "{err}"
    );

    let future = Validity {
        not_before: now + DAY,
        not_after: now + 2 * DAY,
    };
    let early = ca.issue_client("alice", &[], future).expect("issued");
    let err =
        verify_client_chain(ca.cert_der(), &chain(&early.cert_pem), now).expect_err("not yet");
    assert!(matches!(err, CertError::NotYetValid { .. }), "{err:?}");

    let backwards = Validity {
        not_before: now,
        not_after: now - DAY,
    };
    assert!(ca.issue_client("alice", &[], backwards).is_err());
}

#[test]
fn a_serving_certificate_is_not_for_client_auth() {
    let ca = ca();
    let serving = ca
        .issue_serving(
            &["127.0.0.1".to_string(), "localhost".to_string()],
            Validity::default_cert(),
        )
        .expect("issued");
    let certs = chain(&serving.cert_pem);
    let err = verify_client_chain(ca.cert_der(), &certs, SystemTime::now())
        .expect_err("server auth only");
    assert!(matches!(err, CertError::NotForClientAuth), "{err:?}");

    let (_, cert) =
        x509_parser::certificate::X509Certificate::from_der(&certs[0]).expect("a certificate");
    let sans = cert
        .subject_alternative_name()
        .expect("parsed")
        .expect("present");
    assert_eq!(sans.value.general_names.len(), 2);
    let cn: Vec<_> = cert
        .subject()
        .iter_common_name()
        .map(|a| a.as_str().expect("a string"))
        .collect();
    assert_eq!(cn, [SERVING_COMMON_NAME]);

    let kubelet = ca
        .issue_serving_named("kubelet", &["node-0".to_owned()], Validity::default_cert())
        .expect("issued");
    let certs = chain(&kubelet.cert_pem);
    let (_, cert) =
        x509_parser::certificate::X509Certificate::from_der(&certs[0]).expect("a certificate");
    let cn: Vec<_> = cert
        .subject()
        .iter_common_name()
        .map(|a| a.as_str().expect("a string"))
        .collect();
    assert_eq!(cn, ["kubelet"]);
}

#[test]
fn a_certificate_without_a_common_name_or_an_empty_chain_is_refused() {
    let ca = ca();
    let nameless = ca
        .issue_client("", &["system:masters"], Validity::default_cert())
        .expect("issued");
    let err = verify_client_chain(ca.cert_der(), &chain(&nameless.cert_pem), SystemTime::now())
        .expect_err("no CN");
    assert!(matches!(err, CertError::NoCommonName), "{err:?}");
    let err = verify_client_chain(ca.cert_der(), &[], SystemTime::now()).expect_err("no chain");
    assert!(matches!(err, CertError::NoCertificate), "{err:?}");
    let garbage = [CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x00])];
    let err = verify_client_chain(ca.cert_der(), &garbage, SystemTime::now()).expect_err("junk");
    assert!(matches!(err, CertError::Malformed(_)), "{err:?}");
}

/// A CSR as `openssl req` or client-go's `certificate/csr` makes one.
fn csr(common_name: &str, organization: &str) -> rcgen::CertificateSigningRequest {
    let key = rcgen::KeyPair::generate().expect("a key");
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, organization);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, common_name);
    params.serialize_request(&key).expect("a CSR")
}

#[test]
fn a_signed_csr_keeps_its_subject_and_is_for_client_auth() {
    let ca = ca();
    let request = csr("bob", "dev");
    let usages = ["digital signature", "key encipherment", "client auth"];
    let from_pem = ca
        .sign_csr(
            request.pem().expect("PEM").as_bytes(),
            Validity::default_cert(),
            &usages,
        )
        .expect("signed");
    let from_der = ca
        .sign_csr(request.der(), Validity::default_cert(), &usages)
        .expect("signed");
    for cert_pem in [from_pem, from_der] {
        let certs = chain(&cert_pem);
        let id = verify_client_chain(ca.cert_der(), &certs, SystemTime::now()).expect("verified");
        assert_eq!(id.common_name, "bob");
        assert_eq!(id.organizations, ["dev"]);
        // The subject is the CSR's, byte for byte.
        let (_, cert) =
            x509_parser::certificate::X509Certificate::from_der(&certs[0]).expect("parsed");
        let (_, parsed) =
            x509_parser::certification_request::X509CertificationRequest::from_der(request.der())
                .expect("parsed");
        assert_eq!(
            cert.subject().as_raw(),
            parsed.certification_request_info.subject.as_raw()
        );
        assert!(!cert.is_ca());
    }

    let err = ca
        .sign_csr(
            request.der(),
            Validity::default_cert(),
            &["client auth", "flying"],
        )
        .expect_err("not a usage");
    assert_eq!(err.to_string(), r#"unrecognized usage values: ["flying"]"#);

    // A CSR whose signature does not match its content.
    let mut tampered = request.der().to_vec();
    let last = tampered.len() - 1;
    tampered[last] ^= 0x01;
    let err = ca
        .sign_csr(&tampered, Validity::default_cert(), &usages)
        .expect_err("bad signature");
    assert!(matches!(err, CertError::Invalid { .. }), "{err:?}");
}

#[test]
fn the_serving_config_speaks_http1_and_requests_any_client_certificate() {
    use rustls::server::danger::ClientCertVerifier as _;
    let ca = ca();
    let serving = ca
        .issue_serving(&["127.0.0.1".to_string()], Validity::default_cert())
        .expect("issued");
    let config = tls_server_config(&serving.cert_pem, &serving.key_pem, Some(ca.cert_pem()))
        .expect("a config");
    assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);

    let verifier = RequestClientCert::new(ca.cert_pem(), &rustls::crypto::ring::default_provider())
        .expect("a verifier");
    assert!(verifier.offer_client_auth());
    assert!(!verifier.client_auth_mandatory());
    // The hint is the CA's subject (a DER Name).
    let (_, ca_cert) =
        x509_parser::certificate::X509Certificate::from_der(ca.cert_der()).expect("parsed");
    let hints = verifier.root_hint_subjects();
    assert_eq!(hints.len(), 1);
    assert_eq!(hints[0].as_ref(), ca_cert.subject().as_raw());
    // Any certificate passes the handshake: the chain is judged per request.
    let stranger = self::ca()
        .issue_client("mallory", &[], Validity::default_cert())
        .expect("issued");
    let certs = chain(&stranger.cert_pem);
    assert!(
        verifier
            .verify_client_cert(&certs[0], &[], rustls::pki_types::UnixTime::now())
            .is_ok()
    );
    assert!(!verifier.supported_verify_schemes().is_empty());

    tls_server_config(&serving.cert_pem, &serving.key_pem, None).expect("a config");
    let err = tls_server_config(&serving.cert_pem, &stranger.key_pem, None)
        .expect_err("the key of another certificate");
    assert!(matches!(err, CertError::Tls(_)), "{err:?}");
}

#[test]
fn write_cert_and_key_gives_the_key_mode_0600() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let issued = ca()
        .issue_client("alice", &[], Validity::default_cert())
        .expect("issued");
    let (cert, key) = write_cert_and_key(dir.path(), "admin", &issued).expect("written");
    assert_eq!(mode(&key), 0o600);
    assert_eq!(mode(&cert), 0o644);
    assert_eq!(
        std::fs::read_to_string(&key).expect("the key"),
        issued.key_pem
    );
}

#[test]
fn a_csr_is_parsed_with_its_names_and_refused_as_kubernetes_words_it() {
    let request = csr("alice", "dev");
    let pem = request.pem().expect("PEM");
    let parsed = parse_csr(pem.as_bytes()).expect("parsed");
    assert_eq!(parsed.common_name, "alice");
    assert_eq!(parsed.organizations, ["dev"]);
    assert_eq!(parsed.der, request.der().to_vec());
    assert!(parsed.dns_names.is_empty() && parsed.ip_addresses.is_empty());

    let ca = ca();
    assert_eq!(
        parse_csr(ca.cert_pem().as_bytes()).expect_err("a certificate"),
        CsrError::NotACsr
    );
    assert_eq!(
        parse_csr(b"hello").expect_err("no PEM").to_string(),
        "PEM block type must be CERTIFICATE REQUEST"
    );
    let garbage =
        "-----BEGIN CERTIFICATE REQUEST-----\naGVsbG8=\n-----END CERTIFICATE REQUEST-----\n";
    assert_eq!(
        parse_csr(garbage.as_bytes())
            .expect_err("not DER")
            .to_string(),
        "x509: malformed certificate request"
    );
    let mut tampered = request.der().to_vec();
    let last = tampered.len() - 1;
    tampered[last] ^= 0x01;
    let tampered = rustls::pki_types::CertificateSigningRequestDer::from(tampered);
    let tampered_pem = pem_of("CERTIFICATE REQUEST", tampered.as_ref());
    assert_eq!(
        parse_csr(tampered_pem.as_bytes()).expect_err("bad signature"),
        CsrError::BadSignature
    );
}

fn pem_of(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    format!("-----BEGIN {label}-----\n{b64}\n-----END {label}-----\n")
}

#[test]
fn usages_map_to_key_usages_in_gos_order() {
    let usages = key_usages(&[
        "client auth",
        "digital signature",
        "server auth",
        "key encipherment",
    ])
    .expect("known");
    assert_eq!(
        usages.key_usages,
        [
            rcgen::KeyUsagePurpose::DigitalSignature,
            rcgen::KeyUsagePurpose::KeyEncipherment
        ]
    );
    assert_eq!(
        usages.extended,
        [
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        ]
    );
    assert_eq!(
        key_usages(&["a", "b"]).expect_err("unknown").to_string(),
        r#"unrecognized usage values: ["a" "b"]"#
    );
}

#[test]
fn the_signing_validity_is_backdated_shortened_and_capped_by_the_ca() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    let year = 365 * DAY;
    let ca_end = now + 10 * year;
    // A long certificate: backdated, and as long in all as asked.
    let v = signing_validity(now, year, ca_end).expect("valid");
    assert_eq!(v.not_before, now - SIGNING_BACKDATE);
    assert_eq!(v.not_after, now + year - SIGNING_BACKDATE);
    // A short one (under 8 hours) keeps its whole TTL after now.
    let hour = Duration::from_secs(3600);
    let v = signing_validity(now, hour, ca_end).expect("valid");
    assert_eq!(v.not_after, now + hour);
    // Never past the CA.
    let v = signing_validity(now, 20 * year, ca_end).expect("valid");
    assert_eq!(v.not_after, ca_end);
    let err = signing_validity(now, hour, now - hour).expect_err("expired CA");
    assert!(
        err.to_string()
            .contains("the signer has expired: NotAfter="),
        "{err}"
    );
}

#[test]
fn a_ca_knows_when_it_ends() {
    let validity = Validity::from_now(CA_VALIDITY);
    let ca = Ca::generate_in_memory(validity).expect("a CA");
    let end = ca
        .not_after()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    let want = validity
        .not_after
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    assert_eq!(end, want);
}

#[test]
fn a_verifier_remembers_a_chain_only_inside_its_validity() {
    let other = ca();
    let ca = ca();
    let now = SystemTime::now();
    let verifier = ClientVerifier::new(ca.cert_der().to_vec());
    let window = Validity {
        not_before: now - DAY,
        not_after: now + DAY,
    };
    let alice = ca.issue_client("alice", &["dev"], window).expect("issued");
    let certs = chain(&alice.cert_pem);
    let first = verifier.verify(&certs, now).expect("valid");
    assert_eq!(first.common_name, "alice");
    assert_eq!(first.organizations, vec!["dev".to_string()]);
    // Remembered: the same verdict again, and past notAfter the full check's refusal.
    assert_eq!(verifier.verify(&certs, now).expect("valid"), first);
    let err = verifier
        .verify(&certs, now + 2 * DAY)
        .expect_err("expired since");
    assert!(matches!(err, CertError::Expired { .. }), "{err:?}");
    let err = verifier
        .verify(&certs, now - 2 * DAY)
        .expect_err("not yet valid then");
    assert!(matches!(err, CertError::NotYetValid { .. }), "{err:?}");
    // Another CA's chain is refused every time, remembered or not.
    let mallory = other
        .issue_client("alice", &[], Validity::default_cert())
        .expect("issued");
    for _ in 0..2 {
        let err = verifier
            .verify(&chain(&mallory.cert_pem), now)
            .expect_err("another CA");
        assert!(matches!(err, CertError::UnknownAuthority), "{err:?}");
    }
}
