//! End to end: a Service's endpoints, as the EndpointSlice and Endpoints controllers keep
//! them, through `miniplane up` and the real kubectl. A 3-replica Deployment exposed with
//! `kubectl expose` gets one EndpointSlice with its 3 ready pods (`kubectl get
//! endpointslices`), an Endpoints object with 3 addresses (`kubectl get endpoints`) and the
//! addresses in `kubectl describe service`; scaled to 0 the addresses go, and deleting the
//! Service takes its slice (garbage collector) and Endpoints (Endpoints controller) along.

use crate::support;

use serde_json::Value;
use support::up::UpEnv;
use support::{DEADLINE, deployment_yaml, eventually};

const SLICE_SELECTOR: &str = "kubernetes.io/service-name=web";

/// The IPs of the Running pods of `app=web`, sorted.
fn pod_ips(env: &UpEnv, count: usize) -> Vec<String> {
    let mut ips: Vec<String> = env
        .running_pods("web", count)
        .iter()
        .filter_map(|p| p["status"]["podIP"].as_str().map(str::to_owned))
        .collect();
    ips.sort();
    ips
}

/// The slices of Service `web`, as JSON.
fn slices(env: &UpEnv) -> Vec<Value> {
    let list = env.get_json(&["endpointslices", "-l", SLICE_SELECTOR]);
    list["items"].as_array().cloned().unwrap_or_default()
}

/// The addresses of the ready endpoints of `slices`, sorted.
fn ready_addresses(slices: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = slices
        .iter()
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .filter(|e| e["conditions"]["ready"] == true)
        .flat_map(|e| e["addresses"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    out.sort();
    out
}

#[test]
fn an_exposed_deployment_gets_endpoint_slices_and_endpoints() {
    let env = UpEnv::new();
    let _up = env.up(&["--port", "0", "--nodes", "2"]);
    env.apply(&deployment_yaml("web", 3, "nginx"));
    let ips = pod_ips(&env, 3);
    assert_eq!(
        env.kubectl_ok(&["expose", "deployment", "web", "--port", "80"]),
        "service/web exposed\n"
    );

    // One slice, owned by the Service, listing the 3 pods as ready endpoints.
    let found = eventually("3 ready endpoints in web's slices", DEADLINE, || {
        let found = slices(&env);
        (ready_addresses(&found) == ips).then_some(found)
    });
    assert_eq!(found.len(), 1, "{found:#?}");
    let slice = &found[0];
    let name = slice["metadata"]["name"].as_str().unwrap_or_default();
    assert!(
        name.starts_with("web-") && name.len() == "web-".len() + 5,
        "{name}"
    );
    assert_eq!(slice["addressType"], "IPv4");
    assert_eq!(
        slice["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );
    let owner = &slice["metadata"]["ownerReferences"][0];
    assert_eq!(
        (&owner["kind"], &owner["name"]),
        (&"Service".into(), &"web".into())
    );
    assert_eq!(owner["controller"], true);
    assert_eq!(slice["ports"][0]["port"], 80);
    assert!(
        slice["metadata"]["annotations"]["endpoints.kubernetes.io/last-change-trigger-time"]
            .is_string(),
        "{slice:#}"
    );
    for endpoint in slice["endpoints"].as_array().into_iter().flatten() {
        assert_eq!(endpoint["targetRef"]["kind"], "Pod");
        assert!(endpoint["nodeName"].is_string(), "{endpoint}");
        assert_eq!(endpoint["conditions"]["serving"], true);
        assert_eq!(endpoint["conditions"]["terminating"], false);
    }

    // The server's table, as kubectl prints it.
    let table = env.kubectl_ok(&["get", "endpointslices", "-l", SLICE_SELECTOR]);
    let lines: Vec<&str> = table.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"],
        "{table}"
    );
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!((row[0], row[1], row[2]), (name, "IPv4", "80"), "{table}");
    let mut listed: Vec<&str> = row[3].split(',').collect();
    listed.sort();
    assert_eq!(listed, ips, "{table}");

    // core/v1 Endpoints with the same 3 addresses.
    let endpoints = eventually("Endpoints web with 3 addresses", DEADLINE, || {
        let out = env.kubectl_ok(&["get", "endpoints", "web", "--no-headers"]);
        let cell = out.split_whitespace().nth(1)?.to_owned();
        (cell.split(',').count() == 3).then_some(cell)
    });
    // As kube-apiserver 1.33 does, the server warns that core/v1 Endpoints is deprecated.
    let run = env.kubectl(&["get", "endpoints", "web"]);
    assert!(
        run.stderr.contains(
            "Warning: v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"
        ),
        "{run}"
    );
    let mut listed: Vec<String> = endpoints
        .split(',')
        .map(|e| e.trim_end_matches(":80").to_owned())
        .collect();
    listed.sort();
    assert_eq!(listed, ips, "{endpoints}");

    // kubectl describe reads the slices for its Endpoints line.
    let described = env.kubectl_ok(&["describe", "service", "web"]);
    let line = described
        .lines()
        .find(|l| l.starts_with("Endpoints:"))
        .unwrap_or_else(|| panic!("no Endpoints line:\n{described}"));
    for ip in &ips {
        assert!(line.contains(&format!("{ip}:80")), "{described}");
    }

    // Scaled to zero: the addresses go, a placeholder slice stays.
    env.kubectl_ok(&["scale", "deployment", "web", "--replicas=0"]);
    eventually("no endpoints left", DEADLINE, || {
        let found = slices(&env);
        let empty = found.len() == 1
            && found[0]["endpoints"]
                .as_array()
                .is_none_or(|e| e.is_empty());
        let out = env.kubectl_ok(&["get", "endpoints", "web", "--no-headers"]);
        (empty && out.split_whitespace().nth(1) == Some("<none>")).then_some(())
    });
    let table = env.kubectl_ok(&[
        "get",
        "endpointslices",
        "-l",
        SLICE_SELECTOR,
        "--no-headers",
    ]);
    let row: Vec<&str> = table.split_whitespace().collect();
    assert_eq!((row[2], row[3]), ("<unset>", "<unset>"), "{table}");
    let described = env.kubectl_ok(&["describe", "service", "web"]);
    assert!(
        !ips.iter().any(|ip| described.contains(ip.as_str())),
        "{described}"
    );

    // The Service deleted: its slice and its Endpoints follow.
    env.kubectl_ok(&["delete", "service", "web"]);
    eventually("web's slice and Endpoints gone", DEADLINE, || {
        let gone = env.kubectl(&["get", "endpoints", "web"]);
        (slices(&env).is_empty() && !gone.ok()).then_some(())
    });
}

#[test]
fn a_service_without_selector_keeps_the_endpoints_written_by_hand() {
    let env = UpEnv::new();
    let _up = env.up(&["--port", "0", "--nodes", "1"]);
    env.apply(
        "apiVersion: v1
kind: Service
metadata:
  name: external
spec:
  ports:
  - port: 80
---
apiVersion: v1
kind: Endpoints
metadata:
  name: external
subsets:
- addresses:
  - ip: 192.0.2.10
  ports:
  - port: 80
",
    );
    // The controllers have seen the Service (a labelled one gets its slices quickly): give
    // them time to (wrongly) act on `external`, then check it is as written.
    env.apply(&deployment_yaml("web", 1, "nginx"));
    env.kubectl_ok(&["expose", "deployment", "web", "--port", "80"]);
    eventually("web's slice", DEADLINE, || {
        (ready_addresses(&slices(&env)).len() == 1).then_some(())
    });
    let out = env.kubectl_ok(&["get", "endpoints", "external", "--no-headers"]);
    assert_eq!(
        out.split_whitespace().nth(1),
        Some("192.0.2.10:80"),
        "{out}"
    );
    let list = env.get_json(&[
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=external",
    ]);
    assert_eq!(list["items"].as_array().map(Vec::len), Some(0), "{list:#}");
}

/// EndpointSlice validation (`pkg/apis/discovery/validation/validation.go`): a 422 worded as
/// kube-apiserver words it, from raw HTTP and from kubectl.
#[test]
fn endpoint_slice_validation_is_kubernetes() {
    let s = support::Server::start();
    const SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";
    let slice = |address_type: &str, address: &str| {
        serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "bad"},
            "addressType": address_type,
            "endpoints": [{"addresses": [address]}],
            "ports": [{"name": "http", "port": 80}],
        })
    };
    let resp = s.send_json("POST", SLICES, &slice("IPv4", "10.0.0.300"));
    let msg = resp.expect_invalid("EndpointSlice", "bad", "endpoints[0].addresses[0]");
    assert_eq!(
        msg,
        "EndpointSlice.discovery.k8s.io \"bad\" is invalid: endpoints[0].addresses[0]: Invalid value: \"10.0.0.300\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
    );
    assert_eq!(resp.json()["details"]["group"], "discovery.k8s.io");
    let msg = s
        .send_json("POST", SLICES, &slice("IP", "10.0.0.1"))
        .expect_status(422, "Invalid");
    assert_eq!(
        msg,
        "EndpointSlice.discovery.k8s.io \"bad\" is invalid: addressType: Unsupported value: \"IP\": supported values: \"FQDN\", \"IPv4\", \"IPv6\""
    );
    // A valid one is stored with its defaults; its addressType may not change.
    let created = s
        .send_json("POST", SLICES, &slice("IPv4", "10.0.0.1"))
        .expect_created();
    assert_eq!(created["ports"][0]["protocol"], "TCP");
    assert_eq!(created["metadata"]["generation"], 1);
    let mut changed = created.clone();
    changed["addressType"] = "IPv6".into();
    changed["endpoints"][0]["addresses"][0] = "fd00::1".into();
    let msg = s
        .send_json("PUT", &format!("{SLICES}/bad"), &changed)
        .expect_status(422, "Invalid");
    assert!(
        msg.contains("addressType: Invalid value: \"IPv6\": field is immutable"),
        "{msg}"
    );
    // kubectl shows the same message.
    let run = s.apply_yaml(
        "apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: loop
addressType: IPv4
endpoints:
- addresses: [127.0.0.1]
",
        &[],
    );
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr.contains(
            "The EndpointSlice \"loop\" is invalid: endpoints[0].addresses[0]: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)"
        ),
        "{run}"
    );
}

/// The `kubernetes` Service's endpoints name the API server (`--advertise-address`, as
/// kube-apiserver's endpoint reconciler writes them), and a loopback advertise address is
/// refused at start.
#[test]
fn the_kubernetes_service_has_the_api_servers_endpoints() {
    let s = support::Server::start_with(&["--advertise-address", "192.0.2.10"]);
    let url = s.url();
    let port: u16 = url.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap();
    let want = format!("192.0.2.10:{port}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let out = s.kubectl(&[
            "get",
            "endpoints",
            "kubernetes",
            "-o",
            "jsonpath={.subsets[0].addresses[0].ip}:{.subsets[0].ports[0].port}",
        ]);
        if out.ok() && out.stdout.trim() == want {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{out}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let slice = s.kubectl_json(&["get", "endpointslice", "kubernetes", "-o", "json"]);
    assert_eq!(slice["endpoints"][0]["addresses"][0], "192.0.2.10");
    assert_eq!(slice["ports"][0]["port"], port);
    let describe = s.kubectl_ok(&["describe", "service", "kubernetes"]);
    assert!(
        describe
            .lines()
            .any(|l| l.starts_with("Endpoints:") && l.trim_end().ends_with(&format!(" {want}"))),
        "{describe}"
    );

    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_miniplane"))
        .args([
            "apiserver",
            "--data-dir",
            "/nonexistent-dir-unused",
            "--listen",
            "127.0.0.1:0",
            "--advertise-address",
            "127.0.0.1",
        ])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--advertise-address 127.0.0.1: the kubernetes service's endpoints may not name a loopback or unspecified address"), "{stderr}");
}
