//! The kubectl-like verbs of `miniplane` (`apply`, `get`, `describe`, `delete`, `scale`,
//! `rollout`, `events`), for users without kubectl, and `history`, which kubectl lacks.
//! kubectl keeps working too; these verbs speak to any Kubernetes API server the kubeconfig
//! names, not only miniplane's (`history` needs miniplane's).
//!
//! Each verb is one file named after it and mirrors the kubectl command in
//! `staging/src/k8s.io/kubectl/pkg/cmd/<verb>/`. What they share:
//!
//! ```text
//!   flags ─▶ config_flags (kubeconfig, context, namespace) ─▶ kube::Client
//!                    │
//!   TYPE args ─▶ resource_args ─▶ restmapper (discovery) ─▶ Api<DynamicObject>
//!   -f FILE  ─▶ manifest (YAML stream) ──────────────────────┘
//!                    │
//!   output ◀─ table (server-side Tables) │ printers (-o json|yaml|name) │ tabwriter
//!   errors ◀─ error: one line on stderr, exit status 1
//! ```
//!
//! Output, messages and exit codes follow kubectl's; the README's CLI section lists what is
//! left out.

mod apply;
mod config_flags;
mod delete;
mod describe;
mod error;
mod events;
mod get;
mod history;
mod manifest;
pub(crate) mod printers;
mod resource_args;
pub(crate) mod restmapper;
mod rollout;
mod scale;
mod table;
mod tabwriter;
mod watch;
mod yaml;

use std::io::Write;

use error::Error;

/// The kubectl-like verbs, as subcommands of `miniplane`.
#[derive(Debug, clap::Subcommand)]
pub enum Verb {
    /// Creates or updates objects from manifests with server-side apply (kubectl apply).
    Apply(apply::ApplyArgs),
    /// Lists or shows objects as tables, YAML, JSON or names; -w watches (kubectl get).
    Get(get::GetArgs),
    /// Shows an object in detail with its events (kubectl describe).
    Describe(describe::DescribeArgs),
    /// Deletes objects by type and name, label selector or manifest (kubectl delete).
    Delete(delete::DeleteArgs),
    /// Sets the replicas of a Deployment, ReplicaSet or StatefulSet (kubectl scale).
    Scale(scale::ScaleArgs),
    /// Manages the rollout of a Deployment (kubectl rollout).
    #[command(subcommand)]
    Rollout(rollout::RolloutCommand),
    /// Lists events, oldest first; -w watches (kubectl events).
    Events(events::EventsArgs),
    /// Every kept version of an object: who wrote it, its trace, what changed; --at REV shows
    /// it as it was (no kubectl counterpart).
    History(history::HistoryArgs),
}

/// Runs `verb`. On failure prints the error line on stderr and exits with status 1, as kubectl
/// does; returns only on success.
pub fn main(verb: Verb) -> anyhow::Result<()> {
    // kube logs failed requests itself; a verb reports them as one line, so the client's own
    // logs stay off on this thread (where the runtime below runs every task) unless asked for
    // with RUST_LOG.
    let _quiet = std::env::var_os("RUST_LOG")
        .is_none()
        .then(|| tracing::subscriber::set_default(tracing::subscriber::NoSubscriber::default()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async move {
        match verb {
            Verb::Apply(args) => apply::run(args).await,
            Verb::Get(args) => get::run(args).await,
            Verb::Describe(args) => describe::run(args).await,
            Verb::Delete(args) => delete::run(args).await,
            Verb::Scale(args) => scale::run(args).await,
            Verb::Rollout(command) => rollout::run(command).await,
            Verb::Events(args) => events::run(args).await,
            Verb::History(args) => history::run(args).await,
        }
    });
    if let Err(e) = result {
        let _ = std::io::stdout().flush();
        if !matches!(e, Error::Reported) {
            eprintln!("{e}");
        }
        std::process::exit(1);
    }
    Ok(())
}

/// Writes `text` to standard output now (watches print as events come). A closed pipe
/// (`miniplane get -w | head`) ends the process quietly (`crate::closed_pipe`).
pub(crate) fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            crate::closed_pipe::die();
        }
        std::process::exit(1);
    }
}
