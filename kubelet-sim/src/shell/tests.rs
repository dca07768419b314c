//! Tests of the simulated container shell.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::*;

fn pod(image: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web-0", "namespace": "shop", "uid": "u-1",
                     "labels": {"app": "web"}, "annotations": {"team": "blue"}},
        "spec": {
            "nodeName": "node-3", "serviceAccountName": "builder",
            "subdomain": "web",
            "hostAliases": [{"ip": "10.1.2.3", "hostnames": ["foo.local", "bar.local"]}],
            "containers": [{
                "name": "app", "image": image,
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
                "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"},
                            {"secretRef": {"name": "creds"}}],
                "env": [
                    {"name": "GREETING", "value": "hello"},
                    {"name": "MSG", "value": "$(GREETING) world $(NOPE) $$(GREETING)"},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                    {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                    {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                    {"name": "TEAM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['team']"}}},
                    {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {"name": "SA", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "POD_IPS", "valueFrom": {"fieldRef": {"fieldPath": "status.podIPs"}}},
                    {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
                    {"name": "CPU_M", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}},
                    {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                    {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
                    {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "level"}}},
                    {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
                    {"name": "OPT", "valueFrom": {"configMapKeyRef": {"name": "missing", "key": "k", "optional": true}}}
                ],
                "volumeMounts": [
                    {"name": "cfg", "mountPath": "/etc/cfg"},
                    {"name": "one", "mountPath": "/etc/app.conf", "subPath": "app.conf"},
                    {"name": "sec", "mountPath": "/etc/creds"},
                    {"name": "info", "mountPath": "/etc/podinfo"},
                    {"name": "proj", "mountPath": "/projected"}
                ]
            }],
            "volumes": [
                {"name": "cfg", "configMap": {"name": "cfg"}},
                {"name": "one", "configMap": {"name": "cfg", "items": [{"key": "level", "path": "app.conf"}]}},
                {"name": "sec", "secret": {"secretName": "creds", "items": [{"key": "password", "path": "pw"}]}},
                {"name": "info", "downwardAPI": {"items": [
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                    {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
                {"name": "proj", "projected": {"sources": [
                    {"configMap": {"name": "cfg", "items": [{"key": "level", "path": "lvl"}]}},
                    {"serviceAccountToken": {"path": "tok"}}]}}
            ]
        },
        "status": {"podIP": "10.244.0.7", "podIPs": [{"ip": "10.244.0.7"}], "hostIP": "172.18.0.3"}
    }))
    .unwrap()
}

fn ctx(image: &str) -> ContainerContext {
    let mut c = ContainerContext::new(pod(image), "app");
    c.config_maps.insert(
        "cfg".into(),
        BTreeMap::from([
            ("level".into(), "debug".into()),
            ("mode".into(), "fast".into()),
        ]),
    );
    c.secrets.insert(
        "creds".into(),
        BTreeMap::from([("password".into(), "s3cret".into())]),
    );
    c.service_account_token = Some("eyJtoken".into());
    c.ca_crt = "-----BEGIN CERTIFICATE-----\n".into();
    c.kubernetes_service_ip = Some("10.96.0.1".into());
    c
}

fn argv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

fn run(s: &mut Session, a: &[&str]) -> (String, String, i32) {
    let o = s.run(&argv(a), b"");
    (
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
        o.exit_code,
    )
}

fn env_map(s: &mut Session) -> BTreeMap<String, String> {
    let (out, _, code) = run(s, &["env"]);
    assert_eq!(code, 0);
    out.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn env_resolves_values_downward_api_and_refs() {
    let mut s = Session::new(ctx("busybox"));
    let e = env_map(&mut s);
    assert_eq!(e["GREETING"], "hello");
    assert_eq!(e["MSG"], "hello world $(NOPE) $(GREETING)");
    assert_eq!(e["POD_NAME"], "web-0");
    assert_eq!(e["POD_NS"], "shop");
    assert_eq!(e["POD_UID"], "u-1");
    assert_eq!(e["APP"], "web");
    assert_eq!(e["TEAM"], "blue");
    assert_eq!(e["NODE"], "node-3");
    assert_eq!(e["SA"], "builder");
    assert_eq!(e["POD_IP"], "10.244.0.7");
    assert_eq!(e["POD_IPS"], "10.244.0.7");
    assert_eq!(e["HOST_IP"], "172.18.0.3");
    assert_eq!(e["CPU_M"], "500");
    assert_eq!(e["CPU"], "1");
    assert_eq!(e["MEM_MI"], "128");
    assert_eq!(e["LEVEL"], "debug");
    assert_eq!(e["PASS"], "s3cret");
    assert!(!e.contains_key("OPT"));
    assert_eq!(e["CFG_level"], "debug");
    assert_eq!(e["CFG_mode"], "fast");
    assert_eq!(e["password"], "s3cret");
    assert_eq!(e["HOSTNAME"], "web-0");
    assert_eq!(e["HOME"], "/root");
    assert_eq!(e["PATH"], env::PATH);
    assert_eq!(e["KUBERNETES_SERVICE_HOST"], "10.96.0.1");
    assert_eq!(e["KUBERNETES_SERVICE_PORT"], "443");
    assert_eq!(e["KUBERNETES_PORT_443_TCP_ADDR"], "10.96.0.1");
    let (out, _, code) = run(&mut s, &["printenv", "POD_NAME"]);
    assert_eq!((out.as_str(), code), ("web-0\n", 0));
}

#[test]
fn expansion_follows_kubernetes_rules() {
    let vars = BTreeMap::from([("A".to_string(), "x".to_string())]);
    assert_eq!(
        env::expand("$(A)-$(B)-$$(A)-$A-$(", &vars),
        "x-$(B)-$(A)-$A-$("
    );
}

#[test]
fn hostname_echo_and_sh_c() {
    let mut s = Session::new(ctx("busybox"));
    assert_eq!(run(&mut s, &["hostname"]).0, "web-0\n");
    assert_eq!(run(&mut s, &["sh", "-c", "echo $HOSTNAME"]).0, "web-0\n");
    assert_eq!(
        run(&mut s, &["sh", "-c", "echo \"${POD_NS}\" '$HOME'"]).0,
        "shop $HOME\n"
    );
    assert_eq!(
        run(
            &mut s,
            &["/bin/sh", "-c", "false && echo no || echo yes; echo $?"]
        )
        .0,
        "yes\n0\n"
    );
    assert_eq!(
        run(&mut s, &["sh", "-c", "true && echo a; false; echo $?"]).0,
        "a\n1\n"
    );
    let (_, _, code) = run(&mut s, &["sh", "-c", "echo a; exit 3; echo b"]);
    assert_eq!(code, 3);
    assert_eq!(
        run(&mut s, &["sh", "-c", "echo a; exit 3; echo b"]).0,
        "a\n"
    );
    assert_eq!(run(&mut s, &["pwd"]).0, "/\n");
    assert_eq!(run(&mut s, &["whoami"]).0, "root\n");
    assert_eq!(run(&mut s, &["true"]).2, 0);
    assert_eq!(run(&mut s, &["false"]).2, 1);
    assert_eq!(run(&mut s, &["echo", "-n", "x"]).0, "x");
}

#[test]
fn sleep_and_kill_report_to_the_caller() {
    let mut s = Session::new(ctx("busybox"));
    let o = s.run(&argv(&["sh", "-c", "sleep 2; sleep 0.5"]), b"");
    assert_eq!(o.slept, Duration::from_millis(2500));
    let o = s.run(&argv(&["kill", "1"]), b"");
    assert_eq!(o.kill_container, Some(143), "SIGTERM by default");
    assert_eq!(o.exit_code, 0);
    for signal in ["-9", "-KILL", "-SIGKILL"] {
        let o = s.run(&argv(&["kill", signal, "1"]), b"");
        assert_eq!(o.kill_container, Some(137), "{signal}");
    }
    let o = s.run(&argv(&["sh", "-c", "kill -s INT 1"]), b"");
    assert_eq!(o.kill_container, Some(130));
    let o = s.run(&argv(&["kill", "-CHLD", "1"]), b"");
    assert_eq!(o.kill_container, None, "a signal ignored by default");
    let o = s.run(&argv(&["kill", "42"]), b"");
    assert_eq!(o.exit_code, 1);
    assert_eq!(o.kill_container, None);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "sh: can't kill pid 42: No such process\n"
    );
    let o = s.run(&argv(&["kill", "-FOO", "1"]), b"");
    assert_eq!((o.exit_code, o.kill_container), (1, None));
    let mut bash = Session::new(ctx("ubuntu"));
    let o = bash.run(&argv(&["kill", "-FOO", "1"]), b"");
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "bash: kill: FOO: invalid signal specification\n"
    );
    // Typed into an interactive shell.
    let fed = bash.feed(b"kill -9 1\n", true);
    assert_eq!(fed.kill_container, Some(137));
}

#[test]
fn unknown_command_is_127_per_flavor() {
    let mut s = Session::new(ctx("busybox:1.36"));
    assert_eq!(
        run(&mut s, &["nope"]),
        (String::new(), "sh: nope: not found\n".into(), 127)
    );
    let mut s = Session::new(ctx("docker.io/library/debian:12"));
    assert_eq!(
        run(&mut s, &["nope"]),
        (String::new(), "bash: nope: command not found\n".into(), 127)
    );
    assert_eq!(Flavor::for_image("python:3.12-alpine"), Flavor::Busybox);
    assert_eq!(Flavor::for_image("ubuntu"), Flavor::Bash);
}

#[test]
fn managed_files() {
    let mut s = Session::new(ctx("busybox"));
    assert_eq!(run(&mut s, &["cat", "/etc/hostname"]).0, "web-0\n");
    let hosts = run(&mut s, &["cat", "/etc/hosts"]).0;
    assert!(hosts.starts_with("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"));
    assert!(hosts.contains("10.244.0.7\tweb-0.web.shop.svc.cluster.local\tweb-0\n"));
    assert!(hosts.contains("# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"));
    assert_eq!(
        run(&mut s, &["cat", "/etc/resolv.conf"]).0,
        "search shop.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"
    );
    let sa = files::SA_DIR;
    assert_eq!(run(&mut s, &["cat", &format!("{sa}/token")]).0, "eyJtoken");
    assert_eq!(run(&mut s, &["cat", &format!("{sa}/namespace")]).0, "shop");
}

#[test]
fn volume_files_at_mount_paths() {
    let mut s = Session::new(ctx("busybox"));
    assert_eq!(run(&mut s, &["cat", "/etc/cfg/level"]).0, "debug");
    assert_eq!(run(&mut s, &["cat", "/etc/cfg/mode"]).0, "fast");
    assert_eq!(run(&mut s, &["cat", "/etc/app.conf"]).0, "debug");
    assert_eq!(run(&mut s, &["cat", "/etc/creds/pw"]).0, "s3cret");
    assert_eq!(run(&mut s, &["cat", "/etc/creds/password"]).2, 1);
    assert_eq!(
        run(&mut s, &["cat", "/etc/podinfo/labels"]).0,
        "app=\"web\""
    );
    assert_eq!(run(&mut s, &["cat", "/etc/podinfo/name"]).0, "web-0");
    assert_eq!(run(&mut s, &["cat", "/projected/lvl"]).0, "debug");
    assert_eq!(run(&mut s, &["cat", "/projected/tok"]).0, "eyJtoken");
}

#[test]
fn cat_errors_as_the_shell_words_them() {
    let mut s = Session::new(ctx("busybox"));
    assert_eq!(
        run(&mut s, &["cat", "/nope"]),
        (
            String::new(),
            "cat: can't open '/nope': No such file or directory\n".into(),
            1
        )
    );
    let mut s = Session::new(ctx("ubuntu:24.04"));
    assert_eq!(
        run(&mut s, &["cat", "/nope"]),
        (
            String::new(),
            "cat: /nope: No such file or directory\n".into(),
            1
        )
    );
    assert_eq!(
        run(&mut s, &["cat", "/etc"]).1,
        "cat: /etc: Is a directory\n"
    );
    let o = s.run(&argv(&["cat"]), b"piped");
    assert_eq!(o.stdout, b"piped");
}

#[test]
fn ls_lists_the_view() {
    let mut s = Session::new(ctx("busybox"));
    let out = run(&mut s, &["ls", "/etc"]).0;
    assert_eq!(
        out,
        "app.conf\ncfg\ncreds\nhostname\nhosts\npodinfo\nresolv.conf\n"
    );
    let out = run(&mut s, &["ls", "-la", "/etc/cfg"]).0;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "total 8");
    assert!(lines[1].starts_with("drwxr-xr-x") && lines[1].ends_with(" ."));
    assert!(lines[2].ends_with(" .."));
    assert!(
        lines[3].starts_with("-rw-r--r--")
            && lines[3].contains(" 5 Jan")
            && lines[3].ends_with(" level")
    );
    assert!(run(&mut s, &["ls", "/"]).0.contains("var\n"));
    assert_eq!(
        run(&mut s, &["ls", "/nope"]).1,
        "ls: /nope: No such file or directory\n"
    );
}

#[test]
fn tar_round_trip_through_copied_files() {
    let src = ctx("busybox");
    let mut s = Session::new(src);
    let o = s.run(
        &argv(&["tar", "cf", "-", "-C", "/etc", "hostname", "cfg"]),
        b"",
    );
    assert_eq!(o.exit_code, 0, "{}", String::from_utf8_lossy(&o.stderr));
    let archive = o.stdout;

    let dest_ctx = ctx("busybox");
    let copied = dest_ctx.copied.clone();
    let mut d = Session::new(dest_ctx);
    let o = d.run(
        &argv(&[
            "tar",
            "--no-same-permissions",
            "--no-same-owner",
            "-xmf",
            "-",
            "-C",
            "/tmp/in",
        ]),
        &archive,
    );
    assert_eq!(o.exit_code, 0, "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(run(&mut d, &["cat", "/tmp/in/hostname"]).0, "web-0\n");
    assert_eq!(run(&mut d, &["cat", "/tmp/in/cfg/mode"]).0, "fast");
    assert!(copied.lock().unwrap().contains_key("/tmp/in/cfg/level"));
    // A new session on the same container still sees them; kubectl's plain form works too.
    let mut again = Session::new(ContainerContext {
        copied: copied.clone(),
        ..ctx("busybox")
    });
    assert_eq!(run(&mut again, &["ls", "/tmp/in"]).0, "cfg\nhostname\n");
    let o = again.run(&argv(&["tar", "cf", "-", "/tmp/in/hostname"]), b"");
    let o2 = again.run(&argv(&["tar", "-xmf", "-", "-C", "/x"]), &o.stdout);
    assert_eq!(o2.exit_code, 0);
    assert_eq!(run(&mut again, &["cat", "/x/tmp/in/hostname"]).0, "web-0\n");
    let (_, err, code) = run(&mut again, &["tar", "cf", "-", "/nope"]);
    assert_eq!(
        (err.as_str(), code),
        ("tar: /nope: No such file or directory\n", 1)
    );
}

#[test]
fn interactive_prompt_echo_backspace_and_exit() {
    let mut s = Session::new(ctx("busybox"));
    assert_eq!(s.prompt(), "/ # ");
    let f = s.feed(b"echx\x7fo hi\r", true);
    assert_eq!(
        String::from_utf8(f.output).unwrap(),
        "echx\x08 \x08o hi\r\nhi\r\n/ # "
    );
    assert_eq!(f.exit, None);
    let f = s.feed(b"exit 4\r", true);
    assert_eq!(f.exit, Some(4));

    let mut b = Session::new(ctx("debian:12"));
    assert_eq!(b.prompt(), "root@web-0:/# ");
    let f = b.feed(b"cd /etc\r", true);
    assert!(
        String::from_utf8(f.output)
            .unwrap()
            .ends_with("root@web-0:/etc# ")
    );
    let f = b.feed(b"false\r\x04", true);
    assert_eq!(f.exit, Some(1));

    let mut n = Session::new(ctx("busybox"));
    let f = n.feed(b"echo quiet\n", false);
    assert_eq!(f.output, b"quiet\n");
    let f = n.feed(b"sh -c 'exit 2'\n", false);
    assert_eq!(f.exit, None);
}

#[test]
fn sh_reads_a_script_from_stdin() {
    let mut s = Session::new(ctx("busybox"));
    let o = s.run(&argv(&["sh"]), b"echo one\necho $POD_NS\n");
    assert_eq!(o.stdout, b"one\nshop\n");
}
