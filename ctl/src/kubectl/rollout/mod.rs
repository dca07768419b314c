//! `miniplane rollout status|history|undo|restart|pause|resume deploy/NAME`: kubectl rollout
//! (`staging/src/k8s.io/kubectl/pkg/cmd/rollout/`), for Deployments.
//!
//! ```text
//!   status    watch the Deployment until the rollout completes (status.rs)
//!   history   its revisions, from the ReplicaSets it owns (history.rs)
//!   undo      copy an older ReplicaSet's pod template back (history.rs)
//!   restart   set the template annotation kubectl.kubernetes.io/restartedAt: new pods
//!   pause     spec.paused=true: the controller stops rolling out template changes
//!   resume    spec.paused=false
//! ```
//!
//! Unlike kubectl, DaemonSets and StatefulSets are not supported (their history lives in
//! ControllerRevisions).

pub(crate) mod history;
mod status;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

use super::config_flags::{ConfigFlags, Session};
use super::error::{Error, KubeResultExt, Result};
use super::resource_args;

/// The rollout subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum RolloutCommand {
    /// Waits for a rollout to finish, showing its progress.
    Status(StatusArgs),
    /// Lists the revisions of a Deployment (or shows one with --revision).
    History(HistoryArgs),
    /// Rolls back to the previous revision (or --to-revision).
    Undo(UndoArgs),
    /// Replaces every pod through a new rollout.
    Restart(TargetArgs),
    /// Stops the Deployment controller from rolling out template changes.
    Pause(TargetArgs),
    /// Lets the Deployment controller roll out again.
    Resume(TargetArgs),
}

/// The Deployment a rollout subcommand acts on.
#[derive(Debug, clap::Args)]
pub struct TargetArgs {
    /// deploy/NAME or deployment NAME.
    #[arg(value_name = "TYPE[/NAME]", required = true)]
    args: Vec<String>,
    #[command(flatten)]
    config: ConfigFlags,
}

/// Flags of `rollout status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Give up after this long (e.g. 60s; default: wait until done).
    #[arg(long, value_parser = apimachinery::duration::parse_duration, value_name = "DURATION")]
    timeout: Option<Duration>,
    /// Wait until done; --watch=false prints the current status once.
    #[arg(short = 'w', long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    watch: bool,
}

/// Flags of `rollout history`.
#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Show the pod template of this revision.
    #[arg(long, value_name = "N")]
    revision: Option<i64>,
}

/// Flags of `rollout undo`.
#[derive(Debug, clap::Args)]
pub struct UndoArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// The revision to go back to (default: the one before the current).
    #[arg(long, default_value_t = 0, value_name = "N")]
    to_revision: i64,
}

/// A resolved target: the session, the typed Deployment API and the name.
struct Target {
    session: Session,
    api: Api<Deployment>,
    name: String,
}

impl Target {
    async fn resolve(args: &TargetArgs, verb: &str) -> Result<Target> {
        let (type_arg, name) = resource_args::parse_one(&args.args, verb)?;
        let session = Session::connect(&args.config).await?;
        let mapper = session.mapper().await?;
        let mapping = mapper.resource_for(&type_arg)?;
        if mapping.resource.group != "apps" || mapping.resource.kind != "Deployment" {
            return Err(Error::Usage(format!(
                "miniplane rollout supports deployments only, not {}",
                mapping.resource_group()
            )));
        }
        let api = Api::namespaced(session.client.clone(), &session.namespace);
        Ok(Target { session, api, name })
    }

    async fn get(&self) -> Result<Deployment> {
        self.api.get(&self.name).await.at(&self.session.server)
    }

    /// `deployment.apps/web`.
    fn object_name(&self) -> String {
        format!("deployment.apps/{}", self.name)
    }

    async fn patch(&self, patch: &Patch<serde_json::Value>) -> Result<()> {
        self.api
            .patch(&self.name, &PatchParams::default(), patch)
            .await
            .at(&self.session.server)?;
        Ok(())
    }

    /// The ReplicaSets matching the Deployment's selector, as rollout history reads them.
    async fn replica_sets(&self, d: &Deployment) -> Result<Vec<ReplicaSet>> {
        let selector = d
            .spec
            .as_ref()
            .map(|s| s.selector.clone())
            .unwrap_or_default();
        let selector: kube::core::Selector = selector
            .try_into()
            .map_err(|e| Error::Other(format!("invalid selector of {}: {e}", self.name)))?;
        let api: Api<ReplicaSet> =
            Api::namespaced(self.session.client.clone(), &self.session.namespace);
        let params = ListParams::default().labels_from(&selector);
        Ok(api.list(&params).await.at(&self.session.server)?.items)
    }
}

/// Runs a rollout subcommand.
pub async fn run(command: RolloutCommand) -> Result<()> {
    match command {
        RolloutCommand::Status(args) => rollout_status(args).await,
        RolloutCommand::History(args) => rollout_history(args).await,
        RolloutCommand::Undo(args) => rollout_undo(args).await,
        RolloutCommand::Restart(args) => rollout_restart(args).await,
        RolloutCommand::Pause(args) => set_paused(args, true).await,
        RolloutCommand::Resume(args) => set_paused(args, false).await,
    }
}

/// `rollout status`: watches the Deployment; in a terminal redraws one progress line, else
/// prints kubectl's message whenever it changes.
async fn rollout_status(args: StatusArgs) -> Result<()> {
    let target = Target::resolve(&args.target, "rollout status").await?;
    let first = target.get().await?;
    let terminal = std::io::stdout().is_terminal();
    let mut display = StatusDisplay::new(terminal);
    if !args.watch {
        let status = status::status(&first).map_err(Error::Other)?;
        super::print(&format!("{}\n", status.message));
        return Ok(());
    }
    let config = watcher::Config::default().fields(&format!("metadata.name={}", target.name));
    let uid = first.metadata.uid.clone();
    let watch =
        async {
            let mut stream = std::pin::pin!(watcher(target.api.clone(), config));
            while let Some(event) = stream.try_next().await.map_err(|e| {
                Error::Other(format!("watching deployment \"{}\": {e}", target.name))
            })? {
                match event {
                    watcher::Event::Apply(d) | watcher::Event::InitApply(d) => {
                        if d.metadata.uid != uid {
                            return Err(Error::Other("object has been deleted".to_owned()));
                        }
                        let status = status::status(&d).map_err(Error::Other)?;
                        display.show(&status);
                        if status.done {
                            return Ok(());
                        }
                    }
                    watcher::Event::Delete(_) => {
                        return Err(Error::Other("object has been deleted".to_owned()));
                    }
                    watcher::Event::Init | watcher::Event::InitDone => {}
                }
            }
            Err(Error::Other("the watch ended".to_owned()))
        };
    let result = match args.timeout {
        Some(limit) => tokio::time::timeout(limit, watch)
            .await
            .unwrap_or(Err(Error::Timeout)),
        None => watch.await,
    };
    display.finish();
    result
}

/// How `rollout status` shows progress.
struct StatusDisplay {
    terminal: bool,
    last: Option<String>,
}

impl StatusDisplay {
    /// Width of the bar, in characters.
    const BAR: usize = 20;

    fn new(terminal: bool) -> Self {
        StatusDisplay {
            terminal,
            last: None,
        }
    }

    fn show(&mut self, s: &status::Status) {
        if self.terminal {
            // Carriage return and "erase line": the bar is redrawn in place; the final
            // message replaces it.
            let line = if s.done {
                format!("\r\x1b[2K{}\n", s.message)
            } else {
                format!("\r\x1b[2K{}", status::progress_line(&s.progress, Self::BAR))
            };
            super::print(&line);
            self.last = Some(line);
        } else if self.last.as_deref() != Some(s.message.as_str()) {
            super::print(&format!("{}\n", s.message));
            self.last = Some(s.message.clone());
        }
    }

    /// Ends a bar left on screen (timeout, error) with a newline.
    fn finish(&self) {
        if self.terminal && self.last.as_deref().is_some_and(|l| !l.ends_with('\n')) {
            super::print("\n");
        }
    }
}

/// `rollout history [--revision N]`.
async fn rollout_history(args: HistoryArgs) -> Result<()> {
    let target = Target::resolve(&args.target, "rollout history").await?;
    let d = target.get().await?;
    let replica_sets = target.replica_sets(&d).await?;
    let history = history::history(&d, &replica_sets);
    let text = match args.revision {
        None | Some(0) => format!(
            "{} \n{}\n",
            target.object_name(),
            super::tabwriter::TabWriter::describe().format(&history::history_table(&history))
        ),
        Some(revision) => {
            let rs: &ReplicaSet = history.get(&revision).ok_or_else(|| {
                Error::Other(format!("unable to find the specified revision {revision}"))
            })?;
            let template = rs
                .spec
                .as_ref()
                .and_then(|s| s.template.clone())
                .unwrap_or_default();
            format!(
                "{} with revision #{revision}\n{}",
                target.object_name(),
                super::describe::pod_template_text(&template)
            )
        }
    };
    super::print(&text);
    Ok(())
}

/// `rollout undo [--to-revision N]`.
async fn rollout_undo(args: UndoArgs) -> Result<()> {
    let target = Target::resolve(&args.target, "rollout undo").await?;
    let d = target.get().await?;
    let replica_sets = target.replica_sets(&d).await?;
    let history: BTreeMap<i64, &ReplicaSet> = history::history(&d, &replica_sets);
    match history::rollback(&d, &history, args.to_revision).map_err(Error::Other)? {
        history::Rollback::Skipped { revision } => super::print(&format!(
            "{} skipped rollback (current template already matches revision {revision})\n",
            target.object_name()
        )),
        history::Rollback::Restore {
            template,
            annotations,
        } => {
            // kubectl sends these as a JSON patch; a PUT of the Deployment we read does the
            // same and fails with a Conflict if it changed meanwhile.
            let mut restored = d.clone();
            if let Some(spec) = restored.spec.as_mut() {
                spec.template = *template;
            }
            restored.metadata.annotations = Some(annotations);
            target
                .api
                .replace(&target.name, &PostParams::default(), &restored)
                .await
                .at(&target.session.server)?;
            super::print(&format!("{} rolled back\n", target.object_name()));
        }
    }
    Ok(())
}

/// `rollout restart`: a new template annotation makes a new ReplicaSet.
async fn rollout_restart(args: TargetArgs) -> Result<()> {
    let target = Target::resolve(&args, "rollout restart").await?;
    let d = target.get().await?;
    if d.spec.as_ref().and_then(|s| s.paused) == Some(true) {
        return Err(Error::Other(format!(
            "deployments.apps \"{}\" can't restart paused deployment (run rollout resume first)",
            target.name
        )));
    }
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": now
    }}}}});
    target.patch(&Patch::Merge(patch)).await?;
    super::print(&format!("{} restarted\n", target.object_name()));
    Ok(())
}

/// `rollout pause` / `rollout resume`.
async fn set_paused(args: TargetArgs, paused: bool) -> Result<()> {
    let verb = if paused {
        "rollout pause"
    } else {
        "rollout resume"
    };
    let target = Target::resolve(&args, verb).await?;
    let d = target.get().await?;
    let is_paused = d.spec.as_ref().and_then(|s| s.paused) == Some(true);
    if is_paused == paused {
        let state = if paused {
            "already paused"
        } else {
            "not paused"
        };
        return Err(Error::Other(format!(
            "deployments.apps \"{}\" is {state}",
            target.name
        )));
    }
    target
        .patch(&Patch::Merge(json!({"spec": {"paused": paused}})))
        .await?;
    let done = if paused { "paused" } else { "resumed" };
    super::print(&format!("{} {done}\n", target.object_name()));
    Ok(())
}
