//! `miniplane apply -f FILE|DIR|-`: kubectl apply, always server-side
//! (`staging/src/k8s.io/kubectl/pkg/cmd/apply/apply.go` with `--server-side`).
//!
//! Each object in the manifests is sent as a server-side apply patch
//! (`PATCH ...?fieldManager=miniplane`, `application/apply-patch+yaml`): the server merges it,
//! records which fields the `miniplane` manager owns, and creates the object if it is absent.
//! There is no last-applied annotation and no client-side three-way merge.
//!
//! ```text
//!   deployment.apps/web created       (it did not exist)
//!   deployment.apps/web configured    (the apply changed it)
//!   deployment.apps/web unchanged     (same resourceVersion afterwards)
//! ```
//!
//! Unlike `kubectl apply --server-side`, which prints `serverside-applied`, the result says
//! what happened, as client-side `kubectl apply` does; a GET before each patch tells.
//! A field another manager owns is a conflict (`Error from server (Conflict): Apply failed
//! with 1 conflict...`) unless `--force-conflicts` takes it over. Objects are applied in
//! order; one failing does not stop the others, and the exit status is then 1.

use kube::api::{Patch, PatchParams};
use serde_json::Value;

use super::config_flags::{ConfigFlags, Session};
use super::error::{Error, KubeResultExt, Result};
use super::manifest::{self, Manifest};
use super::restmapper::RestMapper;

/// Flags of `miniplane apply`.
#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    /// A manifest file, a directory of them, or - for standard input (repeatable).
    #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
    filenames: Vec<String>,
    /// Also read subdirectories of a directory given with -f.
    #[arg(short = 'R', long)]
    recursive: bool,
    /// Take over fields another field manager owns instead of failing with a conflict.
    #[arg(long)]
    force_conflicts: bool,
    /// The field manager recorded in managedFields.
    #[arg(long, default_value = "miniplane", value_name = "NAME")]
    field_manager: String,
    /// Ask the server to validate and default without saving (--dry-run=server).
    #[arg(long, value_name = "server")]
    dry_run: Option<DryRun>,
    #[command(flatten)]
    config: ConfigFlags,
}

/// `--dry-run` values (only the server kind: there is no client-side merge to preview).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DryRun {
    /// The server runs everything but the write.
    Server,
}

/// Runs `miniplane apply`.
pub async fn run(args: ApplyArgs) -> Result<()> {
    let manifests = manifest::read_all(&args.filenames, args.recursive)?;
    if manifests.is_empty() {
        return Err(Error::Usage("no objects passed to apply".to_owned()));
    }
    let session = Session::connect(&args.config).await?;
    let mapper = session.mapper().await?;
    let mut params = PatchParams::apply(&args.field_manager);
    params.force = args.force_conflicts;
    params.dry_run = args.dry_run.is_some();
    let suffix = if params.dry_run {
        " (server dry run)"
    } else {
        ""
    };
    let mut failed = false;
    for m in &manifests {
        match apply_one(&session, &mapper, &params, m).await {
            Ok(line) => super::print(&format!("{line}{suffix}\n")),
            Err(e) => {
                eprintln!("{e}");
                failed = true;
            }
        }
    }
    if failed {
        return Err(Error::Reported);
    }
    Ok(())
}

/// Applies one object; returns kubectl's result line.
async fn apply_one(
    session: &Session,
    mapper: &RestMapper,
    params: &PatchParams,
    m: &Manifest,
) -> Result<String> {
    let mapping = m.mapping(mapper)?;
    let namespace = match m.namespace() {
        Some(ns) if session.namespace_explicit && ns != session.namespace => {
            return Err(Error::Usage(format!(
                "the namespace from the provided object \"{ns}\" does not match the namespace \"{}\". You must pass '--namespace={ns}' to perform this operation.",
                session.namespace
            )));
        }
        Some(ns) => ns.to_owned(),
        None => session.namespace.clone(),
    };
    let api = session.api_in(mapping, &namespace);
    let name = m.name();
    let before = api.get_opt(name).await.at(&session.server)?;
    let mut body = m.object.clone();
    if mapping.namespaced {
        body["metadata"]["namespace"] = Value::String(namespace.clone());
    }
    let after = api
        .patch(name, params, &Patch::Apply(&body))
        .await
        .map_err(|e| conflict_hint(Error::from_kube(e, &session.server)))?;
    let verb = match before {
        None => "created",
        Some(b) if b.metadata.resource_version == after.metadata.resource_version => "unchanged",
        Some(_) => "configured",
    };
    Ok(format!("{} {verb}", mapping.object_name(name)))
}

/// Adds kubectl's way out to a field-manager conflict.
fn conflict_hint(e: Error) -> Error {
    match e {
        Error::Server {
            reason,
            message,
            code: 409,
        } if message.starts_with("Apply failed") => {
            // Several conflicts come as "...:\n- .spec.a\n- .spec.b": keep it to one line.
            let mut lines = message.lines();
            let first = lines.next().unwrap_or_default();
            let fields: Vec<&str> = lines.map(|l| l.trim_start_matches("- ")).collect();
            let message = if fields.is_empty() {
                first.to_owned()
            } else {
                format!("{first} {}", fields.join(", "))
            };
            Error::Server {
                reason,
                message: format!(
                    "{message} (re-run with --force-conflicts to take over these fields)"
                ),
                code: 409,
            }
        }
        other => other,
    }
}
