//! `tar` for `kubectl cp`: `tar cf - [-C DIR] PATH...` archives the file view to stdout,
//! `tar -xmf - [-C DIR]` (and `tar --no-same-permissions --no-same-owner -xmf - -C DIR`)
//! stores stdin's files in the container's copied-in files.
//!
//! Mirrors the commands kubectl sends: `staging/src/k8s.io/kubectl/pkg/cmd/cp/cp.go`
//! (`copyToPod`: `tar -xmf - -C <dir of dest>`; `copyFromPod`: `tar cf - <src>`). The archive
//! format itself is the `tar` crate's (ustar/GNU headers).

use std::io::Read;

use super::files::{self, normalize};
use super::{Outcome, Session};

/// What a `tar` argv asks for.
#[derive(Debug, Default, PartialEq, Eq)]
struct Args {
    create: bool,
    extract: bool,
    list: bool,
    file: Option<String>,
    dir: Option<String>,
    paths: Vec<String>,
}

/// Reads `tar`'s options: a first word of letters (`cf`, `xmf`, `-xmf`), `-C DIR`, `-f FILE`,
/// long options (ignored), then paths.
fn parse(args: &[String]) -> Result<Args, String> {
    let mut a = Args::default();
    let mut i = 0;
    while i < args.len() {
        let w = &args[i];
        i += 1;
        if w.starts_with("--") {
            continue;
        }
        if w == "-C" {
            a.dir = args.get(i).cloned();
            i += 1;
            continue;
        }
        let letters = w
            .strip_prefix('-')
            .or(if i == 1 { Some(w.as_str()) } else { None });
        match letters {
            Some(l) if !l.is_empty() && l.chars().all(|c| c.is_ascii_alphabetic()) => {
                for c in l.chars() {
                    match c {
                        'c' => a.create = true,
                        'x' => a.extract = true,
                        't' => a.list = true,
                        'f' => {
                            a.file = args.get(i).cloned();
                            i += 1;
                        }
                        'C' => {
                            a.dir = args.get(i).cloned();
                            i += 1;
                        }
                        'm' | 'v' | 'o' | 'p' => {}
                        other => return Err(format!("tar: unrecognized option '{other}'")),
                    }
                }
            }
            _ => a.paths.push(w.clone()),
        }
    }
    Ok(a)
}

/// Runs `tar ARGS`; returns the exit code.
pub fn run(s: &mut Session, args: &[String], stdin: &[u8], out: &mut Outcome) -> i32 {
    let a = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            out.stderr.extend(format!("{e}\n").into_bytes());
            return 2;
        }
    };
    if a.file.as_deref().is_some_and(|f| f != "-") {
        out.stderr
            .extend_from_slice(b"tar: only '-' (stdin/stdout) is supported as the archive\n");
        return 2;
    }
    let dir = normalize(&s.cwd, a.dir.as_deref().unwrap_or("."));
    if a.create {
        match create(s, &dir, &a.paths) {
            Ok((bytes, errors)) => {
                out.stdout.extend(bytes);
                let bad = !errors.is_empty();
                for e in errors {
                    out.stderr
                        .extend(format!("tar: {e}: No such file or directory\n").into_bytes());
                }
                i32::from(bad)
            }
            Err(e) => {
                out.stderr.extend(format!("tar: {e}\n").into_bytes());
                2
            }
        }
    } else if a.extract || a.list {
        match read_archive(stdin) {
            Ok(entries) => {
                if a.list {
                    for (p, _) in &entries {
                        out.stdout.extend(format!("{p}\n").into_bytes());
                    }
                    return 0;
                }
                let Ok(mut copied) = s.ctx.copied.lock() else {
                    return 2;
                };
                for (p, data) in entries {
                    copied.insert(normalize(&dir, &p), data);
                }
                0
            }
            Err(e) => {
                out.stderr.extend(format!("tar: {e}\n").into_bytes());
                2
            }
        }
    } else {
        out.stderr
            .extend_from_slice(b"tar: must specify one of -c, -t, -x\n");
        2
    }
}

/// The archive of `paths` (relative to `dir`), and the paths that were not found.
fn create(s: &Session, dir: &str, paths: &[String]) -> std::io::Result<(Vec<u8>, Vec<String>)> {
    let view = files::view(&s.ctx);
    let mut b = tar::Builder::new(Vec::new());
    let mut missing = Vec::new();
    for p in paths {
        let full = normalize(dir, p);
        // Names are stored as given, without a leading `/` (as GNU tar's "Removing leading '/'").
        let name = p.trim_start_matches('/').trim_end_matches('/').to_string();
        if let Some(data) = view.get(&full) {
            append_file(&mut b, &name, data)?;
        } else if files::is_dir(&view, &full) {
            append_dir(&mut b, if name.is_empty() { "." } else { &name })?;
            let prefix = if full == "/" {
                "/".to_string()
            } else {
                format!("{full}/")
            };
            let mut dirs = std::collections::BTreeSet::new();
            for (k, data) in view.range(prefix.clone()..) {
                let Some(rel) = k.strip_prefix(&prefix) else {
                    break;
                };
                let entry = if name.is_empty() {
                    rel.to_string()
                } else {
                    format!("{name}/{rel}")
                };
                let mut parts: Vec<&str> = entry.split('/').collect();
                parts.pop();
                for n in 1..=parts.len() {
                    let d = parts[..n].join("/");
                    if d != name && dirs.insert(d.clone()) {
                        append_dir(&mut b, &d)?;
                    }
                }
                append_file(&mut b, &entry, data)?;
            }
        } else {
            missing.push(p.clone());
        }
    }
    Ok((b.into_inner()?, missing))
}

fn append_file(b: &mut tar::Builder<Vec<u8>>, name: &str, data: &[u8]) -> std::io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    b.append_data(&mut h, name, data)
}

fn append_dir(b: &mut tar::Builder<Vec<u8>>, name: &str) -> std::io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_size(0);
    h.set_mode(0o755);
    h.set_entry_type(tar::EntryType::Directory);
    b.append_data(&mut h, format!("{name}/"), std::io::empty())
}

/// The regular files of an archive: (path, contents).
fn read_archive(bytes: &[u8]) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut ar = tar::Archive::new(bytes);
    let mut out = Vec::new();
    for e in ar.entries()? {
        let mut e = e?;
        if e.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let path = e.path()?.to_string_lossy().into_owned();
        let mut data = Vec::new();
        e.read_to_end(&mut data)?;
        out.push((path, data));
    }
    Ok(out)
}

#[cfg(test)]
mod parse_tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_kubectl_cp_argvs() {
        let a = parse(&v(&["-xmf", "-", "-C", "/tmp"])).unwrap();
        assert!(a.extract && a.file.as_deref() == Some("-") && a.dir.as_deref() == Some("/tmp"));
        let a = parse(&v(&[
            "--no-same-permissions",
            "--no-same-owner",
            "-xmf",
            "-",
            "-C",
            "/x",
        ]))
        .unwrap();
        assert!(a.extract && a.dir.as_deref() == Some("/x"));
        let a = parse(&v(&["cf", "-", "/etc/hostname"])).unwrap();
        assert!(a.create && a.paths == v(&["/etc/hostname"]));
        assert!(parse(&v(&["-q"])).is_err());
    }
}
