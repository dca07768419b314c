//! miniplane's own verbs, which no single Kubernetes component has: `up` (a whole cluster,
//! as kind's `create cluster`), `kubeconfig`, `trace` (what a write set in motion), `fault`
//! (injecting failures, `docs/faults.md`), `lab` (the teaching labs, `docs/labs.md`),
//! `cloud` (the simulated cloud under the cluster, `docs/cloud.md`), `load` (the simulated
//! usage of a workload's pods, for `kubectl top` and the HPA), `snapshot` (a cluster's
//! objects saved at one revision and restored), `clock` (the cluster's virtual clock) and
//! `record`/`replay` (a period's writes kept, and its clients' writes sent to a new cluster).
//! The kubectl-like verbs are in `kubectl/`; the components' own subcommands in `components/`.

use std::path::Path;

pub(crate) mod clock;
pub(crate) mod cloud;
pub(crate) mod fault;
pub(crate) mod kubeconfig;
pub(crate) mod lab;
pub(crate) mod load;
pub(crate) mod record;
pub(crate) mod replay;
pub(crate) mod snapshot;
pub(crate) mod trace;
pub(crate) mod up;

/// The directory `file` is written in.
fn dir_of(file: &Path) -> &Path {
    match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Fails early when `file`'s directory does not exist.
pub(crate) fn check_writable(file: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(dir_of(file)) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => anyhow::bail!("cannot write {}: not a directory", file.display()),
        Err(e) => anyhow::bail!("cannot write {}: {e}", file.display()),
    }
}

/// Writes `data` to `file` whole or not at all: a temporary file beside it, synced, renamed
/// over it (a snapshot, a recording).
pub(crate) fn write_whole(file: &Path, data: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let failed = |e: &dyn std::fmt::Display| anyhow::anyhow!("writing {}: {e}", file.display());
    let mut tmp = tempfile::NamedTempFile::new_in(dir_of(file)).map_err(|e| failed(&e))?;
    tmp.write_all(data)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| failed(&e))?;
    tmp.persist(file).map_err(|e| failed(&e))?;
    Ok(())
}
