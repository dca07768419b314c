//! The pod parts every workload describer shows: containers, volumes, tolerations, label
//! selectors and the `Pod Template:` section (kubectl describe.go's `DescribePodTemplate`,
//! `describeContainers`, `describeVolumes`, `printTolerationsMultiline`,
//! `metav1.FormatLabelSelector`).
//!
//! ```text
//!   Pod Template:
//!     Labels:  app=web
//!     Containers:
//!      web:
//!       Image:         nginx:1.25
//!       Port:          80/TCP
//!       Host Port:     0/TCP
//!       Environment:   <none>
//!       Mounts:        <none>
//!     Volumes:         <none>
//! ```

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStatus, PodTemplateSpec, Probe, Toleration, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::writer::{self, PrefixWriter};

/// A label selector as kubectl prints it (`app=web,tier in (a,b)`, sorted by key), or
/// `<none>` when it selects everything.
pub fn selector_string(selector: Option<&LabelSelector>) -> String {
    let mut requirements: Vec<(String, String)> = Vec::new();
    let Some(selector) = selector else {
        return "<none>".to_owned();
    };
    for (k, v) in selector.match_labels.iter().flatten() {
        requirements.push((k.clone(), format!("{k}={v}")));
    }
    for e in selector.match_expressions.iter().flatten() {
        let mut values = e.values.clone().unwrap_or_default();
        values.sort();
        let text = match e.operator.as_str() {
            "In" => format!("{} in ({})", e.key, values.join(",")),
            "NotIn" => format!("{} notin ({})", e.key, values.join(",")),
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            other => format!("{} {other} ({})", e.key, values.join(",")),
        };
        requirements.push((e.key.clone(), text));
    }
    if requirements.is_empty() {
        return "<none>".to_owned();
    }
    // kubectl sorts requirements by key (`labels.ByKey`), whatever the operator.
    requirements.sort();
    requirements
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join(",")
}

/// `Pod Template:` and its nested sections (`DescribePodTemplate`).
pub fn pod_template(w: &mut PrefixWriter, template: &PodTemplateSpec) {
    w.write(0, "Pod Template:\n");
    let meta = template.metadata.clone().unwrap_or_default();
    writer::labels(w, "  Labels", meta.labels.as_ref());
    if meta.annotations.as_ref().is_some_and(|a| !a.is_empty()) {
        writer::annotations(w, "  Annotations", meta.annotations.as_ref());
    }
    let spec = template.spec.clone().unwrap_or_default();
    if let Some(sa) = spec
        .service_account_name
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        w.field(1, "Service Account", sa);
    }
    if let Some(init) = spec.init_containers.as_ref().filter(|c| !c.is_empty()) {
        containers(w, "Init Containers", init, &[], "  ");
    }
    containers(w, "Containers", &spec.containers, &[], "  ");
    volumes(w, spec.volumes.as_deref().unwrap_or_default(), "  ");
    if let Some(pc) = spec
        .priority_class_name
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        w.field(1, "Priority Class Name", pc);
    }
    writer::labels(w, "  Node-Selectors", spec.node_selector.as_ref());
    tolerations(
        w,
        "  Tolerations",
        spec.tolerations.as_deref().unwrap_or_default(),
    );
}

/// The `Pod Template:` section on its own (`rollout history --revision`).
pub fn pod_template_text(template: &PodTemplateSpec) -> String {
    let mut w = PrefixWriter::new();
    pod_template(&mut w, template);
    w.finish()
}

/// `Containers:` with each container's image, ports, command, state (for pods), resources,
/// probes, environment and mounts (`describeContainers`). `space` is `"  "` inside a pod
/// template, `""` for a pod.
pub fn containers(
    w: &mut PrefixWriter,
    label: &str,
    containers: &[Container],
    statuses: &[ContainerStatus],
    space: &str,
) {
    if containers.is_empty() {
        w.write(0, &format!("{space}{label}: <none>\n"));
        return;
    }
    w.write(0, &format!("{space}{label}:\n"));
    let name_indent = if space.is_empty() { "" } else { " " };
    for c in containers {
        let status = statuses.iter().find(|s| s.name == c.name);
        w.write(1, &format!("{name_indent}{}:\n", c.name));
        if let Some(s) = status {
            let id = s.container_id.as_deref().unwrap_or_default();
            w.field(2, "Container ID", id);
        }
        w.field(2, "Image", c.image.as_deref().unwrap_or_default());
        if let Some(s) = status {
            w.field(2, "Image ID", &s.image_id);
        }
        let ports = c.ports.as_deref().unwrap_or_default();
        let list = |f: &dyn Fn(&k8s_openapi::api::core::v1::ContainerPort) -> i32| {
            ports
                .iter()
                .map(|p| format!("{}/{}", f(p), p.protocol.as_deref().unwrap_or("TCP")))
                .collect::<Vec<_>>()
                .join(", ")
        };
        for (one, many, text) in [
            ("Port", "Ports", list(&|p| p.container_port)),
            (
                "Host Port",
                "Host Ports",
                list(&|p| p.host_port.unwrap_or(0)),
            ),
        ] {
            if text.contains(',') {
                w.write(2, &format!("{many}:\t{text}\n"));
            } else {
                w.write(2, &format!("{one}:\t{}\n", none_if_empty(&text)));
            }
        }
        for (title, lines) in [("Command", &c.command), ("Args", &c.args)] {
            if let Some(lines) = lines.as_ref().filter(|l| !l.is_empty()) {
                w.write(2, &format!("{title}:\n"));
                for line in lines.iter().flat_map(|l| l.split('\n')) {
                    w.write(3, &format!("{line}\n"));
                }
            }
        }
        if let Some(s) = status {
            state(w, "State", s.state.as_ref());
            let last = s.last_state.as_ref();
            if last.is_some_and(|l| l.terminated.is_some()) {
                state(w, "Last State", last);
            }
            w.field(2, "Ready", if s.ready { "True" } else { "False" });
            w.field(2, "Restart Count", s.restart_count);
        }
        resources(w, c);
        for (title, probe) in [
            ("Liveness", &c.liveness_probe),
            ("Readiness", &c.readiness_probe),
            ("Startup", &c.startup_probe),
        ] {
            if let Some(p) = probe {
                w.write(2, &format!("{title}:\t{}\n", describe_probe(p)));
            }
        }
        environment(w, c);
        mounts(w, c);
    }
}

fn none_if_empty(s: &str) -> &str {
    if s.is_empty() { "<none>" } else { s }
}

/// `State:` / `Last State:` of a container (`describeStatus`).
fn state(w: &mut PrefixWriter, title: &str, state: Option<&ContainerState>) {
    let state = state.cloned().unwrap_or_default();
    if let Some(running) = state.running {
        w.write(2, &format!("{title}:\tRunning\n"));
        w.field(3, "Started", writer::time(running.started_at.map(|t| t.0)));
    } else if let Some(t) = state.terminated {
        w.write(2, &format!("{title}:\tTerminated\n"));
        if let Some(reason) = t.reason.filter(|r| !r.is_empty()) {
            w.field(3, "Reason", reason);
        }
        if let Some(message) = t.message.filter(|m| !m.is_empty()) {
            w.field(3, "Message", message);
        }
        w.field(3, "Exit Code", t.exit_code);
        if let Some(signal) = t.signal.filter(|s| *s > 0) {
            w.field(3, "Signal", signal);
        }
        w.field(3, "Started", writer::time(t.started_at.map(|t| t.0)));
        w.field(3, "Finished", writer::time(t.finished_at.map(|t| t.0)));
    } else {
        w.write(2, &format!("{title}:\tWaiting\n"));
        if let Some(reason) = state
            .waiting
            .and_then(|w| w.reason)
            .filter(|r| !r.is_empty())
        {
            w.field(3, "Reason", reason);
        }
    }
}

/// `Limits:` and `Requests:` (`describeResources`).
fn resources(w: &mut PrefixWriter, c: &Container) {
    let Some(r) = &c.resources else { return };
    for (title, list) in [("Limits", &r.limits), ("Requests", &r.requests)] {
        if let Some(list) = list.as_ref().filter(|l| !l.is_empty()) {
            w.write(2, &format!("{title}:\n"));
            for (name, quantity) in list {
                w.write(3, &format!("{name}:\t{}\n", quantity.0));
            }
        }
    }
}

/// `80` or `http`: an int-or-string as Go's `IntOrString.String()` prints it.
pub fn int_or_string(v: &IntOrString) -> String {
    match v {
        IntOrString::Int(i) => i.to_string(),
        IntOrString::String(s) => s.clone(),
    }
}

/// A probe on one line (`DescribeProbe`): `http-get http://:80/ delay=0s timeout=1s
/// period=10s #success=1 #failure=3`.
fn describe_probe(p: &Probe) -> String {
    let attrs = format!(
        "delay={}s timeout={}s period={}s #success={} #failure={}",
        p.initial_delay_seconds.unwrap_or(0),
        p.timeout_seconds.unwrap_or(1),
        p.period_seconds.unwrap_or(10),
        p.success_threshold.unwrap_or(1),
        p.failure_threshold.unwrap_or(3)
    );
    let action = if let Some(exec) = &p.exec {
        format!(
            "exec [{}]",
            exec.command.clone().unwrap_or_default().join(" ")
        )
    } else if let Some(http) = &p.http_get {
        let scheme = http.scheme.as_deref().unwrap_or("HTTP").to_lowercase();
        format!(
            "http-get {scheme}://{}:{}{}",
            http.host.as_deref().unwrap_or_default(),
            int_or_string(&http.port),
            http.path.as_deref().unwrap_or("/")
        )
    } else if let Some(tcp) = &p.tcp_socket {
        format!(
            "tcp-socket {}:{}",
            tcp.host.as_deref().unwrap_or_default(),
            int_or_string(&tcp.port)
        )
    } else if let Some(grpc) = &p.grpc {
        format!(
            "grpc <pod>:{} {}",
            grpc.port,
            grpc.service.as_deref().unwrap_or_default()
        )
    } else {
        "unknown".to_owned()
    };
    format!("{action} {attrs}")
}

/// `Environment:` (`describeContainerEnvVars`; values from references are described, not
/// resolved).
fn environment(w: &mut PrefixWriter, c: &Container) {
    let env = c.env.as_deref().unwrap_or_default();
    if env.is_empty() {
        w.write(2, "Environment:\t<none>\n");
        return;
    }
    w.write(2, "Environment:\n");
    for e in env {
        let Some(from) = &e.value_from else {
            for (i, line) in e
                .value
                .as_deref()
                .unwrap_or_default()
                .split('\n')
                .enumerate()
            {
                if i == 0 {
                    w.write(3, &format!("{}:\t{line}\n", e.name));
                } else {
                    w.write(3, &format!("\t{line}\n"));
                }
            }
            continue;
        };
        let text = if let Some(f) = &from.field_ref {
            format!(
                " ({}:{})",
                f.api_version.as_deref().unwrap_or("v1"),
                f.field_path
            )
        } else if let Some(r) = &from.resource_field_ref {
            format!(" ({})", r.resource)
        } else if let Some(r) = &from.config_map_key_ref {
            format!(
                "<set to the key '{}' of config map '{}'>\tOptional: {}",
                r.key,
                r.name,
                r.optional.unwrap_or(false)
            )
        } else if let Some(r) = &from.secret_key_ref {
            format!(
                "<set to the key '{}' in secret '{}'>\tOptional: {}",
                r.key,
                r.name,
                r.optional.unwrap_or(false)
            )
        } else {
            String::new()
        };
        w.write(3, &format!("{}:\t{text}\n", e.name));
    }
}

/// `Mounts:` (`describeContainerVolumes`).
fn mounts(w: &mut PrefixWriter, c: &Container) {
    let mut mounts = c.volume_mounts.clone().unwrap_or_default();
    if mounts.is_empty() {
        w.write(2, "Mounts:\t<none>\n");
        return;
    }
    mounts.sort_by(|a, b| a.mount_path.cmp(&b.mount_path));
    w.write(2, "Mounts:\n");
    for m in mounts {
        let mut flags = vec![
            if m.read_only == Some(true) {
                "ro"
            } else {
                "rw"
            }
            .to_owned(),
        ];
        if let Some(sub) = m.sub_path.filter(|s| !s.is_empty()) {
            flags.push(format!("path={sub:?}"));
        }
        w.write(
            3,
            &format!("{} from {} ({})\n", m.mount_path, m.name, flags.join(",")),
        );
    }
}

/// `Volumes:` (`describeVolumes`; the common volume types, others by name only).
pub fn volumes(w: &mut PrefixWriter, volumes: &[Volume], space: &str) {
    if volumes.is_empty() {
        w.write(0, &format!("{space}Volumes:\t<none>\n"));
        return;
    }
    w.write(0, &format!("{space}Volumes:\n"));
    let name_indent = if space.is_empty() { "" } else { " " };
    for v in volumes {
        w.write(1, &format!("{name_indent}{}:\n", v.name));
        let lines: Vec<String> = if let Some(e) = &v.empty_dir {
            vec![
                "Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)".to_owned(),
                format!("Medium:\t{}", e.medium.as_deref().unwrap_or_default()),
                format!(
                    "SizeLimit:\t{}",
                    e.size_limit.as_ref().map_or("<unset>", |q| q.0.as_str())
                ),
            ]
        } else if let Some(c) = &v.config_map {
            vec![
                "Type:\tConfigMap (a volume populated by a ConfigMap)".to_owned(),
                format!("Name:\t{}", c.name),
                format!("Optional:\t{}", c.optional.unwrap_or(false)),
            ]
        } else if let Some(s) = &v.secret {
            vec![
                "Type:\tSecret (a volume populated by a Secret)".to_owned(),
                format!(
                    "SecretName:\t{}",
                    s.secret_name.as_deref().unwrap_or_default()
                ),
                format!("Optional:\t{}", s.optional.unwrap_or(false)),
            ]
        } else if let Some(h) = &v.host_path {
            vec![
                "Type:\tHostPath (bare host directory volume)".to_owned(),
                format!("Path:\t{}", h.path),
                format!("HostPathType:\t{}", h.type_.as_deref().unwrap_or_default()),
            ]
        } else if let Some(p) = &v.persistent_volume_claim {
            vec![
                "Type:\tPersistentVolumeClaim (a reference to a PersistentVolumeClaim in the same namespace)".to_owned(),
                format!("ClaimName:\t{}", p.claim_name),
                format!("ReadOnly:\t{}", p.read_only.unwrap_or(false)),
            ]
        } else if v.projected.is_some() {
            vec![
                "Type:\tProjected (a volume that contains injected data from multiple sources)"
                    .to_owned(),
            ]
        } else {
            vec!["<unknown>".to_owned()]
        };
        for line in lines {
            w.write(2, &format!("{line}\n"));
        }
    }
}

/// `Tolerations:` one per line, e.g. `node.kubernetes.io/not-ready:NoExecute op=Exists for
/// 300s` (`printTolerationsMultiline`).
pub fn tolerations(w: &mut PrefixWriter, title: &str, tolerations: &[Toleration]) {
    w.write(0, &format!("{title}:\t"));
    if tolerations.is_empty() {
        w.write(0, "<none>\n");
        return;
    }
    for (i, t) in tolerations.iter().enumerate() {
        if i > 0 {
            w.write(0, "\t");
        }
        let key = t.key.as_deref().unwrap_or_default();
        let value = t.value.as_deref().unwrap_or_default();
        let effect = t.effect.as_deref().unwrap_or_default();
        let mut text = key.to_owned();
        if !value.is_empty() {
            text.push_str(&format!("={value}"));
        }
        if !effect.is_empty() {
            text.push_str(&format!(":{effect}"));
        }
        if t.operator.as_deref() == Some("Exists") && value.is_empty() {
            text.push_str(if key.is_empty() && effect.is_empty() {
                "op=Exists"
            } else {
                " op=Exists"
            });
        }
        if let Some(seconds) = t.toleration_seconds {
            text.push_str(&format!(" for {seconds}s"));
        }
        w.write(0, &format!("{text}\n"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors_sorted_by_key() {
        let s: LabelSelector = serde_json::from_value(json!({
            "matchLabels": {"tier": "fe", "app": "web"},
            "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]},
                                 {"key": "canary", "operator": "DoesNotExist"}]
        }))
        .unwrap();
        assert_eq!(
            selector_string(Some(&s)),
            "app=web,!canary,env in (dev,prod),tier=fe"
        );
        assert_eq!(selector_string(None), "<none>");
    }

    #[test]
    fn pod_template_as_kubectl() {
        let t: PodTemplateSpec = serde_json::from_value(json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.25",
                                     "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}
        }))
        .unwrap();
        assert_eq!(
            pod_template_text(&t),
            "Pod Template:\n  \
             Labels:  app=web\n  \
             Containers:\n   \
             web:\n    \
             Image:         nginx:1.25\n    \
             Port:          80/TCP\n    \
             Host Port:     0/TCP\n    \
             Environment:   <none>\n    \
             Mounts:        <none>\n  \
             Volumes:         <none>\n  \
             Node-Selectors:  <none>\n  \
             Tolerations:     <none>\n"
        );
    }

    #[test]
    fn tolerations_lines() {
        let t: Vec<Toleration> = serde_json::from_value(json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"operator": "Exists"}
        ]))
        .unwrap();
        let mut w = PrefixWriter::new();
        tolerations(&mut w, "Tolerations", &t);
        assert_eq!(
            w.finish(),
            "Tolerations:  node.kubernetes.io/not-ready:NoExecute op=Exists for 300s\n              op=Exists\n"
        );
    }
}
