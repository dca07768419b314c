//! `miniplane delete`: kubectl delete (`staging/src/k8s.io/kubectl/pkg/cmd/delete/delete.go`).
//!
//! ```text
//!   delete deploy web [api]     delete deploy/web     delete -f web.yaml
//!   delete pods -l app=web      delete pods --all
//!        │ DELETE with DeleteOptions{propagationPolicy: --cascade}
//!        ▼
//!   deployment.apps "web" deleted        (printed as soon as the server accepts)
//!        │ --wait (default): watch until the object is gone (finalizers, graceful pods)
//! ```
//!
//! `--cascade=background` (default) lets the garbage collector remove dependents afterwards,
//! `foreground` keeps the owner until they are gone, `orphan` leaves them. A missing object is
//! the server's NotFound (exit status 1) unless `--ignore-not-found`.

use std::time::Duration;

use kube::api::{DeleteParams, ListParams, PropagationPolicy};
use kube::runtime::wait::{await_condition, conditions};

use super::config_flags::{ConfigFlags, Session};
use super::error::{Error, KubeResultExt, Result};
use super::manifest;
use super::resource_args;
use super::restmapper::Mapping;

/// Flags of `miniplane delete`.
#[derive(Debug, clap::Args)]
pub struct DeleteArgs {
    /// TYPE NAME..., TYPE/NAME..., or TYPE with -l/--all.
    #[arg(value_name = "TYPE[/NAME]")]
    args: Vec<String>,
    /// Delete the objects in these manifests (file, directory or -).
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    filenames: Vec<String>,
    /// Also read subdirectories of a directory given with -f.
    #[arg(short = 'R', long)]
    recursive: bool,
    /// Delete the objects of TYPE matching this label selector.
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    selector: Option<String>,
    /// Delete every object of TYPE in the namespace.
    #[arg(long)]
    all: bool,
    /// What happens to dependents (objects this one owns).
    #[arg(long, value_enum, default_value = "background")]
    cascade: Cascade,
    /// Wait until the objects are gone.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    wait: bool,
    /// Give up waiting after this long (e.g. 30s; default: no limit).
    #[arg(long, value_parser = apimachinery::duration::parse_duration, value_name = "DURATION")]
    timeout: Option<Duration>,
    /// A missing object is not an error.
    #[arg(long)]
    ignore_not_found: bool,
    #[command(flatten)]
    config: ConfigFlags,
}

/// `--cascade` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Cascade {
    /// Delete the object now; the garbage collector deletes dependents afterwards.
    Background,
    /// Delete dependents first; the object goes last.
    Foreground,
    /// Delete the object only; dependents lose their owner reference.
    Orphan,
}

impl Cascade {
    fn policy(self) -> PropagationPolicy {
        match self {
            Cascade::Background => PropagationPolicy::Background,
            Cascade::Foreground => PropagationPolicy::Foreground,
            Cascade::Orphan => PropagationPolicy::Orphan,
        }
    }
}

/// One object to delete.
struct Target<'m> {
    mapping: &'m Mapping,
    namespace: String,
    name: String,
}

/// Runs `miniplane delete`.
pub async fn run(args: DeleteArgs) -> Result<()> {
    if !args.filenames.is_empty() && !args.args.is_empty() {
        return Err(Error::Usage(
            "there is no need to specify a resource type as a separate argument when passing arguments with -f".to_owned(),
        ));
    }
    if args.filenames.is_empty() && args.args.is_empty() {
        return Err(Error::Usage(
            "you must provide one or more resources by argument or filename".to_owned(),
        ));
    }
    let manifests = manifest::read_all(&args.filenames, args.recursive)?;
    let session = Session::connect(&args.config).await?;
    let mapper = session.mapper().await?;
    let mut targets = Vec::new();
    for m in &manifests {
        targets.push(Target {
            mapping: m.mapping(&mapper)?,
            namespace: m.namespace().unwrap_or(&session.namespace).to_owned(),
            name: m.name().to_owned(),
        });
    }
    let requests = resource_args::parse(&args.args)?;
    let (resolved, _) = resource_args::resolve(&mapper, &requests)?;
    for r in resolved {
        let names = if !r.names.is_empty() {
            if args.selector.is_some() || args.all {
                return Err(Error::Usage(
                    "name cannot be provided when a selector or --all is specified".to_owned(),
                ));
            }
            r.names
        } else if args.selector.is_some() || args.all {
            let params = ListParams {
                label_selector: args.selector.clone(),
                ..ListParams::default()
            };
            let list = session
                .api(r.mapping, false)
                .list_metadata(&params)
                .await
                .at(&session.server)?;
            list.items
                .into_iter()
                .filter_map(|o| o.metadata.name)
                .collect()
        } else {
            return Err(Error::Usage(
                "resource(s) were provided, but no name was specified".to_owned(),
            ));
        };
        targets.extend(names.into_iter().map(|name| Target {
            mapping: r.mapping,
            namespace: session.namespace.clone(),
            name,
        }));
    }
    if targets.is_empty() {
        eprintln!("No resources found");
        return Ok(());
    }
    delete_all(&session, &args, &targets).await
}

/// Deletes every target (printing as each is accepted), then waits for them to be gone.
async fn delete_all(session: &Session, args: &DeleteArgs, targets: &[Target<'_>]) -> Result<()> {
    let params = DeleteParams {
        propagation_policy: Some(args.cascade.policy()),
        ..DeleteParams::default()
    };
    let mut failed = false;
    let mut pending = Vec::new();
    for t in targets {
        let api = session.api_in(t.mapping, &t.namespace);
        match api.delete(&t.name, &params).await.at(&session.server) {
            Ok(response) => {
                super::print(&format!(
                    "{} \"{}\" deleted\n",
                    t.mapping.kind_group(),
                    t.name
                ));
                // An object in the answer may still exist (finalizers, graceful deletion).
                if let Some(object) = response.left() {
                    pending.push((t, api, object.metadata.uid.unwrap_or_default()));
                }
            }
            Err(e) if e.is_not_found() && args.ignore_not_found => {}
            Err(e) => {
                eprintln!("{e}");
                failed = true;
            }
        }
    }
    if args.wait {
        for (t, api, uid) in pending {
            let gone = await_condition(api, &t.name, conditions::is_deleted(&uid));
            let result = match args.timeout {
                Some(limit) => tokio::time::timeout(limit, gone).await.map_err(|_| {
                    Error::Other(format!(
                        "timed out waiting for the condition on {}/{}",
                        t.mapping.resource_group(),
                        t.name
                    ))
                })?,
                None => gone.await,
            };
            result
                .map_err(|e| Error::Other(format!("waiting for {} to be deleted: {e}", t.name)))?;
        }
    }
    if failed {
        return Err(Error::Reported);
    }
    Ok(())
}
