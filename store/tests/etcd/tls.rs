//! `store::EtcdBackend` over TLS (kube-apiserver's `--etcd-cafile`, `--etcd-certfile`,
//! `--etcd-keyfile`): members serving `https://` and requiring client certificates
//! (`cluster.rs`, [`EtcdCluster::start_tls`]), with certificates made here with rcgen as an
//! etcd CA would issue them (kubeadm's `etcd/ca.crt`, `etcd/server.crt`,
//! `apiserver-etcd-client.crt`).

use super::cluster::{EtcdCluster, MemberTls};
use crate::common;
use bytes::Bytes;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;
use store::etcd::{EtcdTls, Pem};
use store::{Backend, Error, EtcdBackend, EtcdConfig, KeyRange};

/// How long a connection that cannot succeed is tried (the backend keeps trying until its
/// dial timeout, as kube-apiserver's client does).
const REFUSED_DIAL_TIMEOUT: Duration = Duration::from_secs(3);

/// A CA that writes what it issues into a directory.
struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    cert_file: PathBuf,
}

impl TestCa {
    /// A self-signed CA named `name`, its certificate at `dir/<name>.crt`.
    fn new(dir: &Path, name: &str) -> TestCa {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
            KeyUsagePurpose::KeyCertSign,
        ];
        let cert = params.self_signed(&key).unwrap();
        let cert_file = dir.join(format!("{name}.crt"));
        std::fs::write(&cert_file, cert.pem()).unwrap();
        TestCa {
            issuer: Issuer::new(params, key),
            cert_file,
        }
    }

    /// A certificate for `names` with the extended key `usages`, written to
    /// `dir/<file>.crt` and `dir/<file>.key`.
    fn issue(
        &self,
        dir: &Path,
        file: &str,
        names: &[&str],
        usages: Vec<ExtendedKeyUsagePurpose>,
    ) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, file);
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = usages;
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let (cert_file, key_file) = (
            dir.join(format!("{file}.crt")),
            dir.join(format!("{file}.key")),
        );
        std::fs::write(&cert_file, cert.pem()).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        (cert_file, key_file)
    }

    /// The members' serving certificate (kubeadm's `etcd/server.crt`: server and client auth).
    fn serving(&self, dir: &Path) -> (PathBuf, PathBuf) {
        use ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
        self.issue(
            dir,
            "server",
            &["127.0.0.1", "localhost"],
            vec![ServerAuth, ClientAuth],
        )
    }

    /// A client certificate (kubeadm's `apiserver-etcd-client.crt`).
    fn client(&self, dir: &Path, file: &str) -> (PathBuf, PathBuf) {
        self.issue(dir, file, &[], vec![ExtendedKeyUsagePurpose::ClientAuth])
    }
}

/// PEM files in a temporary directory: the etcd CA, the members' serving certificate and the
/// API server's client certificate, all of that CA.
struct Pki {
    dir: tempfile::TempDir,
    ca: TestCa,
    tls: MemberTls,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new(dir.path(), "etcd-ca");
        let (cert_file, key_file) = ca.serving(dir.path());
        let (client_cert_file, client_key_file) = ca.client(dir.path(), "apiserver-etcd-client");
        let tls = MemberTls {
            cert_file,
            key_file,
            trusted_ca_file: ca.cert_file.clone(),
            server_ca_file: ca.cert_file.clone(),
            client_cert_file,
            client_key_file,
        };
        Pki { dir, ca, tls }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn b(s: &str) -> Bytes {
    Bytes::from(s.to_string())
}

/// The message of a refused connection, which must be an I/O error.
async fn refused(config: EtcdConfig) -> (ErrorKind, String) {
    match EtcdBackend::connect(config).await {
        Ok(_) => panic!("connected"),
        Err(Error::Io(e)) => (e.kind(), e.to_string()),
        Err(e) => panic!("not an I/O error: {e:?}"),
    }
}

/// With the CA and a client certificate of the members' CA, the backend reads, writes and
/// watches over `https://`.
#[tokio::test]
async fn put_get_and_watch_over_tls_with_a_client_certificate() {
    let pki = Pki::new();
    let cluster = EtcdCluster::start_tls(3, pki.tls.clone()).await;
    assert!(
        cluster
            .endpoints()
            .iter()
            .all(|e| e.starts_with("https://"))
    );
    let config = cluster.config();
    assert_eq!(config.tls, Some(pki.tls.client()));
    let db = EtcdBackend::connect(config).await.unwrap();
    let mut w = common::watch(&db, KeyRange::Prefix(b("/tls/")), None).await;
    let first = db.put(b("/tls/a"), b("1")).await.unwrap().revision;
    let second = db.put(b("/tls/b"), b("2")).await.unwrap().revision;
    let got = db.get(b"/tls/a", None).await.unwrap();
    assert_eq!(got.kv.unwrap().value, b("1"));
    let events = common::collect_until(&mut w, second).await;
    let seen: Vec<(Bytes, store::Revision)> = events
        .iter()
        .map(|e| (e.kv.key.clone(), e.revision()))
        .collect();
    assert_eq!(seen, vec![(b("/tls/a"), first), (b("/tls/b"), second)]);
    // What etcd's own client sees over the same TLS.
    let mut raw = cluster.client().await;
    let resp = raw.get("/tls/b", None).await.unwrap();
    assert_eq!(resp.kvs()[0].value(), b"2");
    db.close().await;
}

/// Members that require a client certificate refuse a backend without one; the error names
/// the endpoints.
#[tokio::test]
async fn refused_without_a_client_certificate() {
    let pki = Pki::new();
    let cluster = EtcdCluster::start_tls(1, pki.tls.clone()).await;
    // With the client certificate: served.
    let db = EtcdBackend::connect(cluster.config()).await.unwrap();
    db.put(b("/k"), b("v")).await.unwrap();
    db.close().await;
    let mut config = cluster.config();
    config.dial_timeout = REFUSED_DIAL_TIMEOUT;
    config.tls = Some(EtcdTls::from_files(
        Some(pki.ca.cert_file.clone()),
        None,
        None,
    ));
    let (kind, message) = refused(config).await;
    assert_eq!(kind, ErrorKind::TimedOut, "{message}");
    let endpoints = cluster.endpoints().join(",");
    assert!(
        message.starts_with(&format!("etcd cluster [{endpoints}]: no answer within")),
        "{message}"
    );
}

/// A member whose serving certificate is of another CA than `--etcd-cafile` is refused, and
/// so is one the system's trust store does not know (no `--etcd-cafile`).
#[tokio::test]
async fn refuses_a_server_certificate_of_another_ca() {
    let pki = Pki::new();
    let other = TestCa::new(pki.dir.path(), "other-ca");
    let (cert_file, key_file) = other.serving(pki.dir.path());
    // The members serve a certificate of `other`; clients still need one of the etcd CA.
    let tls = MemberTls {
        cert_file,
        key_file,
        server_ca_file: other.cert_file.clone(),
        ..pki.tls.clone()
    };
    let cluster = EtcdCluster::start_tls(1, tls).await;
    let endpoints = cluster.endpoints().join(",");
    // The fixture's own configuration trusts `other`: it works.
    let db = EtcdBackend::connect(cluster.config()).await.unwrap();
    db.put(b("/k"), b("v")).await.unwrap();
    db.close().await;
    for ca in [Some(pki.ca.cert_file.clone()), None] {
        let mut config = cluster.config();
        config.dial_timeout = REFUSED_DIAL_TIMEOUT;
        config.tls = Some(EtcdTls::from_files(
            ca.clone(),
            Some(pki.tls.client_cert_file.clone()),
            Some(pki.tls.client_key_file.clone()),
        ));
        let (kind, message) = refused(config).await;
        assert!(
            message.starts_with(&format!("etcd cluster [{endpoints}]: ")),
            "{ca:?}: {message}"
        );
        if ca.is_none() && message.contains("no native certs found") {
            // No system trust store on this machine: refused before any handshake.
            continue;
        }
        assert_eq!(kind, ErrorKind::TimedOut, "{ca:?}: {message}");
        assert!(
            message.contains("invalid peer certificate: UnknownIssuer"),
            "{ca:?}: {message}"
        );
    }
}

/// `http://` members connect in plain text even with TLS files given (etcd's client drops the
/// credentials for `http`), as kube-apiserver does; the files are still checked.
#[tokio::test]
async fn http_members_ignore_good_tls_files_and_refuse_bad_ones() {
    let pki = Pki::new();
    let cluster = EtcdCluster::start(1).await;
    let mut config = cluster.config();
    config.tls = Some(pki.tls.client());
    let db = EtcdBackend::connect(config.clone()).await.unwrap();
    db.put(b("/plain"), b("v")).await.unwrap();
    db.close().await;
    config.tls = Some(EtcdTls::from_files(
        Some(pki.path("missing-ca.crt")),
        None,
        None,
    ));
    let (kind, message) = refused(config).await;
    assert_eq!(kind, ErrorKind::NotFound);
    assert!(
        message.contains(&format!(
            "--etcd-cafile {}: ",
            pki.path("missing-ca.crt").display()
        )),
        "{message}"
    );
}

/// Every file is read and checked before anything is sent: each error names the flag and the
/// file.
#[tokio::test]
async fn bad_tls_files_are_refused_naming_the_flag_and_the_file() {
    let pki = Pki::new();
    let garbage = pki.path("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let (other_cert, _) = pki.ca.client(pki.dir.path(), "someone-else");
    let ca = Some(pki.ca.cert_file.clone());
    let cert = Some(pki.tls.client_cert_file.clone());
    let key = Some(pki.tls.client_key_file.clone());
    let missing = pki.path("missing.key");
    let d = |p: &PathBuf| p.display().to_string();
    let cases: Vec<(EtcdTls, ErrorKind, String)> = vec![
        (
            EtcdTls::from_files(Some(pki.path("nope.crt")), cert.clone(), key.clone()),
            ErrorKind::NotFound,
            format!("--etcd-cafile {}: ", d(&pki.path("nope.crt"))),
        ),
        (
            EtcdTls::from_files(ca.clone(), cert.clone(), Some(missing.clone())),
            ErrorKind::NotFound,
            format!("--etcd-keyfile {}: ", d(&missing)),
        ),
        (
            EtcdTls::from_files(Some(garbage.clone()), None, None),
            ErrorKind::InvalidData,
            format!("--etcd-cafile {}: no PEM CERTIFICATE block", d(&garbage)),
        ),
        (
            // A key where the certificate belongs.
            EtcdTls::from_files(ca.clone(), key.clone(), key.clone()),
            ErrorKind::InvalidData,
            format!(
                "--etcd-certfile {}: no PEM CERTIFICATE block",
                d(&pki.tls.client_key_file)
            ),
        ),
        (
            // A certificate where the key belongs.
            EtcdTls::from_files(ca.clone(), cert.clone(), cert.clone()),
            ErrorKind::InvalidData,
            format!(
                "--etcd-keyfile {}: no private key",
                d(&pki.tls.client_cert_file)
            ),
        ),
        (
            // The key of another certificate.
            EtcdTls::from_files(ca.clone(), Some(other_cert.clone()), key.clone()),
            ErrorKind::InvalidData,
            format!(
                "--etcd-certfile {}, --etcd-keyfile {}: the key is not the certificate's key",
                d(&other_cert),
                d(&pki.tls.client_key_file)
            ),
        ),
        (
            EtcdTls::from_files(ca.clone(), cert.clone(), None),
            ErrorKind::InvalidInput,
            format!(
                "--etcd-certfile {} is given without --etcd-keyfile",
                d(&pki.tls.client_cert_file)
            ),
        ),
        (
            EtcdTls {
                ca: Some(Pem::Data(b"-----BEGIN CERTIFICATE-----\nAAAA\n".to_vec())),
                ..EtcdTls::default()
            },
            ErrorKind::InvalidData,
            "--etcd-cafile (PEM data): not PEM: no \"-----END CERTIFICATE-----\" line".into(),
        ),
    ];
    // Nothing listens there: a refusal before connecting is the only way to fail fast.
    let endpoint = "https://127.0.0.1:1";
    for (tls, kind, expected) in cases {
        let mut config = EtcdConfig::new([endpoint]);
        config.tls = Some(tls.clone());
        let (got_kind, message) = refused(config).await;
        assert!(
            message.starts_with(&format!("etcd cluster [{endpoint}]: {expected}")),
            "{tls:?}: {message}"
        );
        assert_eq!(got_kind, kind, "{tls:?}: {message}");
    }
}

/// Members given partly as `http://` and partly as `https://` are refused before connecting.
#[tokio::test]
async fn a_mix_of_http_and_https_members_is_refused() {
    let pki = Pki::new();
    let mut config = EtcdConfig::new(["https://127.0.0.1:1", "http://127.0.0.1:2"]);
    config.tls = Some(pki.tls.client());
    let (kind, message) = refused(config).await;
    assert_eq!(kind, ErrorKind::InvalidInput);
    assert!(
        message.contains("https://127.0.0.1:1 and http://127.0.0.1:2 mix plain and TLS"),
        "{message}"
    );
}
