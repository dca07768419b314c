//! `miniplane kubeconfig [--data-dir DIR] [--merge]`: prints the kubeconfig `miniplane up`
//! wrote, or merges its `miniplane` cluster, user and context into the user's kubeconfig (the
//! file kubectl would write: `$KUBECONFIG`'s first existing file, else `~/.kube/config`) and
//! makes it the current context, as `kind export kubeconfig` does.

use std::path::PathBuf;

use miniplane::kubeconfig;

/// Flags of `miniplane kubeconfig`.
#[derive(Debug, clap::Args)]
pub struct KubeconfigArgs {
    /// The data directory of `miniplane up`.
    #[arg(long, value_name = "DIR", default_value = ".miniplane")]
    data_dir: PathBuf,
    /// Add the `miniplane` context to your kubeconfig and switch to it, keeping every other
    /// context.
    #[arg(long)]
    merge: bool,
}

/// Prints or merges the kubeconfig.
pub fn main(args: KubeconfigArgs) -> anyhow::Result<()> {
    let ours = args.data_dir.join("kubeconfig");
    if !ours.exists() {
        anyhow::bail!(
            "no kubeconfig in {}: start the cluster with `miniplane up{}`",
            args.data_dir.display(),
            if args.data_dir == std::path::Path::new(".miniplane") {
                String::new()
            } else {
                format!(" --data-dir {}", args.data_dir.display())
            }
        );
    }
    if !args.merge {
        let yaml = std::fs::read_to_string(&ours)
            .map_err(|e| anyhow::anyhow!("{}: {e}", ours.display()))?;
        print!("{yaml}");
        return Ok(());
    }
    let target = kubeconfig::default_path()?;
    kubeconfig::merge_into(&ours, &target)?;
    eprintln!(
        "merged context \"{}\" into {} and made it the current context",
        kubeconfig::CONTEXT,
        target.display()
    );
    Ok(())
}
