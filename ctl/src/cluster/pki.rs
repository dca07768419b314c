//! A secure cluster's certificates and credentials, laid out as kubeadm lays them out:
//!
//! ```text
//!   <data dir>/pki/ca.crt, ca.key          the cluster CA (kept across restarts)
//!   <data dir>/pki/apiserver.crt, .key     serving 127.0.0.1, ::1, localhost (issued each start)
//!   <data dir>/pki/apiserver-kubelet-client.crt, .key
//!                                          the API server's client certificate for the
//!                                          kubelets: kube-apiserver-kubelet-client in
//!                                          system:masters (issued each start)
//!   <data dir>/pki/kubelet.crt, .key       the kubelets' serving certificate: 127.0.0.1, ::1,
//!                                          localhost and every node's name (issued each
//!                                          start of the kubelets)
//!   <data dir>/pki/sa.key                  the ServiceAccount token signing key
//!   <data dir>/pki/tokens.csv              the web UI's login token (a new one each start),
//!                                          user miniplane-ui in system:masters
//!   <data dir>/kubeconfig                  admin: kubernetes-admin in system:masters
//!   <data dir>/controller-manager.conf     system:kube-controller-manager
//!   <data dir>/scheduler.conf              system:kube-scheduler
//!   <data dir>/cloud-controller-manager.conf  system:cloud-controller-manager
//!   <data dir>/kubelet.conf                miniplane:kubelet-sim, which acts as
//!                                          system:node:<name> in system:nodes for each node
//! ```
//!
//! Mirrors kubeadm's `certs` and `kubeconfig` init phases (`cmd/kubeadm/app/phases/certs`,
//! `phases/kubeconfig`). Simplification: where kubeadm gives each kubelet its own client
//! certificate, the simulated kubelets of one process share one connection under the user
//! `miniplane:kubelet-sim`, and each node's requests impersonate that node's user
//! (`Impersonate-User: system:node:<name>`, `Impersonate-Group: system:nodes`): the API
//! server authorizes and traces them as the node, with no certificate and no TLS connection
//! per node.
//!
//! The kubelet API is secured as kubeadm secures it: the kubelets serve HTTPS and check
//! every caller (client certificates of the cluster CA, bearer tokens by `TokenReview`, no
//! anonymous requests, every request authorized by `SubjectAccessReview`); the API server
//! dials them with `--kubelet-client-certificate`/`--kubelet-client-key` and verifies them
//! with `--kubelet-certificate-authority` (the cluster CA); the metrics-server scrapes them
//! with its own kubeconfig's credentials, verifying them with the cluster CA. A plain-HTTP
//! cluster keeps the kubelet API on plain HTTP, unchecked.
//!
//! Simplifications: where a kubelet makes itself a self-signed serving certificate (kubeadm
//! leaves `serverTLSBootstrap` off), the simulated kubelets of one process share one
//! certificate issued by the cluster CA, with every node's name among its names and the CN
//! `kubelet`; kubeadm 1.29+
//! puts `apiserver-kubelet-client` in `kubeadm:cluster-admins`, bound to `cluster-admin` by
//! `kubeadm init` (not by the API server's bootstrap policy, which is all a cluster here
//! has), so here it is in `system:masters`, as kubeadm had it before 1.29.

use std::path::{Path, PathBuf};

use apimachinery::pki::{Ca, Validity};

use crate::error::{Error, Result};
use crate::kubeconfig::{self, ClientCredentials};
use crate::progress::Component;

/// The PKI of a secure cluster, ready before its API server starts.
pub(crate) struct ClusterPki {
    ca: Ca,
    /// The serving certificate and key files.
    pub(crate) serving_cert: PathBuf,
    /// Its key.
    pub(crate) serving_key: PathBuf,
    /// The CA certificate file (`--client-ca-file`).
    pub(crate) ca_file: PathBuf,
    /// The API server's client certificate for the kubelets
    /// (`--kubelet-client-certificate`).
    pub(crate) kubelet_client_cert: PathBuf,
    /// Its key (`--kubelet-client-key`).
    pub(crate) kubelet_client_key: PathBuf,
    /// The ServiceAccount signing key file.
    pub(crate) sa_key: PathBuf,
    /// The token file (`--token-auth-file`) with the web UI's token.
    pub(crate) tokens: PathBuf,
    /// The web UI's login token (`/ui?token=...`).
    pub(crate) ui_token: String,
}

/// Who each component is: its kubeconfig's file name, user and groups.
fn identity(component: Component) -> (&'static str, String, Vec<&'static str>) {
    match component {
        Component::ControllerManager => (
            "controller-manager.conf",
            "system:kube-controller-manager".into(),
            vec![],
        ),
        Component::Scheduler => ("scheduler.conf", "system:kube-scheduler".into(), vec![]),
        Component::CloudControllerManager => (
            "cloud-controller-manager.conf",
            "system:cloud-controller-manager".into(),
            vec![],
        ),
        Component::Kubelet => ("kubelet.conf", kubelet_sim::USER.into(), vec![]),
        _ => (
            "kubeconfig",
            "kubernetes-admin".into(),
            vec!["system:masters"],
        ),
    }
}

impl ClusterPki {
    /// Makes (or reads) the CA in `<data_dir>/pki`, issues the serving certificate and makes
    /// the ServiceAccount key if missing.
    pub(crate) fn prepare(data_dir: &Path) -> Result<ClusterPki> {
        let dir = data_dir.join("pki");
        let pki_err = |e: apimachinery::pki::CertError| Error::component(Component::ApiServer, e);
        let ca = Ca::load_or_create(&dir).map_err(pki_err)?;
        let hosts = ["127.0.0.1", "::1", "localhost"].map(String::from);
        let serving = ca
            .issue_serving(&hosts, Validity::default_cert())
            .map_err(pki_err)?;
        let (serving_cert, serving_key) =
            apimachinery::pki::write_cert_and_key(&dir, "apiserver", &serving).map_err(pki_err)?;
        let kubelet_client = ca
            .issue_client(
                KUBELET_CLIENT_USER,
                &[KUBELET_CLIENT_GROUP],
                Validity::default_cert(),
            )
            .map_err(pki_err)?;
        let (kubelet_client_cert, kubelet_client_key) = apimachinery::pki::write_cert_and_key(
            &dir,
            "apiserver-kubelet-client",
            &kubelet_client,
        )
        .map_err(pki_err)?;
        let sa_key = dir.join("sa.key");
        apiserver::TokenIssuer::from_key_file(
            &sa_key,
            true,
            apiserver::DEFAULT_SERVICE_ACCOUNT_ISSUER,
            vec![],
        )
        .map_err(|e| Error::component(Component::ApiServer, e))?;
        let ui_token = uuid::Uuid::new_v4().simple().to_string();
        let tokens = dir.join("tokens.csv");
        let line = format!("{ui_token},miniplane-ui,miniplane-ui,system:masters\n");
        kubeconfig::write_private(&tokens, &line).map_err(Error::io(&tokens))?;
        Ok(ClusterPki {
            ca,
            serving_cert,
            serving_key,
            ca_file: dir.join(apimachinery::pki::CA_CERT_FILE),
            kubelet_client_cert,
            kubelet_client_key,
            sa_key,
            tokens,
            ui_token,
        })
    }

    /// The API server's settings: HTTPS, client certificates of the CA, RBAC, and
    /// ServiceAccount tokens signed with the key.
    pub(crate) fn server_options(
        &self,
        options: &mut apiserver::ServerOptions,
        mode: apiserver::AuthorizationMode,
    ) -> Result<()> {
        let read = |p: &Path| std::fs::read_to_string(p).map_err(Error::io(p));
        let tls = apimachinery::pki::tls_server_config(
            &read(&self.serving_cert)?,
            &read(&self.serving_key)?,
            Some(self.ca.cert_pem()),
        )
        .map_err(|e| Error::component(Component::ApiServer, e))?;
        options.connections.tls = Some(tls);
        options.auth.client_ca = Some(std::sync::Arc::new(self.ca.cert_der().to_vec()));
        options.auth.authorization_mode = mode;
        let issuer = apiserver::TokenIssuer::from_key_file(
            &self.sa_key,
            false,
            apiserver::DEFAULT_SERVICE_ACCOUNT_ISSUER,
            vec![apiserver::DEFAULT_SERVICE_ACCOUNT_ISSUER.to_string()],
        )
        .map_err(|e| Error::component(Component::ApiServer, e))?;
        options.auth.service_accounts = Some(std::sync::Arc::new(issuer));
        let tokens = apiserver::TokenFile::read(&self.tokens)
            .map_err(|e| Error::component(Component::ApiServer, e))?;
        options.auth.tokens = Some(std::sync::Arc::new(tokens));
        let kubelet_client = apiserver::KubeletClientTls::from_pem(
            &read(&self.kubelet_client_cert)?,
            &read(&self.kubelet_client_key)?,
            self.ca.cert_pem(),
        )
        .map_err(|e| Error::component(Component::ApiServer, e))?;
        options.kubelet_client = Some(kubelet_client);
        Ok(())
    }

    /// The same settings as `miniplane apiserver` flags.
    pub(crate) fn apiserver_flags(&self, mode: apiserver::AuthorizationMode) -> Vec<String> {
        let path = |p: &Path| p.to_string_lossy().into_owned();
        vec![
            "--tls-cert-file".into(),
            path(&self.serving_cert),
            "--tls-private-key-file".into(),
            path(&self.serving_key),
            "--client-ca-file".into(),
            path(&self.ca_file),
            "--service-account-signing-key-file".into(),
            path(&self.sa_key),
            "--authorization-mode".into(),
            mode.as_str().into(),
            "--token-auth-file".into(),
            path(&self.tokens),
            "--kubelet-client-certificate".into(),
            path(&self.kubelet_client_cert),
            "--kubelet-client-key".into(),
            path(&self.kubelet_client_key),
            "--kubelet-certificate-authority".into(),
            path(&self.ca_file),
        ]
    }

    /// Writes the kubeconfig of `component` (the admin's for [`Component::ApiServer`]) for a
    /// server at `url` into `data_dir`; returns its path and its YAML.
    pub(crate) fn write_kubeconfig(
        &self,
        component: Component,
        url: &str,
        data_dir: &Path,
    ) -> Result<(PathBuf, String)> {
        let (file, user, groups) = identity(component);
        let issued = self
            .ca
            .issue_client(&user, &groups, Validity::default_cert())
            .map_err(|e| Error::component(component, e))?;
        let yaml = kubeconfig::render_with(
            url,
            &ClientCredentials {
                ca_pem: self.ca.cert_pem().to_string(),
                cert_pem: issued.cert_pem,
                key_pem: issued.key_pem,
            },
        );
        let path = data_dir.join(file);
        kubeconfig::write_private(&path, &yaml).map_err(Error::io(&path))?;
        Ok((path, yaml))
    }
}

/// The user of the API server's client certificate for the kubelets (kubeadm's
/// `apiserver-kubelet-client.crt`).
pub(crate) const KUBELET_CLIENT_USER: &str = "kube-apiserver-kubelet-client";
/// Its group (see the module docs).
const KUBELET_CLIENT_GROUP: &str = "system:masters";

/// The kubelets' serving files in a secure cluster: what `miniplane kubelet` takes as
/// `--tls-cert-file`, `--tls-private-key-file` and `--client-ca-file`.
#[derive(Debug, Clone)]
pub(crate) struct KubeletServing {
    /// The serving certificate (`pki/kubelet.crt`).
    pub(crate) cert: PathBuf,
    /// Its key (`pki/kubelet.key`).
    pub(crate) key: PathBuf,
    /// The cluster CA, which client certificates are verified with.
    pub(crate) client_ca: PathBuf,
}

impl KubeletServing {
    /// The simulator's settings: HTTPS with these files, and kubeadm's
    /// `KubeletConfiguration` authentication and authorization.
    pub(crate) fn apply_to(&self, config: &mut kubelet_sim::Config) {
        config.kubelet_tls = Some(kubelet_sim::ServingTls {
            cert_file: self.cert.clone(),
            key_file: self.key.clone(),
            client_ca_file: Some(self.client_ca.clone()),
        });
        config.kubelet_auth = kubelet_sim::ServingAuth::kubeadm();
    }

    /// The same as `miniplane kubelet` flags.
    pub(crate) fn flags(&self) -> Vec<String> {
        let path = |p: &Path| p.to_string_lossy().into_owned();
        vec![
            "--tls-cert-file".into(),
            path(&self.cert),
            "--tls-private-key-file".into(),
            path(&self.key),
            "--client-ca-file".into(),
            path(&self.client_ca),
            "--anonymous-auth=false".into(),
            "--authentication-token-webhook".into(),
            "--authorization-mode".into(),
            kubelet_sim::ServingAuthorization::Webhook.as_str().into(),
        ]
    }
}

/// How each client component reaches the API server: the URL (a plain-HTTP cluster), or its
/// own kubeconfig (a secure one).
#[derive(Debug, Clone)]
pub(crate) struct Access {
    /// The API server's URL.
    pub(crate) url: String,
    /// The admin kubeconfig (`<data dir>/kubeconfig`).
    pub(crate) admin: PathBuf,
    /// The components' own kubeconfigs, in a secure cluster.
    components: Option<Vec<(Component, PathBuf)>>,
    /// The cluster CA's certificate file, in a secure cluster: the controller-manager's
    /// `--root-ca-file`, as kubeadm sets it.
    root_ca_file: Option<PathBuf>,
    /// The cluster CA's certificate and key files, in a secure cluster: the
    /// controller-manager's `--cluster-signing-cert-file` and `--cluster-signing-key-file`,
    /// as kubeadm sets them.
    cluster_signing: Option<(PathBuf, PathBuf)>,
}

/// The names of `nodes` simulated nodes (`node-0`, ...), as the kubelets name them.
/// Bytes of node names the kubelets' shared serving certificate names at most. rustls (webpki)
/// refuses a certificate whose DER lengths need more than two bytes (64 KiB), which 10,000 node
/// names pass; the names are a courtesy for clients that dial a kubelet by name, since the API
/// server and the metrics-server dial its `InternalIP` (127.0.0.1), which the certificate
/// always names.
const MAX_KUBELET_NAME_BYTES: usize = 32 * 1024;

/// The hosts of the kubelets' serving certificate: the loopback names, then the names of as
/// many nodes as fit in [`MAX_KUBELET_NAME_BYTES`] (all of them up to a few thousand nodes).
fn kubelet_hosts(nodes: &[String]) -> Vec<String> {
    let mut hosts: Vec<String> = ["127.0.0.1", "::1", "localhost"].map(String::from).into();
    let mut budget = MAX_KUBELET_NAME_BYTES;
    for name in nodes {
        // The name and its DER tag and length.
        let Some(left) = budget.checked_sub(name.len() + 4) else {
            break;
        };
        budget = left;
        hosts.push(name.clone());
    }
    hosts
}

pub(crate) fn node_names(nodes: usize) -> Vec<String> {
    let config = kubelet_sim::Config::new(client::ClusterSource::Infer, 0);
    (0..nodes).map(|i| config.node_name(i)).collect()
}

impl Access {
    /// Every component connects to `url` without credentials.
    pub(crate) fn plain(url: String, admin: PathBuf) -> Access {
        Access {
            url,
            admin,
            components: None,
            root_ca_file: None,
            cluster_signing: None,
        }
    }

    /// Writes every component's kubeconfig for a secure cluster at `url`.
    pub(crate) fn secure(
        pki: &ClusterPki,
        url: String,
        admin: PathBuf,
        data_dir: &Path,
    ) -> Result<Access> {
        let mut components = Vec::new();
        for component in [
            Component::ControllerManager,
            Component::Scheduler,
            Component::CloudControllerManager,
            Component::Kubelet,
        ] {
            let (path, _) = pki.write_kubeconfig(component, &url, data_dir)?;
            components.push((component, path));
        }
        let key = pki.ca_file.with_file_name(apimachinery::pki::CA_KEY_FILE);
        Ok(Access {
            url,
            admin,
            components: Some(components),
            root_ca_file: Some(pki.ca_file.clone()),
            cluster_signing: Some((pki.ca_file.clone(), key)),
        })
    }

    /// The CA files the controller-manager signs CSRs with (`--cluster-signing-cert-file`,
    /// `--cluster-signing-key-file`); `None` in a plain cluster.
    pub(crate) fn cluster_signing_files(&self) -> Option<(&Path, &Path)> {
        self.cluster_signing
            .as_ref()
            .map(|(cert, key)| (cert.as_path(), key.as_path()))
    }

    /// The CA the controller-manager publishes in every namespace's `kube-root-ca.crt`
    /// (`--root-ca-file`); `None` in a plain cluster, which has no CA.
    pub(crate) fn root_ca_file(&self) -> Option<&Path> {
        self.root_ca_file.as_deref()
    }

    /// Issues the kubelets' serving certificate for `nodes` (`pki/kubelet.crt`, `.key`: the
    /// loopback names and every node's name) from the cluster CA; `None` in a plain cluster,
    /// whose kubelets serve plain HTTP.
    pub(crate) fn kubelet_serving(&self, nodes: &[String]) -> Result<Option<KubeletServing>> {
        let Some(ca_file) = &self.root_ca_file else {
            return Ok(None);
        };
        let dir = ca_file
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let pki_err = |e: apimachinery::pki::CertError| Error::component(Component::Kubelet, e);
        let ca = Ca::load_or_create(&dir).map_err(pki_err)?;
        let issued = ca
            .issue_serving_named("kubelet", &kubelet_hosts(nodes), Validity::default_cert())
            .map_err(pki_err)?;
        let (cert, key) =
            apimachinery::pki::write_cert_and_key(&dir, "kubelet", &issued).map_err(pki_err)?;
        Ok(Some(KubeletServing {
            cert,
            key,
            client_ca: ca_file.clone(),
        }))
    }

    /// Whether the cluster is secure (HTTPS, client certificates, RBAC).
    pub(crate) fn is_secure(&self) -> bool {
        self.components.is_some()
    }

    /// The kubeconfig `component` runs with: its own, else the admin's.
    pub(crate) fn kubeconfig(&self, component: Component) -> &Path {
        self.components
            .iter()
            .flatten()
            .find(|(c, _)| *c == component)
            .map_or(&self.admin, |(_, p)| p)
    }

    /// Where `component`'s client connects.
    pub(crate) fn source(&self, component: Component) -> client::ClusterSource {
        if self.is_secure() {
            client::ClusterSource::Kubeconfig(self.kubeconfig(component).to_path_buf())
        } else {
            client::ClusterSource::Url(self.url.clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelets_certificate_serves_ten_thousand_nodes() {
        let ca = Ca::generate_in_memory(Validity::default_cert()).expect("a CA");
        let few = kubelet_hosts(&node_names(3));
        assert_eq!(
            few,
            [
                "127.0.0.1",
                "::1",
                "localhost",
                "node-0",
                "node-1",
                "node-2"
            ]
        );
        let many = kubelet_hosts(&node_names(10_000));
        assert!(many.len() > 1_000 && many.len() < 10_003, "{}", many.len());
        let issued = ca
            .issue_serving_named("kubelet", &many, Validity::default_cert())
            .expect("issued");
        apimachinery::pki::tls_server_config(&issued.cert_pem, &issued.key_pem, None)
            .expect("rustls takes the certificate");
        // Every name of 10,000 nodes is what rustls refused.
        let mut all = kubelet_hosts(&[]);
        all.extend(node_names(10_000));
        let issued = ca
            .issue_serving_named("kubelet", &all, Validity::default_cert())
            .expect("issued");
        assert!(
            apimachinery::pki::tls_server_config(&issued.cert_pem, &issued.key_pem, None).is_err()
        );
    }
}
