//! The root CA publisher's async shell: the handlers, the queue and `syncNamespace`'s writes
//! of `pkg/controller/certificates/rootcacertpublisher/publisher.go`, and where the CA comes
//! from (`getKubeAPIServerCAFileContents` in `cmd/kube-controller-manager/app/certificates.go`).

use std::path::Path;
use std::sync::Arc;

use apimachinery::ObjectKey;
use client::{DeltaObject, Lister, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Publish, ROOT_CA_CERT_CONFIG_MAP_NAME, sync_namespace};
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::manager::metrics::ControllerMetrics;
use crate::worker::{SyncResult, Workers};

/// The root CA publisher (cheap to clone).
#[derive(Clone)]
pub struct Publisher {
    config_maps: Lister<ConfigMap>,
    /// Namespace names (cluster-scoped keys).
    queue: RateLimitingQueue<ObjectKey>,
    executor: Executor,
    /// The CA published (PEM; empty when the cluster has none).
    root_ca: Arc<str>,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

impl Publisher {
    /// Builds the publisher of `root_ca` on the factory's ConfigMap and Namespace informers.
    pub fn new(factory: &SharedInformerFactory, executor: Executor, root_ca: String) -> Self {
        let config_maps = factory.informer::<ConfigMap>();
        let namespaces = factory.informer::<Namespace>();
        let this = Publisher {
            config_maps: Lister::new(config_maps.indexer().clone()),
            queue: RateLimitingQueue::on_clock("root_ca_cert_publisher", executor.clock().clone()),
            executor,
            root_ca: root_ca.into(),
            metrics: Arc::new(ControllerMetrics::new("root-ca-cert-publisher")),
        };
        let (updated, deleted) = (this.clone(), this.clone());
        config_maps.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_update(move |_, cm: Arc<ConfigMap>| updated.config_map_changed(&cm))
                .on_delete(move |cm: DeltaObject<ConfigMap>| {
                    deleted.config_map_changed(cm.object())
                }),
        );
        let (added, ns_updated) = (this.clone(), this.clone());
        namespaces.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |ns: Arc<Namespace>, _| added.enqueue_namespace(&ns, false))
                .on_update(move |_, ns: Arc<Namespace>| ns_updated.enqueue_namespace(&ns, true)),
        );
        this
    }

    /// `configMapUpdated` / `configMapDeleted`: only `kube-root-ca.crt` matters.
    fn config_map_changed(&self, cm: &ConfigMap) {
        if cm.metadata.name.as_deref() == Some(ROOT_CA_CERT_CONFIG_MAP_NAME)
            && let Some(ns) = cm.metadata.namespace.as_deref()
        {
            self.queue.add(ObjectKey::new(None, ns));
        }
    }

    /// `namespaceAdded` (any namespace) / `namespaceUpdated` (an `Active` one).
    fn enqueue_namespace(&self, ns: &Namespace, only_active: bool) {
        let active = ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Active");
        if (active || !only_active)
            && let Some(name) = ns.metadata.name.as_deref()
        {
            self.queue.add(ObjectKey::new(None, name));
        }
    }

    /// The publisher's work queue.
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }

    /// Starts `workers` workers on `tracker` (call after the caches synced).
    pub fn spawn(&self, workers: usize, tracker: &TaskTracker, shutdown: CancellationToken) {
        let this = self.clone();
        Workers {
            queue: self.queue.clone(),
            count: workers,
            max_retries: None,
            metrics: self.metrics.clone(),
            tracer: self.executor.tracer().clone(),
            object_context: None,
        }
        .spawn(tracker, shutdown, move |key| {
            let this = this.clone();
            async move { this.sync(&key).await }
        });
    }

    /// `syncNamespace`.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let ns = key.name.as_str();
        let existing = self.config_maps.get(Some(ns), ROOT_CA_CERT_CONFIG_MAP_NAME);
        let publish = sync_namespace(ns, existing.as_deref(), &self.root_ca);
        let reason = publish.reason();
        let api: Api<ConfigMap> = Api::namespaced(self.executor.client(), ns);
        let what = format!("{ns}/{ROOT_CA_CERT_CONFIG_MAP_NAME}");
        let done = match publish {
            Publish::UpToDate => "nothing to do",
            Publish::Create(cm) => match api.create(&PostParams::default(), &cm).await {
                Ok(_) => "created",
                Err(e) => {
                    let e = Error::from_kube("create", &what, e);
                    // Don't retry a create if the namespace is gone or terminating.
                    if !e.is_not_found() && !e.is_namespace_terminating() {
                        return Err(e);
                    }
                    "not created: the namespace is gone or terminating"
                }
            },
            Publish::Update { config_map, .. } => {
                api.replace(
                    ROOT_CA_CERT_CONFIG_MAP_NAME,
                    &PostParams::default(),
                    &config_map,
                )
                .await
                .map_err(|e| Error::from_kube("update", &what, e))?;
                "updated"
            }
        };
        client::trace::set_attribute(client::trace::attr::REASON, reason);
        client::trace::set_summary(format!("{what}: {reason} → {done}"));
        Ok(None)
    }
}

/// The CA to publish: `--root-ca-file` when set (it must hold PEM certificates), else the CA
/// of the kubeconfig the controller-manager runs with (`kubeconfig`; none for `--master`),
/// else none (an empty string).
pub fn root_ca(root_ca_file: Option<&Path>, kubeconfig: Option<&Path>) -> Result<String> {
    if let Some(path) = root_ca_file {
        let parse_error = |e: String| {
            Error::Config(format!(
                "error parsing root-ca-file at {}: {e}",
                path.display()
            ))
        };
        let pem = std::fs::read_to_string(path).map_err(|e| parse_error(e.to_string()))?;
        apimachinery::pki::first_certificate(&pem).map_err(|e| parse_error(e.to_string()))?;
        return Ok(pem);
    }
    let Some(path) = kubeconfig else {
        return Ok(String::new());
    };
    let config = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| Error::Config(format!("kubeconfig {}: {e}", path.display())))?;
    let context = config
        .current_context
        .as_deref()
        .and_then(|name| config.contexts.iter().find(|c| c.name == name))
        .and_then(|c| c.context.as_ref());
    let cluster = config
        .clusters
        .iter()
        .find(|c| context.is_none_or(|ctx| ctx.cluster == c.name))
        .and_then(|c| c.cluster.as_ref());
    let Some(cluster) = cluster else {
        return Ok(String::new());
    };
    if let Some(data) = &cluster.certificate_authority_data {
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| Error::Config(format!("certificate-authority-data: {e}")))?;
        return String::from_utf8(bytes)
            .map_err(|e| Error::Config(format!("certificate-authority-data: {e}")));
    }
    match &cluster.certificate_authority {
        Some(file) => std::fs::read_to_string(file)
            .map_err(|e| Error::Config(format!("certificate-authority {file}: {e}"))),
        None => Ok(String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_comes_from_the_flag_else_the_kubeconfig_else_none() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let kubeconfig = dir.path().join("kubeconfig");
        let ca = "-----BEGIN CERTIFICATE-----\nnot really\n-----END CERTIFICATE-----\n";
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(ca);
        let yaml = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority-data: {b64}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\nusers:\n- name: u\n  user: {{}}\n"
        );
        std::fs::write(&kubeconfig, yaml).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(root_ca(None, Some(&kubeconfig)).ok().as_deref(), Some(ca));
        assert_eq!(root_ca(None, None).ok().as_deref(), Some(""));
        let bad = dir.path().join("bad.crt");
        std::fs::write(&bad, "not a certificate").unwrap_or_else(|e| panic!("{e}"));
        let err = root_ca(Some(&bad), Some(&kubeconfig))
            .err()
            .map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("error parsing root-ca-file at")),
            "{err:?}"
        );
    }
}
