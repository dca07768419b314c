//! The CSR signing controller's async shell: the handlers, the queue, and `signer.handle`'s
//! writes through `certificatesigningrequests/{name}/status`
//! (`pkg/controller/certificates/certificate_controller.go` and `signer/signer.go`).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use apimachinery::ObjectKey;
use apimachinery::pki::{Ca, parse_csr, signing_validity};
use client::{Lister, RateLimitingQueue, SharedInformerFactory};
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, PostParams};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Decision, SIGNER_VALIDATION_FAILURE, decide};
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::manager::metrics::ControllerMetrics;
use crate::worker::{SyncResult, Workers};

/// The signing CA and how long its certificates last (`--cluster-signing-cert-file`,
/// `--cluster-signing-key-file`, `--cluster-signing-duration`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningConfig {
    /// The CA certificate, PEM file.
    pub cert_file: std::path::PathBuf,
    /// The CA key, PEM file.
    pub key_file: std::path::PathBuf,
    /// The longest certificate issued ([`super::DEFAULT_SIGNING_DURATION`]).
    pub duration: Duration,
}

impl SigningConfig {
    /// Reads the CA from its files.
    pub fn load(&self) -> Result<Ca> {
        let read = |path: &std::path::Path| {
            std::fs::read_to_string(path)
                .map_err(|e| Error::Config(format!("{}: {e}", path.display())))
        };
        let cert = read(&self.cert_file)?;
        let key = read(&self.key_file)?;
        Ca::from_pem(&cert, &key).map_err(|e| Error::Config(format!("the signing CA: {e}")))
    }
}

/// The CSR signing controller (cheap to clone).
#[derive(Clone)]
pub struct CsrSigningController {
    csrs: Lister<CertificateSigningRequest>,
    /// CSR names (cluster-scoped keys).
    queue: RateLimitingQueue<ObjectKey>,
    executor: Executor,
    ca: Arc<Ca>,
    max_duration: Duration,
    /// Sync counters for `/metrics`.
    pub metrics: Arc<ControllerMetrics>,
}

impl CsrSigningController {
    /// Builds the controller on the factory's CSR informer, signing with `ca`.
    pub fn new(
        factory: &SharedInformerFactory,
        executor: Executor,
        ca: Ca,
        max_duration: Duration,
    ) -> Self {
        let csrs = factory.informer::<CertificateSigningRequest>();
        let this = CsrSigningController {
            csrs: Lister::new(csrs.indexer().clone()),
            queue: RateLimitingQueue::on_clock("certificate", executor.clock().clone()),
            executor,
            ca: Arc::new(ca),
            max_duration,
            metrics: Arc::new(ControllerMetrics::new("csrsigning")),
        };
        let (add, update) = (this.clone(), this.clone());
        csrs.add_event_handler(
            client::ResourceEventHandlerFuncs::new()
                .on_add(move |csr: Arc<CertificateSigningRequest>, _| add.enqueue(&csr))
                .on_update(move |_, csr: Arc<CertificateSigningRequest>| update.enqueue(&csr)),
        );
        this
    }

    fn enqueue(&self, csr: &CertificateSigningRequest) {
        if let Some(name) = csr.metadata.name.as_deref() {
            self.queue.add(ObjectKey::new(None, name));
        }
    }

    /// The controller's work queue.
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

    /// `signer.handle` for the CSR named by `key`.
    pub async fn sync(&self, key: &ObjectKey) -> SyncResult {
        let Some(cached) = self.csrs.get(None, &key.name) else {
            return Ok(None);
        };
        let mut csr = (*cached).clone();
        let request = match parse_csr(&csr.spec.request.0) {
            Ok(request) => request,
            Err(e) => {
                // The API server validated it: only a request of another era gets here.
                client::trace::set_summary(format!("{}: unable to parse csr: {e}", key.name));
                return Ok(None);
            }
        };
        match decide(&csr, &request, self.max_duration) {
            Decision::Skip(why) => {
                client::trace::set_summary(format!("{}: {why}", key.name));
                Ok(None)
            }
            Decision::Fail(message) => {
                csr.status
                    .get_or_insert_with(Default::default)
                    .conditions
                    .get_or_insert_with(Vec::new)
                    .push(CertificateSigningRequestCondition {
                        type_: "Failed".into(),
                        status: "True".into(),
                        reason: Some(SIGNER_VALIDATION_FAILURE.into()),
                        message: Some(message.clone()),
                        last_update_time: Some(Time(self.executor.clock().wall())),
                        last_transition_time: None,
                    });
                self.update_status(&key.name, &csr).await?;
                client::trace::set_summary(format!("{}: failed: {message}", key.name));
                Ok(None)
            }
            Decision::Sign(ttl) => {
                let validity = signing_validity(SystemTime::now(), ttl, self.ca.not_after())
                    .map_err(|e| Error::Signing(e.to_string()))?;
                let usages: Vec<&str> = csr
                    .spec
                    .usages
                    .iter()
                    .flatten()
                    .map(String::as_str)
                    .collect();
                let cert = self
                    .ca
                    .sign_csr(&request.der, validity, &usages)
                    .map_err(|e| Error::Signing(e.to_string()))?;
                csr.status.get_or_insert_with(Default::default).certificate =
                    Some(ByteString(cert.into_bytes()));
                self.update_status(&key.name, &csr).await?;
                client::trace::set_summary(format!(
                    "{}: issued a certificate for {:?} valid {}",
                    key.name,
                    request.common_name,
                    apimachinery::duration::go_duration(ttl)
                ));
                Ok(None)
            }
        }
    }

    /// `UpdateStatus`: PUT `certificatesigningrequests/{name}/status` (a conflict retries
    /// the key with the informer's newer copy).
    async fn update_status(&self, name: &str, csr: &CertificateSigningRequest) -> Result<()> {
        let api: Api<CertificateSigningRequest> = Api::all(self.executor.client());
        api.replace_status(name, &PostParams::default(), csr)
            .await
            .map(|_| ())
            .map_err(|e| {
                Error::from_kube(
                    "update",
                    format!("CertificateSigningRequest {name}/status"),
                    e,
                )
            })
    }
}
