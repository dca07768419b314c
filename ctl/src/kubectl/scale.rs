//! `miniplane scale TYPE/NAME --replicas N`: kubectl scale
//! (`staging/src/k8s.io/kubectl/pkg/cmd/scale/scale.go`).
//!
//! Writes the `scale` subresource (`PATCH .../deployments/web/scale` with the merge patch
//! `{"spec":{"replicas":N}}`), as kubectl does, so it works for any kind that has one
//! (Deployment, ReplicaSet, StatefulSet, custom resources with a scale subresource). The
//! controllers do the rest. Prints `deployment.apps/web scaled`.

use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::config_flags::{ConfigFlags, Session};
use super::error::{Error, KubeResultExt, Result};
use super::resource_args;

/// Flags of `miniplane scale`.
#[derive(Debug, clap::Args)]
pub struct ScaleArgs {
    /// TYPE NAME or TYPE/NAME, e.g. deploy/web.
    #[arg(value_name = "TYPE[/NAME]", required = true)]
    args: Vec<String>,
    /// The new number of replicas.
    #[arg(long, value_name = "COUNT", required = true)]
    replicas: i32,
    #[command(flatten)]
    config: ConfigFlags,
}

/// Runs `miniplane scale`.
pub async fn run(args: ScaleArgs) -> Result<()> {
    if args.replicas < 0 {
        return Err(Error::Usage(
            "The --replicas=COUNT flag is required, and COUNT must be greater than or equal to 0"
                .to_owned(),
        ));
    }
    let (type_arg, name) = resource_args::parse_one(&args.args, "scale")?;
    let session = Session::connect(&args.config).await?;
    let mapper = session.mapper().await?;
    let mapping = mapper.resource_for(&type_arg)?;
    let patch = json!({ "spec": { "replicas": args.replicas } });
    session
        .api(mapping, false)
        .patch_scale(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .at(&session.server)?;
    super::print(&format!("{} scaled\n", mapping.object_name(&name)));
    Ok(())
}
