//! End-to-end: `miniplane apiserver` + `miniplane controller-manager` as separate processes,
//! driven by the real kubectl. The tests play kubelet (marking pods Running/Ready through
//! `/status`) since no kubelet simulator exists yet.
//!
//! What is checked: a Deployment's ReplicaSet and pods, events, availability and
//! `rollout status`; rolling updates that never break maxSurge/maxUnavailable at any
//! observed state; history and undo; scaling and pod replacement; the three cascading
//! deletes; namespace deletion, and the `default` ServiceAccount of each namespace; a SIGKILL
//! mid-rollout; and leader election fail-over.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::controller_manager::ControllerManager;
use support::kubelet::{PlayKubelet, is_ready};
use support::watch_stream::WatchStream;
use support::{DEADLINE, Server, deployment_yaml, eventually, namespace_yaml};

fn items(s: &Server, path: &str) -> Vec<Value> {
    let list = s.get(path).json();
    list["items"].as_array().cloned().unwrap_or_default()
}

fn pods(s: &Server, ns: &str, app: &str) -> Vec<Value> {
    items(
        s,
        &format!("/api/v1/namespaces/{ns}/pods?labelSelector=app%3D{app}"),
    )
}

fn replica_sets(s: &Server, ns: &str, app: &str) -> Vec<Value> {
    items(
        s,
        &format!("/apis/apps/v1/namespaces/{ns}/replicasets?labelSelector=app%3D{app}"),
    )
}

fn name(obj: &Value) -> String {
    obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn uid(obj: &Value) -> String {
    obj["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn controller_uid(obj: &Value) -> Option<String> {
    obj["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["controller"] == true)
        .and_then(|r| r["uid"].as_str())
        .map(str::to_owned)
}

fn rollout_status(s: &Server, deploy: &str) {
    s.kubectl_ok(&[
        "rollout",
        "status",
        &format!("deploy/{deploy}"),
        "--timeout=60s",
    ]);
}

/// What the invariant watches saw: pods (name → ready) and ReplicaSets (name → replicas).
#[derive(Default)]
struct Observed {
    pods: BTreeMap<String, bool>,
    /// The initial list of pods has been seen (states before that are partial).
    listed: bool,
    replica_sets: BTreeMap<String, i64>,
    max_pods: usize,
    min_ready: Option<usize>,
    max_rs_replicas: i64,
    violations: Vec<String>,
}

/// Watches pods and ReplicaSets of `app` in `default` and records every state that breaks
/// `pods ≤ max_total` or `ready ≥ min_ready` (pods being deleted do not count).
fn watch_invariants(
    s: &Server,
    app: &str,
    max_total: usize,
    min_ready: usize,
) -> (Arc<Mutex<Observed>>, WatchStream, WatchStream) {
    let observed = Arc::new(Mutex::new(Observed::default()));
    let (o, label) = (observed.clone(), app.to_owned());
    let pod_watch = WatchStream::start(
        s.addr,
        "/api/v1/namespaces/default/pods",
        move |kind, pod| {
            let mut o = o.lock().unwrap();
            if kind == "LISTED" {
                o.listed = true;
            } else if pod["metadata"]["labels"]["app"] != label.as_str() {
                return;
            } else if kind == "DELETED" || !pod["metadata"]["deletionTimestamp"].is_null() {
                o.pods.remove(&name(pod));
            } else {
                o.pods.insert(name(pod), is_ready(pod));
            }
            if !o.listed {
                return;
            }
            let total = o.pods.len();
            let ready = o.pods.values().filter(|r| **r).count();
            o.max_pods = o.max_pods.max(total);
            o.min_ready = Some(o.min_ready.map_or(ready, |m| m.min(ready)));
            if total > max_total {
                o.violations.push(format!(
                    "{total} pods > {max_total} after {kind} {}",
                    name(pod)
                ));
            }
            if ready < min_ready {
                o.violations.push(format!(
                    "{ready} ready < {min_ready} after {kind} {}",
                    name(pod)
                ));
            }
        },
    );
    let (o, label) = (observed.clone(), app.to_owned());
    let rs_watch = WatchStream::start(
        s.addr,
        "/apis/apps/v1/namespaces/default/replicasets",
        move |kind, rs| {
            if kind == "LISTED" || rs["metadata"]["labels"]["app"] != label.as_str() {
                return;
            }
            let mut o = o.lock().unwrap();
            if kind == "DELETED" {
                o.replica_sets.remove(&name(rs));
            } else {
                o.replica_sets
                    .insert(name(rs), rs["spec"]["replicas"].as_i64().unwrap_or(0));
            }
            let sum: i64 = o.replica_sets.values().sum();
            o.max_rs_replicas = o.max_rs_replicas.max(sum);
            if sum > max_total as i64 {
                o.violations.push(format!(
                    "ReplicaSets want {sum} > {max_total} pods after {kind} {}",
                    name(rs)
                ));
            }
        },
    );
    (observed, pod_watch, rs_watch)
}

#[test]
fn deployment_rollout_history_and_undo_with_kubectl() {
    let s = Server::start();
    let _cm = ControllerManager::start(&s, "cm", &[]);
    s.apply_ok(&deployment_yaml("web", 3, "nginx:1.24"), &[]);

    // A ReplicaSet named <deployment>-<pod-template-hash>, controlled by the Deployment, and
    // three pods controlled by the ReplicaSet.
    let (rs, pod_list) = eventually("a ReplicaSet and 3 pods", DEADLINE, || {
        let rs = replica_sets(&s, "default", "web").first()?.clone();
        let pod_list = pods(&s, "default", "web");
        (pod_list.len() == 3).then_some((rs, pod_list))
    });
    let hash = rs["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .expect("pod-template-hash label");
    assert_eq!(name(&rs), format!("web-{hash}"));
    let deploy = s
        .get("/apis/apps/v1/namespaces/default/deployments/web")
        .json();
    assert_eq!(controller_uid(&rs), Some(uid(&deploy)));
    for pod in &pod_list {
        assert_eq!(
            controller_uid(pod),
            Some(uid(&rs)),
            "pod {} owned by the RS",
            name(pod)
        );
        assert_eq!(pod["metadata"]["labels"]["pod-template-hash"], hash);
    }
    eventually(
        "ScalingReplicaSet in kubectl describe deploy",
        DEADLINE,
        || {
            s.kubectl_ok(&["describe", "deploy", "web"])
                .contains("ScalingReplicaSet")
                .then_some(())
        },
    );
    eventually("SuccessfulCreate in kubectl describe rs", DEADLINE, || {
        let described = s.kubectl_ok(&["describe", "rs", &name(&rs)]);
        // The message names the pod the API server generated a name for.
        (described.contains("SuccessfulCreate")
            && described.contains(&format!("Created pod: {}-", name(&rs))))
        .then_some(())
    });

    // Play kubelet: the pods become Ready, the Deployment Available.
    let _kubelet = PlayKubelet::start(s.addr, "default");
    rollout_status(&s, "web");
    let deploy = s
        .get("/apis/apps/v1/namespaces/default/deployments/web")
        .json();
    let available = deploy["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Available").cloned())
        .expect("an Available condition");
    assert_eq!(available["status"], "True", "{deploy}");

    // A rolling update: 3 replicas, maxSurge 1, maxUnavailable 0 ⇒ at every observed state at
    // most 4 pods and at least 3 ready.
    let (observed, _pw, _rw) = watch_invariants(&s, "web", 4, 3);
    s.kubectl_ok(&[
        "annotate",
        "deploy",
        "web",
        "kubernetes.io/change-cause=upgrade to 1.25",
    ]);
    s.kubectl_ok(&["set", "image", "deploy/web", "web=nginx:1.25"]);
    rollout_status(&s, "web");
    eventually("only the 3 new pods left", DEADLINE, || {
        let o = observed.lock().unwrap();
        (o.pods.len() == 3
            && o.pods.values().all(|r| *r)
            && !o
                .pods
                .keys()
                .any(|p| p.starts_with(&format!("web-{hash}-"))))
        .then_some(())
    });
    {
        let o = observed.lock().unwrap();
        assert!(
            o.violations.is_empty(),
            "rollout broke maxSurge/maxUnavailable: {:?}",
            o.violations
        );
        assert_eq!(o.max_pods, 4, "the surge pod was used");
    }
    let history = s.kubectl_ok(&["rollout", "history", "deploy/web"]);
    assert!(history.contains("upgrade to 1.25"), "{history}");
    let revisions: Vec<&str> = history
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.parse::<u32>().is_ok())
        .collect();
    assert_eq!(revisions, ["1", "2"], "{history}");

    // Undo: the first ReplicaSet scales back up and becomes revision 3.
    s.kubectl_ok(&["rollout", "undo", "deploy/web"]);
    rollout_status(&s, "web");
    let old = eventually(
        "the first ReplicaSet back at 3 replicas, revision 3",
        DEADLINE,
        || {
            let rs = s
                .get(&format!(
                    "/apis/apps/v1/namespaces/default/replicasets/{}",
                    name(&rs)
                ))
                .json();
            (rs["spec"]["replicas"] == 3
                && rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3")
                .then_some(rs)
        },
    );
    assert_eq!(old["status"]["readyReplicas"], 3, "{old}");
    let o = observed.lock().unwrap();
    assert!(
        o.violations.is_empty(),
        "undo broke maxSurge/maxUnavailable: {:?}",
        o.violations
    );
}

#[test]
fn scaling_pod_replacement_and_cascading_deletes() {
    let s = Server::start();
    let _cm = ControllerManager::start(&s, "cm", &[]);
    s.apply_ok(&deployment_yaml("web", 2, "nginx:1.25"), &[]);
    eventually("2 pods", DEADLINE, || {
        (pods(&s, "default", "web").len() == 2).then_some(())
    });
    s.kubectl_ok(&["scale", "deploy", "web", "--replicas=4"]);
    eventually("4 pods", DEADLINE, || {
        (pods(&s, "default", "web").len() == 4).then_some(())
    });
    s.kubectl_ok(&["scale", "deploy", "web", "--replicas=1"]);
    let survivor = eventually("1 pod", DEADLINE, || {
        let p = pods(&s, "default", "web");
        (p.len() == 1).then(|| name(&p[0]))
    });
    s.kubectl_ok(&["delete", "pod", &survivor]);
    eventually("a replacement pod", DEADLINE, || {
        let p = pods(&s, "default", "web");
        (p.len() == 1 && name(&p[0]) != survivor).then_some(())
    });

    // Foreground: kubectl waits for the Deployment to go; by then its dependents are gone.
    s.kubectl_ok(&[
        "delete",
        "deploy",
        "web",
        "--cascade=foreground",
        "--timeout=60s",
    ]);
    assert!(
        replica_sets(&s, "default", "web").is_empty(),
        "ReplicaSets deleted before the Deployment"
    );
    assert!(
        pods(&s, "default", "web").is_empty(),
        "pods deleted before the Deployment"
    );

    // Orphan: the ReplicaSet and pods stay, without an ownerReference to the Deployment.
    s.apply_ok(&deployment_yaml("keep", 2, "nginx:1.25"), &[]);
    eventually("2 kept pods", DEADLINE, || {
        (pods(&s, "default", "keep").len() == 2).then_some(())
    });
    let deploy_uid = uid(&s
        .get("/apis/apps/v1/namespaces/default/deployments/keep")
        .json());
    s.kubectl_ok(&[
        "delete",
        "deploy",
        "keep",
        "--cascade=orphan",
        "--timeout=60s",
    ]);
    let rss = replica_sets(&s, "default", "keep");
    assert_eq!(rss.len(), 1, "the ReplicaSet stays");
    assert!(
        !rss[0]["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| r["uid"] == deploy_uid.as_str()),
        "no ownerReference to the deleted Deployment: {}",
        rss[0]["metadata"]
    );
    let kept = pods(&s, "default", "keep");
    assert_eq!(kept.len(), 2, "the pods stay");
    assert!(kept.iter().all(|p| controller_uid(p) == Some(uid(&rss[0]))));

    // Background (kubectl's default): the Deployment goes at once, the GC removes the rest.
    s.apply_ok(&deployment_yaml("bg", 2, "nginx:1.25"), &[]);
    eventually("2 bg pods", DEADLINE, || {
        (pods(&s, "default", "bg").len() == 2).then_some(())
    });
    s.kubectl_ok(&["delete", "deploy", "bg"]);
    eventually("bg ReplicaSet and pods collected", DEADLINE, || {
        (replica_sets(&s, "default", "bg").is_empty() && pods(&s, "default", "bg").is_empty())
            .then_some(())
    });
}

#[test]
fn deleting_a_namespace_removes_its_content_then_the_namespace() {
    let s = Server::start();
    let mut cm = ControllerManager::start(&s, "cm", &[]);
    let health =
        support::http::request(cm.addr, "GET", "/healthz", None, b"").expect("GET /healthz");
    assert_eq!((health.status, health.text().as_str()), (200, "ok"));
    s.apply_ok(&namespace_yaml("dev"), &[]);
    s.apply_ok(&deployment_yaml("web", 2, "nginx:1.25"), &["-n", "dev"]);
    s.apply_ok(&support::configmap_yaml("settings", "a: b"), &["-n", "dev"]);
    eventually("2 pods in dev", DEADLINE, || {
        (pods(&s, "dev", "web").len() == 2).then_some(())
    });
    // The ServiceAccount controller: `default` in every active namespace, made again when
    // deleted.
    let default_sa = |ns: &str| {
        items(&s, &format!("/api/v1/namespaces/{ns}/serviceaccounts"))
            .iter()
            .any(|sa| name(sa) == "default")
    };
    eventually(
        "ServiceAccount default in dev and kube-system",
        DEADLINE,
        || (default_sa("dev") && default_sa("kube-system")).then_some(()),
    );
    let first = s.kubectl_ok(&[
        "get",
        "sa",
        "default",
        "-n",
        "dev",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    s.kubectl_ok(&["delete", "sa", "default", "-n", "dev"]);
    eventually("ServiceAccount default made again", DEADLINE, || {
        let again = s.kubectl(&[
            "get",
            "sa",
            "default",
            "-n",
            "dev",
            "-o",
            "jsonpath={.metadata.uid}",
        ]);
        (again.ok() && !again.stdout.is_empty() && again.stdout != first).then_some(())
    });
    s.kubectl_ok(&["delete", "ns", "dev", "--timeout=60s"]);
    let gone = s.kubectl(&["get", "ns", "dev"]);
    assert!(!gone.ok() && gone.stderr.contains("NotFound"), "{gone}");
    for path in [
        "/api/v1/namespaces/dev/pods",
        "/apis/apps/v1/namespaces/dev/replicasets",
        "/apis/apps/v1/namespaces/dev/deployments",
        "/api/v1/namespaces/dev/configmaps",
        "/api/v1/namespaces/dev/serviceaccounts",
    ] {
        assert!(items(&s, path).is_empty(), "{path} emptied");
    }
    assert!(
        cm.stop(),
        "the controller-manager exits on SIGTERM (queues drained, tasks joined)"
    );
}

#[test]
fn a_controller_manager_killed_mid_rollout_converges_after_restart() {
    let s = Server::start();
    let mut cm = ControllerManager::start(&s, "cm1", &[]);
    let _kubelet = PlayKubelet::start(s.addr, "default");
    s.apply_ok(&deployment_yaml("web", 6, "nginx:1.24"), &[]);
    rollout_status(&s, "web");
    // 6 replicas, 25%/25% ⇒ surge 2, unavailable 1: at most 8 pods, at least 5 ready.
    let (observed, _pw, _rw) = watch_invariants(&s, "web", 8, 5);
    s.kubectl_ok(&["set", "image", "deploy/web", "web=nginx:1.25"]);
    eventually("the rollout under way", DEADLINE, || {
        (replica_sets(&s, "default", "web").len() == 2).then_some(())
    });
    cm.kill();
    let _cm2 = ControllerManager::start(&s, "cm2", &[]);
    rollout_status(&s, "web");
    let deploy = s
        .get("/apis/apps/v1/namespaces/default/deployments/web")
        .json();
    eventually("6 new pods, no orphans", DEADLINE, || {
        let rss = replica_sets(&s, "default", "web");
        let rs_uids: Vec<String> = rss.iter().map(uid).collect();
        let p = pods(&s, "default", "web");
        let all_owned = p
            .iter()
            .all(|pod| controller_uid(pod).is_some_and(|u| rs_uids.contains(&u)))
            && rss
                .iter()
                .all(|rs| controller_uid(rs) == Some(uid(&deploy)));
        let new_rs = rss
            .iter()
            .find(|rs| rs["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25")?;
        let on_new = p
            .iter()
            .filter(|pod| controller_uid(pod) == Some(uid(new_rs)))
            .count();
        (all_owned && p.len() == 6 && on_new == 6).then_some(())
    });
    let o = observed.lock().unwrap();
    assert!(
        o.violations.is_empty(),
        "limits broken across the restart: {:?}",
        o.violations
    );
    assert!(o.max_pods <= 8 && o.max_rs_replicas <= 8);
}

fn lease(s: &Server) -> Value {
    s.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager")
        .json()
}

fn holder(s: &Server) -> Option<String> {
    lease(s)["spec"]["holderIdentity"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
}

#[test]
fn leader_election_only_the_leader_acts_and_the_other_takes_over() {
    const ELECT: [&str; 7] = [
        "--leader-elect",
        "--leader-elect-lease-duration",
        "2s",
        "--leader-elect-renew-deadline",
        "1.5s",
        "--leader-elect-retry-period",
        "0.5s",
    ];
    let s = Server::start();
    let mut first = ControllerManager::start(&s, "cm1", &ELECT);
    let leader_id = eventually("a lease holder", DEADLINE, || holder(&s));
    let mut second = ControllerManager::start(&s, "cm2", &ELECT);
    s.apply_ok(&deployment_yaml("web", 2, "nginx:1.25"), &[]);
    eventually("2 pods", DEADLINE, || {
        (pods(&s, "default", "web").len() == 2).then_some(())
    });
    let master = "leader_election_master_status{name=\"kube-controller-manager\"}";
    let syncs = "miniplane_controller_syncs_total{controller=\"deployment\"}";
    assert_eq!(first.metric(master), 1.0);
    assert_eq!(second.metric(master), 0.0);
    // A sync is counted when it ends, a little after the pods it created appear.
    eventually("the leader counts its syncs", DEADLINE, || {
        (first.metric(syncs) > 0.0).then_some(())
    });
    assert_eq!(
        second.metric(syncs),
        0.0,
        "the non-leader does not sync: {}",
        second.metrics()
    );
    assert_eq!(holder(&s), Some(leader_id.clone()));

    // Kill the leader: the other takes the lease once it expires, and reconciles.
    first.kill();
    let killed = Instant::now();
    eventually("a new lease holder", DEADLINE, || {
        holder(&s).filter(|h| *h != leader_id)
    });
    let took = killed.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "took over in {took:?} (lease 2 s, retry 0.5 s)"
    );
    s.kubectl_ok(&["scale", "deploy", "web", "--replicas=3"]);
    eventually("3 pods from the new leader", DEADLINE, || {
        (pods(&s, "default", "web").len() == 3).then_some(())
    });
    assert_eq!(second.metric(master), 1.0);
    eventually("the new leader counts its syncs", DEADLINE, || {
        (second.metric(syncs) > 0.0).then_some(())
    });

    // Someone else takes the lease: the leader stops and exits non-zero, as
    // kube-controller-manager does.
    // (The leader renews every 0.5 s: retry the optimistic-concurrency write on conflict.)
    eventually("the lease stolen", DEADLINE, || {
        let mut stolen = lease(&s);
        stolen["spec"]["holderIdentity"] = Value::from("intruder");
        stolen["spec"]["leaseDurationSeconds"] = Value::from(3600);
        let put = s.send_json(
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager",
            &stolen,
        );
        assert!(matches!(put.status, 200 | 409), "{}", put.text());
        (put.status == 200).then_some(())
    });
    let status = second
        .wait_exit(DEADLINE)
        .expect("the deposed leader exits");
    assert!(!status.success(), "non-zero exit: {status:?}");
    assert!(
        second.log().contains("leaderelection lost"),
        "{}",
        second.log()
    );
}

/// The garbage collector covers every built-in kind, not only those its controllers create: a
/// Service owned by a ConfigMap, and a Secret owned by that Service, go with the ConfigMap.
#[test]
fn dependents_of_any_built_in_kind_are_collected() {
    let s = Server::start();
    let _cm = ControllerManager::start(&s, "cm", &[]);
    s.apply_ok(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: owner\ndata:\n  a: b\n",
        &[],
    );
    let owner = s.get("/api/v1/namespaces/default/configmaps/owner").json();
    let service = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: owned\n  ownerReferences:\n  - apiVersion: v1\n    kind: ConfigMap\n    name: owner\n    uid: {}\nspec:\n  ports:\n  - port: 80\n",
        uid(&owner)
    );
    s.apply_ok(&service, &[]);
    let svc = s.get("/api/v1/namespaces/default/services/owned").json();
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: owned-by-service\n  ownerReferences:\n  - apiVersion: v1\n    kind: Service\n    name: owned\n    uid: {}\nstringData:\n  k: v\n",
        uid(&svc)
    );
    s.apply_ok(&secret, &[]);
    // Nothing is collected while the owners exist.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        s.get("/api/v1/namespaces/default/secrets/owned-by-service")
            .status,
        200
    );
    s.kubectl_ok(&["delete", "configmap", "owner"]);
    eventually("the Service and its Secret collected", DEADLINE, || {
        let gone = |path: &str| s.get(path).status == 404;
        (gone("/api/v1/namespaces/default/services/owned")
            && gone("/api/v1/namespaces/default/secrets/owned-by-service"))
        .then_some(())
    });
}
