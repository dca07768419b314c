//! TLS to the etcd members: kube-apiserver's `--etcd-cafile`, `--etcd-certfile` and
//! `--etcd-keyfile`.
//!
//! Mirrors `newETCD3Client` in
//! `staging/src/k8s.io/apiserver/pkg/storage/storagebackend/factory/etcd3.go`: the three files
//! become etcd's `transport.TLSInfo`, whose `ClientConfig` makes the client's TLS settings (no
//! file at all: none), and etcd's client v3 decides from the endpoints' scheme whether they
//! are used (`client/v3/internal/endpoint`, `schemeToCredsRequirement`):
//!
//! | `--etcd-servers` | files | connection |
//! |---|---|---|
//! | `http://` | none or any | plain; the files are still read and checked, then unused (etcd's client drops the credentials for `http`) |
//! | `https://` | none | TLS; the members are verified with the system's trust store; no client certificate |
//! | `https://` | `--etcd-cafile` | the members are verified with that CA only |
//! | `https://` | `--etcd-certfile`, `--etcd-keyfile` | that client certificate is presented to the members |
//! | `host:port` | none / any | plain / TLS (etcd's client: credentials used when given) |
//!
//! `--etcd-certfile` without `--etcd-keyfile` (or the other way round) is refused, as etcd's
//! `TLSInfo` refuses it. Every file is read and checked before anything is sent; each error
//! names the flag and the file.
//!
//! Simplified against kube-apiserver: endpoints mixing `http://` and `https://` are refused
//! (etcd's client takes the first endpoint's scheme for all of them); a CA file without a
//! certificate is refused (Go makes an empty pool of it, which trusts no member); the client
//! certificate and key are read once, at connect (etcd's client reads them again for every new
//! connection, so a renewed certificate is used without a restart); other schemes (`unix://`,
//! `unixs://`) are refused. TLS is rustls with ring: TLS 1.2 and 1.3, as Go's defaults.

use super::etcd;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::io::ErrorKind;
use std::path::PathBuf;
use std::sync::Arc;

/// kube-apiserver's flag for the CA file.
const CA_FLAG: &str = "--etcd-cafile";
/// kube-apiserver's flag for the client certificate file.
const CERT_FLAG: &str = "--etcd-certfile";
/// kube-apiserver's flag for the client key file.
const KEY_FLAG: &str = "--etcd-keyfile";

/// A PEM text: the file a flag names, or the text itself.
#[derive(Clone, PartialEq, Eq)]
pub enum Pem {
    /// A file, read when the backend connects.
    File(PathBuf),
    /// The PEM text itself.
    Data(Vec<u8>),
}

impl std::fmt::Display for Pem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pem::File(path) => write!(f, "{}", path.display()),
            Pem::Data(_) => f.write_str("(PEM data)"),
        }
    }
}

impl std::fmt::Debug for Pem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pem::File(path) => f.debug_tuple("File").field(path).finish(),
            // A key's text stays out of logs.
            Pem::Data(data) => write!(f, "Data({} bytes)", data.len()),
        }
    }
}

/// The TLS files of kube-apiserver's etcd client (see the module docs of `store::etcd`). All
/// `None` is the same as no TLS settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EtcdTls {
    /// `--etcd-cafile`: the CA (one or more PEM certificates) the members' serving
    /// certificates are verified with; `None`: the system's trust store.
    pub ca: Option<Pem>,
    /// `--etcd-certfile`: the client certificate presented to the members (PEM; the chain
    /// after the leaf). Needs [`EtcdTls::key`].
    pub cert: Option<Pem>,
    /// `--etcd-keyfile`: the private key of [`EtcdTls::cert`] (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: Option<Pem>,
}

impl EtcdTls {
    /// The settings of the three flags' files.
    pub fn from_files(ca: Option<PathBuf>, cert: Option<PathBuf>, key: Option<PathBuf>) -> Self {
        EtcdTls {
            ca: ca.map(Pem::File),
            cert: cert.map(Pem::File),
            key: key.map(Pem::File),
        }
    }

    /// Whether no file is given.
    pub fn is_empty(&self) -> bool {
        self.ca.is_none() && self.cert.is_none() && self.key.is_none()
    }
}

/// Why the TLS settings cannot be used.
#[derive(Debug)]
pub(crate) struct Refused {
    /// The kind of the backend's [`crate::Error::Io`].
    pub(crate) kind: ErrorKind,
    /// What is wrong, naming the flag and the file.
    pub(crate) message: String,
}

fn refused(kind: ErrorKind, message: String) -> Refused {
    Refused { kind, message }
}

/// The PEM files checked and read.
struct Loaded {
    /// The CA's PEM.
    ca: Option<Vec<u8>>,
    /// The client certificate's and key's PEM.
    identity: Option<(Vec<u8>, Vec<u8>)>,
}

/// The etcd client's TLS options for `endpoints` with `tls`: `None` for plain connections.
/// Reads and checks every file first (see the module docs).
pub(crate) fn client_options(
    endpoints: &[String],
    tls: Option<&EtcdTls>,
) -> Result<Option<etcd::TlsOptions>, Refused> {
    let tls = tls.filter(|t| !t.is_empty());
    let loaded = match tls {
        Some(tls) => Some(load(tls)?),
        None => None,
    };
    if !secure(endpoints, loaded.is_some())? {
        if loaded.is_some() {
            tracing::warn!(
                "{CA_FLAG}/{CERT_FLAG}/{KEY_FLAG} are not used for the http:// endpoints {}",
                endpoints.join(",")
            );
        }
        return Ok(None);
    }
    let mut options = etcd::TlsOptions::new();
    let Some(loaded) = loaded else {
        return Ok(Some(options.with_native_roots()));
    };
    options = match loaded.ca {
        Some(ca) => options.ca_certificate(etcd::Certificate::from_pem(ca)),
        None => options.with_native_roots(),
    };
    if let Some((cert, key)) = loaded.identity {
        options = options.identity(etcd::Identity::from_pem(cert, key));
    }
    Ok(Some(options))
}

/// Whether the endpoints are reached over TLS: `https://` yes, `http://` no, no scheme when
/// TLS files are given. Refuses other schemes and a mix.
fn secure(endpoints: &[String], files: bool) -> Result<bool, Refused> {
    let mut first: Option<(bool, &str)> = None;
    for endpoint in endpoints {
        let tls = if endpoint.starts_with("https://") {
            true
        } else if endpoint.starts_with("http://") {
            false
        } else if endpoint.contains("://") {
            return Err(refused(
                ErrorKind::InvalidInput,
                format!("endpoint {endpoint}: the client URLs must be http:// or https://"),
            ));
        } else {
            files
        };
        match first {
            None => first = Some((tls, endpoint)),
            Some((was, other)) if was != tls => {
                return Err(refused(
                    ErrorKind::InvalidInput,
                    format!(
                        "endpoints {other} and {endpoint} mix plain and TLS connections: give \
                         every member as http:// or every member as https://"
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(first.is_some_and(|(tls, _)| tls))
}

/// Reads and checks the files: each parses, the CA's certificates can be trusted, the key is
/// the certificate's.
fn load(tls: &EtcdTls) -> Result<Loaded, Refused> {
    let pair = match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        (Some(cert), None) => {
            return Err(refused(
                ErrorKind::InvalidInput,
                format!(
                    "{CERT_FLAG} {cert} is given without {KEY_FLAG}: the client certificate \
                     and its key must both be present"
                ),
            ));
        }
        (None, Some(key)) => {
            return Err(refused(
                ErrorKind::InvalidInput,
                format!(
                    "{KEY_FLAG} {key} is given without {CERT_FLAG}: the client certificate \
                     and its key must both be present"
                ),
            ));
        }
    };
    let mut roots = rustls::RootCertStore::empty();
    let ca = match &tls.ca {
        Some(source) => {
            let pem = read(CA_FLAG, source)?;
            for cert in certificates(CA_FLAG, source, &pem)? {
                roots.add(cert).map_err(|e| {
                    invalid(CA_FLAG, source, format!("not a usable CA certificate: {e}"))
                })?;
            }
            Some(pem)
        }
        None => None,
    };
    let identity = match pair {
        Some((cert_source, key_source)) => {
            let cert = read(CERT_FLAG, cert_source)?;
            let chain = certificates(CERT_FLAG, cert_source, &cert)?;
            let key = read(KEY_FLAG, key_source)?;
            let key_der = PrivateKeyDer::from_pem_slice(&key).map_err(|e| {
                invalid(
                    KEY_FLAG,
                    key_source,
                    format!(
                        "no private key (PEM PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY): {e}"
                    ),
                )
            })?;
            // What the etcd client's TLS (tonic, on rustls) builds from the same PEM, built
            // here to refuse an unusable key or a key of another certificate by name.
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| refused(ErrorKind::Other, e.to_string()))?
                .with_root_certificates(roots)
                .with_client_auth_cert(chain, key_der)
                .map_err(|e| {
                    let reason = match e {
                        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                            "the key is not the certificate's key".to_string()
                        }
                        other => other.to_string(),
                    };
                    refused(
                        ErrorKind::InvalidData,
                        format!("{CERT_FLAG} {cert_source}, {KEY_FLAG} {key_source}: {reason}"),
                    )
                })?;
            Some((cert, key))
        }
        None => None,
    };
    Ok(Loaded { ca, identity })
}

/// The PEM text of `source`.
fn read(flag: &str, source: &Pem) -> Result<Vec<u8>, Refused> {
    match source {
        Pem::File(path) => std::fs::read(path)
            .map_err(|e| refused(e.kind(), format!("{flag} {}: {e}", path.display()))),
        Pem::Data(data) => Ok(data.clone()),
    }
}

/// The certificates of a PEM text; at least one.
fn certificates(
    flag: &str,
    source: &Pem,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, Refused> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(flag, source, format!("not PEM: {}", pem_error(&e))))?;
    if certs.is_empty() {
        return Err(invalid(flag, source, "no PEM CERTIFICATE block".into()));
    }
    Ok(certs)
}

/// A PEM parse error, its markers and lines as text.
fn pem_error(e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error as E;
    match e {
        E::MissingSectionEnd { end_marker } => format!(
            "no \"-----END {}-----\" line",
            String::from_utf8_lossy(end_marker).trim()
        ),
        E::IllegalSectionStart { line } => {
            format!("bad BEGIN line {:?}", String::from_utf8_lossy(line).trim())
        }
        other => other.to_string(),
    }
}

fn invalid(flag: &str, source: &Pem, reason: String) -> Refused {
    refused(ErrorKind::InvalidData, format!("{flag} {source}: {reason}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(urls: &[&str]) -> Vec<String> {
        urls.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_scheme_decides_and_a_mix_is_refused() {
        assert!(!secure(&servers(&["http://a:1", "http://b:1"]), true).unwrap());
        assert!(secure(&servers(&["https://a:1", "https://b:1"]), false).unwrap());
        assert!(secure(&servers(&["a:1"]), true).unwrap());
        assert!(!secure(&servers(&["a:1"]), false).unwrap());
        let mixed = secure(&servers(&["http://a:1", "https://b:1"]), true).unwrap_err();
        assert!(
            mixed.message.contains("http://a:1 and https://b:1"),
            "{mixed:?}"
        );
        let unix = secure(&servers(&["unix://x"]), false).unwrap_err();
        assert!(unix.message.contains("unix://x"), "{unix:?}");
    }

    #[test]
    fn no_files_is_no_tls_for_http_and_system_roots_for_https() {
        assert!(
            client_options(&servers(&["http://a:1"]), Some(&EtcdTls::default()))
                .unwrap()
                .is_none()
        );
        assert!(
            client_options(&servers(&["https://a:1"]), None)
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn a_certificate_without_its_key_is_refused_before_any_file_is_read() {
        let tls = EtcdTls::from_files(None, Some("/nonexistent/client.crt".into()), None);
        let e = client_options(&servers(&["https://a:1"]), Some(&tls)).unwrap_err();
        assert_eq!(
            e.message,
            "--etcd-certfile /nonexistent/client.crt is given without --etcd-keyfile: the \
             client certificate and its key must both be present"
        );
        let tls = EtcdTls::from_files(None, None, Some("/nonexistent/client.key".into()));
        let e = client_options(&servers(&["https://a:1"]), Some(&tls)).unwrap_err();
        assert!(
            e.message.starts_with(
                "--etcd-keyfile /nonexistent/client.key is given without --etcd-certfile"
            ),
            "{e:?}"
        );
    }

    #[test]
    fn pem_data_stays_out_of_debug_output() {
        let pem = Pem::Data(b"-----BEGIN PRIVATE KEY-----secret".to_vec());
        assert_eq!(format!("{pem:?}"), "Data(33 bytes)");
        assert_eq!(pem.to_string(), "(PEM data)");
    }
}
