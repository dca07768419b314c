//! `miniplane snapshot save|status|restore` and `up --restore` against a running `up`: a
//! snapshot saved while the cluster runs, its status, its YAML form; a cluster started again
//! from it has every object the snapshot had (and none written after it), its pods Running on
//! the nodes they were on with the same UIDs, its revision far past the snapshot's with the
//! history before it compacted (410 for a resourceVersion a client saw after the snapshot);
//! and a bad file or a data dir that already holds a store refused with nothing written. On
//! an etcd cluster (`MINIPLANE_TEST_STORE=etcd`) the snapshot is saved the same way and the
//! restore is refused: etcd's store is restored with etcd's tools.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::deployment_yaml;
use support::up::UpEnv;

/// Runs `miniplane <args>` in `env` to its end; returns (success, stdout, stderr).
fn miniplane(env: &UpEnv, args: &[&str]) -> (bool, String, String) {
    let out = env.miniplane(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_cluster_saved_while_it_runs_comes_back_from_its_snapshot() {
    let env = UpEnv::new();
    let file = env.dir().join("backup.snap");
    let file_arg = file.to_str().unwrap().to_owned();
    let kubeconfig = env.kubeconfig();
    let kubeconfig = kubeconfig.to_str().unwrap();
    let mut up = env.up(&["--port", "0", "--nodes", "2"]);
    env.apply(&deployment_yaml("web", 2, "nginx:1.27"));
    env.kubectl_ok(&["create", "configmap", "kept", "--from-literal=k=v"]);
    let before = env.running_pods("web", 2);

    let (ok, saved, err) = miniplane(
        &env,
        &["snapshot", "save", &file_arg, "--kubeconfig", kubeconfig],
    );
    assert!(ok, "{err}");
    let revision: u64 = saved
        .split(" at revision ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("{saved}"));
    let yaml_file = env.dir().join("backup.yaml");
    let (ok, _, err) = miniplane(
        &env,
        &[
            "snapshot",
            "save",
            yaml_file.to_str().unwrap(),
            "-o",
            "yaml",
            "--kubeconfig",
            kubeconfig,
        ],
    );
    assert!(ok, "{err}");
    let yaml = std::fs::read_to_string(&yaml_file).unwrap();
    assert!(
        yaml.starts_with("apiVersion: v1\nitems:\n"),
        "{}",
        &yaml[..200.min(yaml.len())]
    );
    assert!(yaml.contains("  kind: Deployment\n") && yaml.contains("    name: kept\n"));
    assert!(!yaml.contains("managedFields"));

    let (ok, status, err) = miniplane(&env, &["snapshot", "status", &file_arg]);
    assert!(ok, "{err}");
    assert!(
        status.starts_with(&format!("revision {revision}, ")),
        "{status}"
    );
    assert!(
        status.contains("checksum ok") && status.contains("\n  pods: 2\n"),
        "{status}"
    );

    if support::store::etcd_servers().is_some() {
        // On an etcd cluster the snapshot is read through the API server the same way, but
        // the store is etcd's to restore (etcdutl), not miniplane's.
        assert!(up.terminate().success());
        let out = env.up_to_end(&["--port", "0", "--nodes", "1", "--restore", &file_arg]);
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("etcdutl snapshot restore"),
            "{out:?}"
        );
        return;
    }

    // Written after the snapshot: not in it.
    env.kubectl_ok(&["create", "configmap", "later", "--from-literal=k=v"]);
    let later: u64 = env.get_json(&["configmap", "later"])["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(up.terminate().success(), "{}", up.stderr());

    // A bad file and a data dir that holds a store are refused, with nothing written.
    let bad = env.dir().join("bad.snap");
    let data = std::fs::read(&file).unwrap();
    std::fs::write(&bad, &data[..data.len() / 2]).unwrap();
    let out = env.up_to_end(&["--port", "0", "--fresh", "--restore", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("restore: ") && stderr.contains("not a whole miniplane snapshot"),
        "{stderr}"
    );
    assert!(!env.data_dir().join("store").exists(), "nothing restored");
    let (ok, _, err) = miniplane(&env, &["snapshot", "status", bad.to_str().unwrap()]);
    assert!(!ok && err.contains("checksum does not match"), "{err}");

    let mut up = env.up(&["--port", "0", "--nodes", "2", "--restore", &file_arg]);
    assert_eq!(env.get_json(&["configmap", "kept"])["data"]["k"], "v");
    let run = env.kubectl(&["get", "configmap", "later"]);
    assert!(!run.ok() && run.stderr.contains("NotFound"), "{run}");
    let after = env.running_pods("web", 2);
    for pod in &before {
        let same = after
            .iter()
            .find(|p| p["metadata"]["uid"] == pod["metadata"]["uid"])
            .unwrap_or_else(|| panic!("pod {} is gone", pod["metadata"]["name"]));
        assert_eq!(same["spec"]["nodeName"], pod["spec"]["nodeName"]);
    }
    // A client that saw a revision after the snapshot lists again: 410 Expired.
    let list = env.kubectl(&[
        "get",
        "--raw",
        &format!("/api/v1/configmaps?resourceVersion={later}&resourceVersionMatch=Exact"),
    ]);
    assert!(!list.ok() && list.stderr.contains("(Expired)"), "{list}");
    env.kubectl_ok(&["create", "configmap", "new", "--from-literal=k=v"]);
    let new: u64 = env.get_json(&["configmap", "new"])["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(new > revision + 1_000_000_000, "{new}");

    // Restoring over a store that is there is refused.
    assert!(up.terminate().success());
    let out = env.up_to_end(&["--port", "0", "--restore", &file_arg]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("already holds a store (--fresh replaces it)"),
        "{out:?}"
    );
}
