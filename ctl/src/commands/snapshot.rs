//! `miniplane snapshot save|status|restore`: a running cluster's objects at one revision saved
//! to a file, what a file holds, and a new data directory made from one (etcd's `etcdctl
//! snapshot save`, `etcdutl snapshot status` and `etcdutl snapshot restore`, which is how
//! Kubernetes backs up and restores a cluster). `miniplane up --restore FILE` restores and
//! starts in one go.
//!
//! ```text
//!   miniplane snapshot save backup.snap             GET /miniplane/v1/snapshot ─▶ file
//!   miniplane snapshot save backup.yaml -o yaml     the objects, as kubectl prints a List
//!   miniplane snapshot status backup.snap           revision, keys, kinds, size, checksum
//!   miniplane snapshot restore backup.snap --data-dir .miniplane   ─▶ .miniplane/store
//! ```
//!
//! The YAML form is for reading and diffing (`diff` two of them); only the binary form
//! restores.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use apiserver::snapshot::Snapshot;

use super::fault::ClusterArgs;
use crate::kubectl::printers;

/// `miniplane snapshot`.
#[derive(Debug, clap::Args)]
pub struct SnapshotArgs {
    #[command(subcommand)]
    command: SnapshotCommand,
}

#[derive(Debug, clap::Subcommand)]
enum SnapshotCommand {
    /// Saves every object of a running cluster, at one revision, to FILE.
    Save {
        /// The file to write (written whole or not at all).
        file: PathBuf,
        /// `yaml`: the objects as `kubectl get -o yaml` prints a List (for reading and
        /// diffing; cannot be restored).
        #[arg(short = 'o', long, value_name = "FORMAT")]
        output: Option<Format>,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Checks a snapshot file and prints its revision, keys by resource and size.
    Status {
        /// The snapshot file.
        file: PathBuf,
    },
    /// Restores a snapshot file as the store of a new data directory (`up --data-dir DIR`
    /// then serves it). Every object keeps its resourceVersion; the store's revision moves
    /// past the snapshot's by --bump-revision and is compacted there, so clients that saw
    /// later revisions list again (410 Gone) instead of watching reused ones.
    Restore {
        /// The snapshot file.
        file: PathBuf,
        /// The data directory (`up --data-dir`); its `store/` must not exist or be empty.
        #[arg(long, value_name = "DIR", default_value = ".miniplane")]
        data_dir: PathBuf,
        /// How far past the snapshot's revision the restored store starts.
        #[arg(long, value_name = "N", default_value_t = store_bump())]
        bump_revision: u64,
    },
}

/// The output formats of `snapshot save` besides the snapshot file itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// The objects as YAML.
    Yaml,
}

fn store_bump() -> u64 {
    apiserver::snapshot::DEFAULT_BUMP
}

/// Runs `miniplane snapshot`.
pub fn main(args: SnapshotArgs) -> anyhow::Result<()> {
    match args.command {
        SnapshotCommand::Save {
            file,
            output,
            cluster,
        } => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(save(&file, output, &cluster))
        }
        SnapshotCommand::Status { file } => {
            let data = read(&file)?;
            let snapshot =
                Snapshot::decode(&data).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            print!("{}", status(&snapshot, data.len()));
            Ok(())
        }
        SnapshotCommand::Restore {
            file,
            data_dir,
            bump_revision,
        } => {
            let data = read(&file)?;
            let store = data_dir.join("store");
            let revision = apiserver::snapshot::restore(&data, &store, bump_revision)
                .map_err(|e| anyhow::anyhow!("restoring {}: {e}", file.display()))?;
            println!(
                "restored {} into {} at revision {revision}; start it with: miniplane up --data-dir {}",
                file.display(),
                store.display(),
                data_dir.display()
            );
            Ok(())
        }
    }
}

fn read(file: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(file).map_err(|e| anyhow::anyhow!("reading {}: {e}", file.display()))
}

async fn save(file: &Path, output: Option<Format>, cluster: &ClusterArgs) -> anyhow::Result<()> {
    let api = cluster.admin().await?;
    let data = api.snapshot().await?;
    let snapshot =
        Snapshot::decode(&data).map_err(|e| anyhow::anyhow!("the server's snapshot: {e}"))?;
    let bytes = match output {
        None => data,
        Some(Format::Yaml) => {
            let items = apiserver::snapshot::objects(&snapshot)
                .into_iter()
                .map(printers::without_managed_fields)
                .collect();
            let mut list = printers::list(items);
            list["metadata"]["resourceVersion"] = snapshot.revision.0.to_string().into();
            printers::to_yaml(&list).into_bytes()
        }
    };
    // Written whole or not at all: a partial file never takes the name.
    super::write_whole(file, &bytes)?;
    println!(
        "saved {} objects at revision {} to {} ({} bytes)",
        snapshot.kvs.len(),
        snapshot.revision,
        file.display(),
        bytes.len()
    );
    Ok(())
}

/// `etcdutl snapshot status`'s facts: revision, keys, size, and the keys by resource.
fn status(snapshot: &Snapshot, size: usize) -> String {
    let mut by_resource: BTreeMap<String, usize> = BTreeMap::new();
    for kv in &snapshot.kvs {
        let key = String::from_utf8_lossy(&kv.key);
        let resource = key
            .strip_prefix("/registry/")
            .and_then(|rest| rest.split('/').next())
            .unwrap_or("(other)")
            .to_owned();
        *by_resource.entry(resource).or_default() += 1;
    }
    let mut out = format!(
        "revision {}, {} keys, {size} bytes, checksum ok\n",
        snapshot.revision,
        snapshot.kvs.len()
    );
    for (resource, n) in by_resource {
        out.push_str(&format!("  {resource}: {n}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_counts_keys_by_resource() {
        let kv = |k: &str| apiserver::snapshot::KeyValue {
            key: k.to_owned().into_bytes().into(),
            value: Vec::new().into(),
            create_revision: apiserver::snapshot::Revision(2),
            mod_revision: apiserver::snapshot::Revision(3),
            version: 1,
        };
        let snapshot = Snapshot {
            revision: apiserver::snapshot::Revision(9),
            kvs: vec![
                kv("/registry/deployments/default/web"),
                kv("/registry/pods/default/a"),
                kv("/registry/pods/default/b"),
            ],
        };
        assert_eq!(
            status(&snapshot, 120),
            "revision 9, 3 keys, 120 bytes, checksum ok\n  deployments: 1\n  pods: 2\n"
        );
    }
}
