//! The Website operator again, written with kube-rs' `kube-runtime` as operators for real
//! clusters are: a `Controller` that watches Websites and the Deployments and Services they
//! own, and the `finalizer` helper for clean-up. Same decisions as `operator.rs` (both use
//! `website.rs`); nothing here knows it talks to miniplane.
//!
//! ```text
//!  Controller::new(websites).owns(deployments).owns(services)
//!     .run(reconcile, error_policy)
//!  reconcile = finalizer(FINALIZER, website, |event| match event {
//!     Apply(w)   → server-side apply Deployment + Service, patch /status
//!     Cleanup(w) → delete Deployment + Service })
//! ```
//!
//! ```text
//! cargo run -p ctl --example website-operator-kube -- .miniplane/kubeconfig
//! ```

#[path = "website.rs"]
mod website;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;
use website::{FINALIZER, Website, desired_deployment, desired_service, desired_status};

/// The field manager of the operator's writes.
const MANAGER: &str = "website-operator-kube";

/// What every reconcile can use.
struct Context {
    client: kube::Client,
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// A request failed.
    #[error("{0}")]
    Kube(#[from] kube::Error),
    /// The finalizer helper failed.
    #[error("{0}")]
    Finalizer(#[from] Box<kube::runtime::finalizer::Error<kube::Error>>),
}

async fn apply(website: Arc<Website>, ctx: &Context) -> Result<Action, kube::Error> {
    let ns = website.namespace();
    let name = website.name();
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), ns);
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), ns);
    let apply = PatchParams::apply(MANAGER).force();
    let deployment = deployments
        .patch(name, &apply, &Patch::Apply(desired_deployment(&website)))
        .await?;
    let service = services
        .patch(name, &apply, &Patch::Apply(desired_service(&website)))
        .await?;
    let status = desired_status(&website, Some(&deployment), Some(&service), &website::now());
    if website.status.as_ref() != Some(&status) {
        let websites: Api<Website> = Api::namespaced(ctx.client.clone(), ns);
        let patch = serde_json::json!({"status": status});
        websites
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    // Owned Deployments' changes bring the Website back; no timer needed.
    Ok(Action::await_change())
}

async fn cleanup(website: Arc<Website>, ctx: &Context) -> Result<Action, kube::Error> {
    let ns = website.namespace();
    for result in [
        Api::<Deployment>::namespaced(ctx.client.clone(), ns)
            .delete(website.name(), &DeleteParams::background())
            .await
            .map(|_| ()),
        Api::<Service>::namespaced(ctx.client.clone(), ns)
            .delete(website.name(), &DeleteParams::background())
            .await
            .map(|_| ()),
    ] {
        match result {
            Ok(()) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    println!(
        "website-operator-kube: cleaned up {}/{}",
        ns,
        website.name()
    );
    Ok(Action::await_change())
}

async fn reconcile(website: Arc<Website>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api: Api<Website> = Api::namespaced(ctx.client.clone(), website.namespace());
    finalizer(&api, FINALIZER, website, |event| async {
        match event {
            Event::Apply(w) => apply(w, &ctx).await,
            Event::Cleanup(w) => cleanup(w, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

fn error_policy(_website: Arc<Website>, error: &Error, _ctx: Arc<Context>) -> Action {
    eprintln!("website-operator-kube: {error}");
    Action::requeue(Duration::from_millis(500))
}

/// Runs the controller against `client` until `shutdown` fires.
pub async fn run(client: kube::Client, shutdown: CancellationToken) {
    let websites: Api<Website> = Api::all(client.clone());
    Controller::new(websites, watcher::Config::default())
        .owns(
            Api::<Deployment>::all(client.clone()),
            watcher::Config::default(),
        )
        .owns(
            Api::<Service>::all(client.clone()),
            watcher::Config::default(),
        )
        .graceful_shutdown_on(async move { shutdown.cancelled().await })
        .run(reconcile, error_policy, Arc::new(Context { client }))
        .for_each(|_| futures::future::ready(()))
        .await;
}

#[allow(dead_code)]
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = match std::env::args().nth(1) {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
            let config = kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &kube::config::KubeConfigOptions::default(),
            )
            .await?;
            kube::Client::try_from(config)?
        }
        None => kube::Client::try_default().await?,
    };
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    println!("website-operator-kube: running (Ctrl-C to stop)");
    run(client, shutdown).await;
    Ok(())
}
