//! The kubeconfig of a miniplane cluster, and merging it into the user's kubeconfig.
//!
//! A kubeconfig (`k8s.io/client-go/tools/clientcmd/api/v1/types.go`) names clusters (an API
//! server's URL), users (credentials) and contexts (a cluster + a user + a default namespace).
//! A cluster served over plain HTTP (the library's default) has an empty user; one served over
//! HTTPS ([`render_with`], `miniplane up`) carries the cluster CA and a client certificate, as
//! kubeadm's `admin.conf` does. Either way the file is three entries named `miniplane`:
//!
//! ```yaml
//! apiVersion: v1
//! kind: Config
//! clusters:
//! - name: miniplane
//!   cluster:
//!     server: http://127.0.0.1:6443
//! users:
//! - name: miniplane
//!   user: {}
//! contexts:
//! - name: miniplane
//!   context:
//!     cluster: miniplane
//!     user: miniplane
//!     namespace: default
//! current-context: miniplane
//! ```
//!
//! [`merge`] adds (or replaces) those entries in another kubeconfig and makes `miniplane` the
//! current context, leaving every other cluster, user and context (and whatever else the file
//! holds) as it was — what `kind export kubeconfig` does. Files are read, merged and written
//! as kube's [`Kubeconfig`], which keeps the fields it does not model. [`default_path`] picks
//! the file as kubectl would write it.

use std::path::{Path, PathBuf};

use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};

use crate::error::{Error, Result};

/// The name of miniplane's cluster, user and context.
pub const CONTEXT: &str = "miniplane";

/// The kubeconfig of a cluster whose API server is at `url`.
fn config(url: &str) -> Kubeconfig {
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: CONTEXT.into(),
            cluster: Some(Cluster {
                server: Some(url.into()),
                ..Cluster::default()
            }),
            ..NamedCluster::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: CONTEXT.into(),
            auth_info: Some(AuthInfo::default()),
            ..NamedAuthInfo::default()
        }],
        contexts: vec![NamedContext {
            name: CONTEXT.into(),
            context: Some(Context {
                cluster: CONTEXT.into(),
                user: Some(CONTEXT.into()),
                namespace: Some("default".into()),
                ..Context::default()
            }),
            ..NamedContext::default()
        }],
        current_context: Some(CONTEXT.into()),
        kind: Some("Config".into()),
        api_version: Some("v1".into()),
        ..Kubeconfig::default()
    }
}

/// A client certificate and the CA that signed the server's, for a kubeconfig's user and
/// cluster (`certificate-authority-data`, `client-certificate-data`, `client-key-data`).
#[derive(Debug, Clone)]
pub struct ClientCredentials {
    /// The cluster CA (PEM).
    pub ca_pem: String,
    /// The client certificate (PEM).
    pub cert_pem: String,
    /// Its key (PEM).
    pub key_pem: String,
}

/// The kubeconfig (YAML) of a cluster at `url` served over HTTPS, whose user presents
/// `credentials`' client certificate.
pub fn render_with(url: &str, credentials: &ClientCredentials) -> String {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut kubeconfig = config(url);
    if let Some(cluster) = kubeconfig.clusters[0].cluster.as_mut() {
        cluster.certificate_authority_data = Some(b64(&credentials.ca_pem));
    }
    kubeconfig.auth_infos[0].auth_info = Some(AuthInfo {
        client_certificate_data: Some(b64(&credentials.cert_pem)),
        client_key_data: Some(b64(&credentials.key_pem).into()),
        ..AuthInfo::default()
    });
    to_yaml(&kubeconfig).unwrap_or_default()
}

/// The kubeconfig (YAML) of a cluster whose API server is at `url`.
pub fn render(url: &str) -> String {
    // A Kubeconfig is maps, lists and strings: it always serializes.
    to_yaml(&config(url)).unwrap_or_default()
}

/// YAML with kube's own YAML library, which quotes what a YAML 1.1 reader such as kubectl's
/// would take for another type (`'yes'`, `'0755'`).
fn to_yaml(config: &Kubeconfig) -> std::result::Result<String, String> {
    serde_saphyr::to_string(config).map_err(|e| e.to_string())
}

/// The file `kubectl config` would write to: the first existing file of `$KUBECONFIG` (the
/// last one if none exists), else `~/.kube/config` (clientcmd's `GetDefaultFilename`).
pub fn default_path() -> Result<PathBuf> {
    let kubeconfig = std::env::var_os("KUBECONFIG").unwrap_or_default();
    let listed: Vec<PathBuf> = std::env::split_paths(&kubeconfig)
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    if let Some(existing) = listed.iter().find(|p| p.exists()) {
        return Ok(existing.clone());
    }
    if let Some(last) = listed.last() {
        return Ok(last.clone());
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .ok_or_else(|| Error::Kubeconfig {
            path: PathBuf::from("~/.kube/config"),
            message: "HOME is not set (set KUBECONFIG to the file to write)".into(),
        })?;
    Ok(PathBuf::from(home).join(".kube").join("config"))
}

/// `existing` (a kubeconfig's YAML, possibly empty) with `ours`' `miniplane` cluster, user
/// and context added or replaced, and `miniplane` as the current context.
pub fn merge(existing: &str, ours: &str) -> std::result::Result<String, String> {
    let existing = Kubeconfig::from_yaml(existing).map_err(|e| format!("not a kubeconfig: {e}"))?;
    let ours = Kubeconfig::from_yaml(ours).map_err(|e| format!("miniplane's kubeconfig: {e}"))?;
    // kubectl's merge rule: the first file to name an entry wins, and so does its current
    // context; ours comes first.
    let merged = ours
        .merge(existing)
        .map_err(|e| format!("not a kubeconfig: {e}"))?;
    to_yaml(&merged)
}

/// Merges the kubeconfig at `ours` into `target` (created, mode 0600, if missing).
pub fn merge_into(ours: &Path, target: &Path) -> Result<()> {
    let ours_yaml = std::fs::read_to_string(ours).map_err(Error::io(ours))?;
    let existing = match std::fs::read_to_string(target) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(Error::io(target)(e)),
    };
    let merged = merge(&existing, &ours_yaml).map_err(|message| Error::Kubeconfig {
        path: target.to_owned(),
        message,
    })?;
    if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(Error::io(parent))?;
    }
    write_private(target, &merged).map_err(Error::io(target))
}

/// Writes `contents` to `path`, creating it readable by its owner only (credentials live in
/// kubeconfigs; kubectl creates them 0600 too).
pub(crate) fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(contents.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    const OTHER: &str = "apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster: {server: 'https://prod:6443', certificate-authority-data: AAAA}
- name: miniplane
  cluster: {server: 'http://127.0.0.1:1'}
users:
- name: admin
  user: {token: secret}
contexts:
- name: prod
  context: {cluster: prod, user: admin}
current-context: prod
preferences: {colors: true}
unmodeled: {kept: 'yes'}
";

    use serde_json::Value;

    fn names(v: &Value, list: &str) -> Vec<String> {
        v[list]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["name"].as_str().map(str::to_owned))
            .collect()
    }

    #[test]
    fn merge_keeps_other_entries_and_replaces_ours() -> std::result::Result<(), String> {
        let merged = merge(OTHER, &render("http://127.0.0.1:6443"))?;
        let v: Value = serde_norway::from_str(&merged).map_err(|e| e.to_string())?;
        assert_eq!(names(&v, "clusters"), ["miniplane", "prod"]);
        assert_eq!(names(&v, "users"), ["miniplane", "admin"]);
        assert_eq!(names(&v, "contexts"), ["miniplane", "prod"]);
        assert_eq!(v["current-context"], "miniplane");
        assert_eq!(
            v["clusters"][1]["cluster"]["certificate-authority-data"],
            "AAAA"
        );
        assert_eq!(v["users"][1]["user"]["token"], "secret");
        assert_eq!(v["preferences"]["colors"], true);
        assert_eq!(v["unmodeled"]["kept"], "yes");
        // Quoted, or kubectl's YAML 1.1 reader would see a boolean.
        assert!(
            merged.contains("kept: 'yes'") || merged.contains("kept: \"yes\""),
            "{merged}"
        );
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "http://127.0.0.1:6443"
        );
        // Merging again changes nothing.
        assert_eq!(merge(&merged, &render("http://127.0.0.1:6443"))?, merged);
        Ok(())
    }

    #[test]
    fn render_is_the_documented_file() -> std::result::Result<(), String> {
        let documented = "apiVersion: v1
kind: Config
clusters:
- name: miniplane
  cluster:
    server: http://127.0.0.1:6443
users:
- name: miniplane
  user: {}
contexts:
- name: miniplane
  context:
    cluster: miniplane
    user: miniplane
    namespace: default
current-context: miniplane
";
        let want: Value = serde_norway::from_str(documented).map_err(|e| e.to_string())?;
        let have: Value =
            serde_norway::from_str(&render("http://127.0.0.1:6443")).map_err(|e| e.to_string())?;
        assert_eq!(have, want);
        Ok(())
    }

    #[test]
    fn merge_into_nothing_is_our_kubeconfig() -> std::result::Result<(), String> {
        let merged = merge("", &render("http://127.0.0.1:6443"))?;
        let v: Value = serde_norway::from_str(&merged).map_err(|e| e.to_string())?;
        let ours: Value =
            serde_norway::from_str(&render("http://127.0.0.1:6443")).map_err(|e| e.to_string())?;
        assert_eq!(v, ours);
        Ok(())
    }

    #[test]
    fn merge_refuses_what_is_not_a_kubeconfig() {
        assert!(merge("- a\n- b\n", &render("http://x")).is_err());
        assert!(merge("clusters: 3\n", &render("http://x")).is_err());
        assert!(merge("{{{", &render("http://x")).is_err());
    }
}
