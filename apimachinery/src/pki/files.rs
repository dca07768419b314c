//! The PKI's files: certificates (mode 0644) and keys (mode 0600) written atomically, as
//! client-go's `util/cert.WriteCert` and `util/keyutil.WriteKey` give them their modes.
//!
//! A file is written under a temporary name in its directory, synced, renamed over its name and
//! the directory synced: after a crash it is either whole or absent.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use super::{CertError, IssuedCert, Result};

/// A certificate file's mode.
pub(super) const CERT_MODE: u32 = 0o644;

/// A key file's mode: the owner's only.
pub(super) const KEY_MODE: u32 = 0o600;

/// An I/O error on `path`.
pub(super) fn io_error(path: &Path, source: std::io::Error) -> CertError {
    CertError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Reads a file of the PKI; `None` if it does not exist.
pub(super) fn read_if_exists(path: &Path) -> Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(path, e)),
    }
}

/// Writes `contents` to `path` with `mode`, atomically (temporary file, fsync, rename, fsync of
/// the directory).
pub(super) fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io_error(path, ErrorKind::InvalidInput.into()))?;
    let tmp: PathBuf = dir.join(format!(
        ".{}.tmp-{}-{:016x}",
        name.to_string_lossy(),
        std::process::id(),
        rand::random::<u64>()
    ));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        file.write_all(contents)?;
        file.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io_error(&tmp, e));
    }
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(io_error(path, e));
    }
    sync_dir(dir)
}

/// Syncs a directory, so that the renames in it are durable.
fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, e))
}

/// Creates `dir` (and its parents) if missing, mode 0700 for a new one, as kubeadm keeps
/// `/etc/kubernetes/pki`.
pub(super) fn ensure_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io_error(dir, e))
}

/// Locks `dir` (an exclusive `flock` on the directory itself, so no lock file is left) until
/// the returned handle is dropped: processes creating the CA in one directory take turns.
pub(super) fn lock_dir(dir: &Path) -> Result<fs::File> {
    let handle = fs::File::open(dir).map_err(|e| io_error(dir, e))?;
    handle.lock().map_err(|e| io_error(dir, e))?;
    Ok(handle)
}

/// Writes `<name>.crt` (0644) and `<name>.key` (0600) into `dir`, each atomically, the key
/// first (kubeadm's `pkiutil.WriteCertAndKey`). Returns the two paths.
pub fn write_cert_and_key(
    dir: &Path,
    name: &str,
    issued: &IssuedCert,
) -> Result<(PathBuf, PathBuf)> {
    ensure_dir(dir)?;
    let cert = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    write_atomic(&key, issued.key_pem.as_bytes(), KEY_MODE)?;
    write_atomic(&cert, issued.cert_pem.as_bytes(), CERT_MODE)?;
    Ok((cert, key))
}
