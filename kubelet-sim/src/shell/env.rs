//! The container's environment, as the kubelet builds it before starting the process.
//!
//! Mirrors `pkg/kubelet/kubelet_pods.go` `makeEnvironmentVariables` (envFrom first, then `env`
//! in order, each value `$(VAR)`-expanded against what came before, as
//! `third_party/forked/golang/expansion/expand.go`), the downward API of
//! `pkg/fieldpath/fieldpath.go` and `pkg/api/v1/resource/helpers.go`
//! `ExtractContainerResourceValue`, plus what the kubelet adds itself: `HOSTNAME` (from
//! the runtime), `PATH`/`HOME` (from the image) and `KUBERNETES_SERVICE_*`/`KUBERNETES_PORT*`
//! (`pkg/kubelet/envvars/envvars.go` for the `kubernetes` Service).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, EnvVar, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::ContainerContext;

/// The `PATH` of the simulated images.
pub const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The container's environment in order, as `env` prints it.
pub fn environment(ctx: &ContainerContext) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let set = |out: &mut Vec<(String, String)>, k: String, v: String| {
        if let Some(e) = out.iter_mut().find(|(n, _)| *n == k) {
            e.1 = v;
        } else {
            out.push((k, v));
        }
    };
    set(&mut out, "PATH".into(), PATH.into());
    set(
        &mut out,
        "HOSTNAME".into(),
        super::files::hostname(&ctx.pod),
    );
    if let Some(ip) = &ctx.kubernetes_service_ip {
        let port = ctx.kubernetes_service_port;
        set(&mut out, "KUBERNETES_SERVICE_HOST".into(), ip.clone());
        set(&mut out, "KUBERNETES_SERVICE_PORT".into(), port.to_string());
        set(
            &mut out,
            "KUBERNETES_SERVICE_PORT_HTTPS".into(),
            port.to_string(),
        );
        set(
            &mut out,
            "KUBERNETES_PORT".into(),
            format!("tcp://{ip}:{port}"),
        );
        let p = format!("KUBERNETES_PORT_{port}_TCP");
        set(&mut out, p.clone(), format!("tcp://{ip}:{port}"));
        set(&mut out, format!("{p}_PROTO"), "tcp".into());
        set(&mut out, format!("{p}_PORT"), port.to_string());
        set(&mut out, format!("{p}_ADDR"), ip.clone());
    }
    if let Some(c) = ctx.container() {
        for (k, v) in container_env(ctx, &c) {
            set(&mut out, k, v);
        }
    }
    if !out.iter().any(|(k, _)| k == "HOME") {
        out.push(("HOME".into(), "/root".into()));
    }
    out
}

/// The variables of the container's `envFrom` and `env`, resolved and expanded.
pub fn container_env(ctx: &ContainerContext, c: &Container) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let put = |out: &mut Vec<(String, String)>, k: String, v: String| {
        if let Some(e) = out.iter_mut().find(|(n, _)| *n == k) {
            e.1 = v;
        } else {
            out.push((k, v));
        }
    };
    for from in c.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let data = if let Some(r) = &from.config_map_ref {
            ctx.config_maps.get(&r.name)
        } else if let Some(r) = &from.secret_ref {
            ctx.secrets.get(&r.name)
        } else {
            None
        };
        for (k, v) in data.into_iter().flatten() {
            put(&mut out, format!("{prefix}{k}"), v.clone());
        }
    }
    for e in c.env.iter().flatten() {
        if let Some(v) = resolve(ctx, c, e) {
            let map: BTreeMap<String, String> = out.iter().cloned().collect();
            let v = if e.value.is_some() {
                expand(&v, &map)
            } else {
                v
            };
            put(&mut out, e.name.clone(), v);
        }
    }
    out
}

/// One `env` entry's value, or `None` when its optional source is missing.
fn resolve(ctx: &ContainerContext, c: &Container, e: &EnvVar) -> Option<String> {
    let Some(from) = &e.value_from else {
        return Some(e.value.clone().unwrap_or_default());
    };
    if let Some(f) = &from.field_ref {
        return field_value(&ctx.pod, &f.field_path);
    }
    if let Some(r) = &from.resource_field_ref {
        let name = r.container_name.as_deref().unwrap_or(&c.name);
        let target = ctx.pod.spec.as_ref().and_then(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
                .find(|x| x.name == name)
        })?;
        return Some(resource_value(target, &r.resource, r.divisor.as_ref()));
    }
    if let Some(r) = &from.config_map_key_ref {
        return ctx
            .config_maps
            .get(&r.name)
            .and_then(|d| d.get(&r.key))
            .cloned();
    }
    if let Some(r) = &from.secret_key_ref {
        return ctx
            .secrets
            .get(&r.name)
            .and_then(|d| d.get(&r.key))
            .cloned();
    }
    None
}

/// A downward-API field of the pod (`pkg/fieldpath/fieldpath.go`, `podutil` for `status.*`).
pub fn field_value(pod: &Pod, path: &str) -> Option<String> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    if let Some(rest) = path.strip_prefix("metadata.labels['") {
        let key = rest.strip_suffix("']")?;
        return Some(meta.labels.as_ref()?.get(key).cloned().unwrap_or_default());
    }
    if let Some(rest) = path.strip_prefix("metadata.annotations['") {
        let key = rest.strip_suffix("']")?;
        return Some(
            meta.annotations
                .as_ref()?
                .get(key)
                .cloned()
                .unwrap_or_default(),
        );
    }
    let joined = |m: Option<&BTreeMap<String, String>>| {
        m.map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}=\"{v}\""))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
    };
    Some(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "metadata.labels" => joined(meta.labels.as_ref()),
        "metadata.annotations" => joined(meta.annotations.as_ref()),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.hostIP" => status.and_then(|s| s.host_ip.clone()).unwrap_or_default(),
        "status.hostIPs" => status
            .and_then(|s| s.host_ips.as_ref())
            .map(|v| v.iter().map(|i| i.ip.clone()).collect::<Vec<_>>().join(","))
            .unwrap_or_default(),
        "status.podIP" => status.and_then(|s| s.pod_ip.clone()).unwrap_or_default(),
        "status.podIPs" => status
            .and_then(|s| s.pod_ips.as_ref())
            .map(|v| v.iter().map(|i| i.ip.clone()).collect::<Vec<_>>().join(","))
            .unwrap_or_default(),
        _ => return None,
    })
}

/// A `resourceFieldRef` value: the limit (or request) divided by the divisor, rounded up, as
/// `ExtractContainerResourceValue`. A missing limit is shown as 0 here (the real kubelet
/// falls back to the node's allocatable, which the shell does not know).
pub fn resource_value(c: &Container, resource: &str, divisor: Option<&Quantity>) -> String {
    let res = c.resources.as_ref();
    let (map, key) = match resource.split_once('.') {
        Some(("limits", k)) => (res.and_then(|r| r.limits.as_ref()), k),
        Some(("requests", k)) => (res.and_then(|r| r.requests.as_ref()), k),
        _ => return String::new(),
    };
    let value = map
        .and_then(|m| m.get(key))
        .and_then(|q| parse_quantity(&q.0))
        .unwrap_or(0.0);
    let div = divisor
        .and_then(|d| parse_quantity(&d.0))
        .filter(|d| *d > 0.0)
        .unwrap_or(1.0);
    // Nudge away float noise before rounding up (1.0000000001 → 1).
    let q = value / div;
    let up = (q - 1e-9).ceil().max(0.0);
    format!("{}", up as u64)
}

/// A Kubernetes quantity (`500m`, `1Gi`, `2`, `1e3`) as a number.
pub fn parse_quantity(s: &str) -> Option<f64> {
    let s = s.trim();
    let suffixes: [(&str, f64); 14] = [
        ("Ki", 1024.0),
        ("Mi", 1024f64.powi(2)),
        ("Gi", 1024f64.powi(3)),
        ("Ti", 1024f64.powi(4)),
        ("Pi", 1024f64.powi(5)),
        ("Ei", 1024f64.powi(6)),
        ("n", 1e-9),
        ("u", 1e-6),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
    ];
    for (suf, mult) in suffixes {
        if let Some(n) = s.strip_suffix(suf) {
            return n.parse::<f64>().ok().map(|n| n * mult);
        }
    }
    if let Some(n) = s.strip_suffix('E') {
        return n.parse::<f64>().ok().map(|n| n * 1e18);
    }
    s.parse::<f64>().ok()
}

/// `$(VAR)` expansion of an `env` value: known names are replaced, unknown ones kept as
/// written, `$$` is an escaped `$` (`third_party/forked/golang/expansion/expand.go`).
pub fn expand(input: &str, vars: &BTreeMap<String, String>) -> String {
    let b = input.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    let mut last = 0;
    while i < b.len() {
        if b[i] == b'$' && i + 1 < b.len() {
            if b[i + 1] == b'$' {
                out.push_str(&input[last..i]);
                out.push('$');
                i += 2;
                last = i;
                continue;
            }
            if b[i + 1] == b'('
                && let Some(end) = input[i + 2..].find(')')
            {
                let name = &input[i + 2..i + 2 + end];
                out.push_str(&input[last..i]);
                match vars.get(name) {
                    Some(v) => out.push_str(v),
                    None => out.push_str(&input[i..i + 3 + end]),
                }
                i += 3 + end;
                last = i;
                continue;
            }
        }
        i += 1;
    }
    out.push_str(&input[last..]);
    out
}
