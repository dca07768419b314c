//! A quick smoke test of `miniplane apiserver` with the real kubectl: the binary starts on port
//! 0, announces its address, answers kubectl, and stops on SIGTERM. Skipped when kubectl is not
//! installed. (The full kubectl/kube-rs suite lives in the top-level `tests/`.)

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(data_dir: &std::path::Path) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_miniplane"))
        .args([
            "apiserver",
            "--listen",
            "127.0.0.1:0",
            "--no-fsync",
            "--data-dir",
        ])
        .arg(data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("miniplane starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("announcement line");
    let port = line
        .trim()
        .strip_prefix("miniplane apiserver listening on http://127.0.0.1:")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected announcement {line:?}"));
    Server { child, port }
}

fn kubectl_available() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn kubectl(dir: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("kubectl")
        .args(["--kubeconfig"])
        .arg(dir.join("kubeconfig"))
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .args(args)
        .output()
        .expect("kubectl runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn kubectl_talks_to_miniplane_apiserver() {
    if !kubectl_available() {
        eprintln!("kubectl not installed: skipping");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = start(&dir.path().join("data"));
    let mut kc = std::fs::File::create(dir.path().join("kubeconfig")).expect("kubeconfig");
    write!(
        kc,
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster: {{server: \"http://127.0.0.1:{}\"}}\n  name: mp\ncontexts:\n- context: {{cluster: mp, user: mp}}\n  name: mp\ncurrent-context: mp\nusers:\n- name: mp\n  user: {{}}\n",
        server.port
    )
    .expect("write kubeconfig");
    let (ok, out) = kubectl(dir.path(), &["version"]);
    assert!(ok && out.contains("Server Version: v1.33"), "{out}");
    let (ok, out) = kubectl(dir.path(), &["api-resources"]);
    assert!(
        ok && out.contains("deployments") && out.contains("deploy"),
        "{out}"
    );
    let (ok, out) = kubectl(dir.path(), &["get", "namespaces"]);
    assert!(ok && out.contains("kube-system"), "{out}");
    std::fs::write(
        dir.path().join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: smoke}\ndata: {a: b}\n",
    )
    .expect("manifest");
    let manifest = dir.path().join("cm.yaml");
    let manifest = manifest.to_str().expect("utf-8 path");
    let (ok, out) = kubectl(dir.path(), &["apply", "--validate=false", "-f", manifest]);
    assert!(ok && out.contains("configmap/smoke created"), "{out}");
    let (ok, out) = kubectl(
        dir.path(),
        &["get", "configmap", "smoke", "-o", "jsonpath={.data.a}"],
    );
    assert!(ok && out == "b", "{out}");
    let (ok, out) = kubectl(dir.path(), &["get", "cm", "missing"]);
    assert!(
        !ok && out.contains("configmaps \"missing\" not found"),
        "{out}"
    );
    let (ok, out) = kubectl(dir.path(), &["delete", "-f", manifest]);
    assert!(ok && out.contains("deleted"), "{out}");
    // SIGTERM: a graceful stop.
    let started = Instant::now();
    let _ = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status();
    loop {
        if let Ok(Some(status)) = server.child.try_wait() {
            assert!(status.success(), "exit status {status}");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
