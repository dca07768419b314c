//! The certificate authority and what it issues (kubeadm's `pkiutil.NewCertificateAuthority`,
//! `NewCertAndKey`, `TryLoadCertAndKeyFromDisk`; the CSR signing of
//! `pkg/controller/certificates/authority/authority.go`).

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DistinguishedName,
    DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, PublicKeyData as _,
    SerialNumber,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use x509_parser::prelude::FromDer as _;

use super::der::{self, OID_COMMON_NAME, OID_ORGANIZATION};
use super::files::{self, CERT_MODE, KEY_MODE};
use super::{
    CA_CERT_FILE, CA_COMMON_NAME, CA_KEY_FILE, CA_VALIDITY, CertError, IssuedCert, Result,
    SERVING_COMMON_NAME, Validity, invalid, issue_error,
};

/// The cluster's certificate authority: its certificate and the key that signs with it.
pub struct Ca {
    cert_pem: String,
    cert_der: CertificateDer<'static>,
    /// The CA's subject and key identifier (from its certificate) and its key.
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

impl Ca {
    /// Loads the CA from `dir`'s `ca.crt` and `ca.key`, or creates one there (CN `kubernetes`,
    /// valid ten years) if neither exists, as `kubeadm init` keeps the one it finds.
    ///
    /// The key is written first and the certificate last, each atomically: a `ca.key` without
    /// `ca.crt` is what a crash during creation leaves (no certificate was ever issued by
    /// it), and is replaced by a new CA; a `ca.crt` without `ca.key` is an error. Creation
    /// holds a lock on `dir`, so processes starting together end up with one CA.
    pub fn load_or_create(dir: &Path) -> Result<Ca> {
        if let Some(ca) = Ca::load(dir)? {
            return Ok(ca);
        }
        files::ensure_dir(dir)?;
        let _lock = files::lock_dir(dir)?;
        // Another process may have created it while this one waited for the lock.
        if let Some(ca) = Ca::load(dir)? {
            return Ok(ca);
        }
        let (cert_pem, key_pem) = Ca::generate(Validity::from_now(CA_VALIDITY))?;
        files::write_atomic(&dir.join(CA_KEY_FILE), key_pem.as_bytes(), KEY_MODE)?;
        files::write_atomic(&dir.join(CA_CERT_FILE), cert_pem.as_bytes(), CERT_MODE)?;
        tracing::info!(dir = %dir.display(), "created the cluster CA");
        Ca::from_pem(&cert_pem, &key_pem)
    }

    /// The CA in `dir`, `None` if its certificate is not there.
    fn load(dir: &Path) -> Result<Option<Ca>> {
        let cert_path = dir.join(CA_CERT_FILE);
        let key_path = dir.join(CA_KEY_FILE);
        let Some(cert_pem) = files::read_if_exists(&cert_path)? else {
            return Ok(None);
        };
        let Some(key_pem) = files::read_if_exists(&key_path)? else {
            return Err(CertError::Incomplete {
                present: cert_path,
                missing: key_path,
            });
        };
        Ca::from_pem(&cert_pem, &key_pem).map(Some)
    }

    /// A new CA, in memory only (tests; a second, untrusted CA).
    pub fn generate_in_memory(validity: Validity) -> Result<Ca> {
        let (cert_pem, key_pem) = Ca::generate(validity)?;
        Ca::from_pem(&cert_pem, &key_pem)
    }

    /// The CA from its certificate and key, PEM; the key must be the certificate's.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Ca> {
        let cert_der = CertificateDer::from_pem_slice(cert_pem.as_bytes())
            .map_err(|e| invalid("CA certificate", e))?;
        let key = KeyPair::from_pem(key_pem).map_err(|e| invalid("CA key", e))?;
        let (_, parsed) = x509_parser::certificate::X509Certificate::from_der(&cert_der)
            .map_err(|e| invalid("CA certificate", e))?;
        if parsed.tbs_certificate.subject_pki.raw != key.subject_public_key_info().as_slice() {
            return Err(invalid("CA key", "it is not the key of the CA certificate"));
        }
        if !parsed.is_ca() {
            return Err(invalid(
                "CA certificate",
                "it is not a CA (basicConstraints)",
            ));
        }
        let issuer =
            Issuer::from_ca_cert_der(&cert_der, key).map_err(|e| invalid("CA certificate", e))?;
        Ok(Ca {
            cert_pem: cert_pem.to_string(),
            cert_der,
            issuer,
        })
    }

    /// A self-signed CA certificate and its key, PEM (kubeadm's `NewSelfSignedCACert`).
    fn generate(validity: Validity) -> Result<(String, String)> {
        let key = KeyPair::generate().map_err(issue_error)?;
        let mut params = base_params(validity)?;
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, CA_COMMON_NAME);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
            KeyUsagePurpose::KeyCertSign,
        ];
        let cert = params.self_signed(&key).map_err(issue_error)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// The CA certificate, PEM (what a kubeconfig's `certificate-authority-data` holds,
    /// base64 encoded).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The end of the CA certificate's validity (a signed certificate never outlasts it).
    pub fn not_after(&self) -> std::time::SystemTime {
        use x509_parser::prelude::FromDer as _;
        let seconds = x509_parser::certificate::X509Certificate::from_der(&self.cert_der)
            .map(|(_, c)| c.validity().not_after.timestamp())
            .unwrap_or(0);
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
    }

    /// The CA certificate, DER (what [`super::verify_client_chain`] trusts).
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert_der
    }

    /// A serving certificate for `hosts` (IP addresses or DNS names, its SANs) with a new
    /// key: CN `kube-apiserver`, server-auth usage (kubeadm's `apiserver.crt`).
    pub fn issue_serving(&self, hosts: &[String], validity: Validity) -> Result<IssuedCert> {
        self.issue_serving_named(SERVING_COMMON_NAME, hosts, validity)
    }

    /// [`Ca::issue_serving`] with the subject's CN `common_name` (a kubelet's serving
    /// certificate is not the API server's).
    pub fn issue_serving_named(
        &self,
        common_name: &str,
        hosts: &[String],
        validity: Validity,
    ) -> Result<IssuedCert> {
        let mut params = CertificateParams::new(hosts.to_vec()).map_err(issue_error)?;
        let base = base_params(validity)?;
        params.not_before = base.not_before;
        params.not_after = base.not_after;
        params.serial_number = base.serial_number;
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().map_err(issue_error)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(issue_error)?;
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// A client certificate with a new key: CN `common_name` (the user), one O per entry of
    /// `organizations` (the groups), client-auth usage (kubeadm's `admin.conf`, `kubectl`'s
    /// users).
    pub fn issue_client(
        &self,
        common_name: &str,
        organizations: &[&str],
        validity: Validity,
    ) -> Result<IssuedCert> {
        let mut params = base_params(validity)?;
        params.distinguished_name = DistinguishedName::new();
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().map_err(issue_error)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(issue_error)?;
        // Go's pkix.Name puts the organizations before the common name.
        let mut subject: Vec<(&[u8], &str)> = organizations
            .iter()
            .map(|o| (OID_ORGANIZATION, *o))
            .collect();
        subject.push((OID_COMMON_NAME, common_name));
        let der = der::with_subject(cert.der(), &der::name(&subject), self.issuer.key())?;
        Ok(IssuedCert {
            cert_pem: pem_cert(der),
            key_pem: key.serialize_pem(),
        })
    }

    /// Signs a certificate signing request (PEM `CERTIFICATE REQUEST` or DER) as
    /// `authority.go`'s `Sign` does: the CSR's subject (byte for byte) and names kept, its
    /// signature checked, not a CA, and the key usages and extended key usages named in
    /// `usages` (the `certificates.k8s.io/v1` strings, [`super::key_usages`]; an unknown one is
    /// refused). Which usages a signer permits is the signer's policy, checked before. Returns
    /// the certificate, PEM.
    pub fn sign_csr(&self, csr: &[u8], validity: Validity, usages: &[&str]) -> Result<String> {
        const WHAT: &str = "certificate signing request";
        let der: Vec<u8> = if csr.trim_ascii_start().starts_with(b"-----BEGIN") {
            rustls::pki_types::CertificateSigningRequestDer::from_pem_slice(csr)
                .map_err(|e| invalid(WHAT, e))?
                .as_ref()
                .to_vec()
        } else {
            csr.to_vec()
        };
        let (_, parsed) =
            x509_parser::certification_request::X509CertificationRequest::from_der(&der)
                .map_err(|e| invalid(WHAT, e))?;
        let subject = parsed.certification_request_info.subject.as_raw();
        let mut request = CertificateSigningRequestParams::from_der(&der.as_slice().into())
            .map_err(|e| invalid(WHAT, e))?;
        let usages = super::csr::key_usages(usages)?;
        let base = base_params(validity)?;
        let params = &mut request.params;
        params.not_before = base.not_before;
        params.not_after = base.not_after;
        params.serial_number = base.serial_number;
        params.distinguished_name = DistinguishedName::new();
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = usages.key_usages;
        params.extended_key_usages = usages.extended;
        params.use_authority_key_identifier_extension = true;
        let cert = request.signed_by(&self.issuer).map_err(issue_error)?;
        let der = der::with_subject(cert.der(), subject, self.issuer.key())?;
        Ok(pem_cert(der))
    }
}

/// Parameters with `validity` and a random serial number (kubeadm's are random too), the rest
/// rcgen's defaults.
fn base_params(validity: Validity) -> Result<CertificateParams> {
    if validity.not_after <= validity.not_before {
        return Err(CertError::Issue(
            "the validity ends before it starts".to_string(),
        ));
    }
    let mut serial: [u8; 16] = rand::random();
    serial[0] &= 0x7f; // positive
    serial[0] |= 0x40; // and 16 bytes long
    let mut params = CertificateParams::default();
    params.not_before = validity.not_before.into();
    params.not_after = validity.not_after.into();
    params.serial_number = Some(SerialNumber::from_slice(&serial));
    Ok(params)
}

/// A certificate's PEM.
fn pem_cert(der: Vec<u8>) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::with_capacity(b64.len() + b64.len() / 64 + 60);
    out.push_str("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        // base64's alphabet is ASCII.
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}
