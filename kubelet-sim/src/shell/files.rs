//! The container's file view: only the files Kubernetes itself puts into a container, plus
//! those copied in with `kubectl cp`. Directories are implied by the paths.
//!
//! Mirrors `pkg/kubelet/kubelet_pods.go` (`managedHostsFileContent`, `GeneratePodHostNameAndDomain`),
//! `pkg/kubelet/network/dns/dns.go` (`/etc/resolv.conf` for `ClusterFirst`), and the volume
//! plugins `pkg/volume/{configmap,secret,projected,downwardapi}` with `pkg/volume/util/atomic_writer.go`
//! (keys as files, `items` renaming them, `subPath` picking one).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{KeyToPath, Pod, Volume};

use super::ContainerContext;
use super::env::{field_value, resource_value};

/// Where the ServiceAccount token volume is mounted.
pub const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The pod's hostname: the node's name for a pod on the host's network (`hostNetwork: true`
/// shares the node's UTS namespace), else `spec.hostname` if set, else the pod name (cut to 63
/// characters).
pub fn hostname(pod: &Pod) -> String {
    let spec = pod.spec.as_ref();
    if spec.and_then(|s| s.host_network) == Some(true)
        && let Some(node) = spec.and_then(|s| s.node_name.as_deref())
    {
        return node.to_owned();
    }
    let name = pod
        .spec
        .as_ref()
        .and_then(|s| s.hostname.clone())
        .filter(|h| !h.is_empty())
        .or_else(|| pod.metadata.name.clone())
        .unwrap_or_default();
    name.chars().take(63).collect()
}

/// The pod's domain: `<subdomain>.<ns>.svc.<cluster domain>` when `spec.subdomain` is set.
pub fn host_domain(ctx: &ContainerContext) -> Option<String> {
    let sub = ctx
        .pod
        .spec
        .as_ref()?
        .subdomain
        .clone()
        .filter(|s| !s.is_empty())?;
    let ns = ctx.namespace();
    Some(format!("{sub}.{ns}.svc.{}", ctx.cluster_domain))
}

/// `/etc/hosts` as the kubelet writes it (`managedHostsFileContent`).
pub fn hosts(ctx: &ContainerContext) -> String {
    let mut s = String::from("# Kubernetes-managed hosts file.\n");
    s.push_str("127.0.0.1\tlocalhost\n");
    s.push_str("::1\tlocalhost ip6-localhost ip6-loopback\n");
    s.push_str("fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\n");
    s.push_str("fe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n");
    let host = hostname(&ctx.pod);
    let status = ctx.pod.status.as_ref();
    let mut ips: Vec<String> = status
        .and_then(|s| s.pod_ips.as_ref())
        .map(|v| v.iter().map(|i| i.ip.clone()).collect())
        .unwrap_or_default();
    if ips.is_empty() {
        ips.extend(status.and_then(|s| s.pod_ip.clone()));
    }
    for ip in ips {
        match host_domain(ctx) {
            Some(d) => s.push_str(&format!("{ip}\t{host}.{d}\t{host}\n")),
            None => s.push_str(&format!("{ip}\t{host}\n")),
        }
    }
    let aliases = ctx.pod.spec.as_ref().and_then(|s| s.host_aliases.as_ref());
    if let Some(aliases) = aliases.filter(|a| !a.is_empty()) {
        s.push_str("\n# Entries added by HostAliases.\n");
        for a in aliases {
            let names = a.hostnames.clone().unwrap_or_default().join("\t");
            s.push_str(&format!("{}\t{names}\n", a.ip));
        }
    }
    s
}

/// `/etc/resolv.conf` for the `ClusterFirst` DNS policy.
pub fn resolv_conf(ctx: &ContainerContext) -> String {
    let ns = ctx.namespace();
    let d = &ctx.cluster_domain;
    format!(
        "search {ns}.svc.{d} svc.{d} {d}\nnameserver {}\noptions ndots:5\n",
        ctx.dns_server
    )
}

/// Every file of the container: path → contents.
pub fn view(ctx: &ContainerContext) -> BTreeMap<String, Vec<u8>> {
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert(
        "/etc/hostname".into(),
        format!("{}\n", hostname(&ctx.pod)).into_bytes(),
    );
    files.insert("/etc/hosts".into(), hosts(ctx).into_bytes());
    files.insert("/etc/resolv.conf".into(), resolv_conf(ctx).into_bytes());
    let automount = ctx
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.automount_service_account_token)
        .unwrap_or(true);
    if let (Some(token), true) = (&ctx.service_account_token, automount) {
        files.insert(format!("{SA_DIR}/token"), token.clone().into_bytes());
        files.insert(format!("{SA_DIR}/ca.crt"), ctx.ca_crt.clone().into_bytes());
        files.insert(format!("{SA_DIR}/namespace"), ctx.namespace().into_bytes());
    }
    let volumes = ctx.pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    if let (Some(c), Some(volumes)) = (ctx.container(), volumes) {
        for m in c.volume_mounts.iter().flatten() {
            let Some(v) = volumes.iter().find(|v| v.name == m.name) else {
                continue;
            };
            let content = volume_files(ctx, v);
            let mount = m.mount_path.trim_end_matches('/');
            match m.sub_path.as_deref().filter(|s| !s.is_empty()) {
                Some(sub) => {
                    let sub = sub.trim_matches('/');
                    for (rel, data) in &content {
                        if rel == sub {
                            files.insert(mount.to_string(), data.clone());
                        } else if let Some(rest) = rel.strip_prefix(&format!("{sub}/")) {
                            files.insert(format!("{mount}/{rest}"), data.clone());
                        }
                    }
                }
                None => {
                    for (rel, data) in content {
                        files.insert(format!("{mount}/{rel}"), data);
                    }
                }
            }
        }
    }
    if let Ok(copied) = ctx.copied.lock() {
        for (k, v) in copied.iter() {
            files.insert(k.clone(), v.clone());
        }
    }
    files
}

/// Keys of `data` as files, renamed by `items` when given (then only those keys).
fn keyed(
    data: Option<&BTreeMap<String, String>>,
    items: Option<&Vec<KeyToPath>>,
) -> Vec<(String, Vec<u8>)> {
    let Some(data) = data else {
        return Vec::new();
    };
    match items.filter(|i| !i.is_empty()) {
        Some(items) => items
            .iter()
            .filter_map(|i| {
                data.get(&i.key)
                    .map(|v| (i.path.clone(), v.clone().into_bytes()))
            })
            .collect(),
        None => data
            .iter()
            .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
            .collect(),
    }
}

/// The files a volume holds, relative to its root.
fn volume_files(ctx: &ContainerContext, v: &Volume) -> Vec<(String, Vec<u8>)> {
    if let Some(cm) = &v.config_map {
        return keyed(ctx.config_maps.get(&cm.name), cm.items.as_ref());
    }
    if let Some(s) = &v.secret {
        let name = s.secret_name.clone().unwrap_or_default();
        return keyed(ctx.secrets.get(&name), s.items.as_ref());
    }
    if let Some(d) = &v.downward_api {
        return downward(ctx, d.items.iter().flatten());
    }
    if let Some(p) = &v.projected {
        let mut out = Vec::new();
        for src in p.sources.iter().flatten() {
            if let Some(cm) = &src.config_map {
                out.extend(keyed(ctx.config_maps.get(&cm.name), cm.items.as_ref()));
            }
            if let Some(s) = &src.secret {
                out.extend(keyed(ctx.secrets.get(&s.name), s.items.as_ref()));
            }
            if let Some(d) = &src.downward_api {
                out.extend(downward(ctx, d.items.iter().flatten()));
            }
            if let (Some(t), Some(token)) = (&src.service_account_token, &ctx.service_account_token)
            {
                out.push((t.path.clone(), token.clone().into_bytes()));
            }
            if let Some(ctb) = &src.cluster_trust_bundle {
                out.push((ctb.path.clone(), ctx.ca_crt.clone().into_bytes()));
            }
        }
        return out;
    }
    Vec::new()
}

/// Files of a downwardAPI volume.
fn downward<'a>(
    ctx: &ContainerContext,
    items: impl Iterator<Item = &'a k8s_openapi::api::core::v1::DownwardAPIVolumeFile>,
) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for i in items {
        let value = if let Some(f) = &i.field_ref {
            field_value(&ctx.pod, &f.field_path)
        } else if let Some(r) = &i.resource_field_ref {
            let name = r
                .container_name
                .clone()
                .unwrap_or_else(|| ctx.container_name.clone());
            ctx.pod
                .spec
                .as_ref()
                .and_then(|s| s.containers.iter().find(|c| c.name == name))
                .map(|c| resource_value(c, &r.resource, r.divisor.as_ref()))
        } else {
            None
        };
        if let Some(v) = value {
            out.push((i.path.clone(), v.into_bytes()));
        }
    }
    out
}

/// Normalises `path` against `cwd`: absolute, no `.`/`..`/empty parts, no trailing `/`.
pub fn normalize(cwd: &str, path: &str) -> String {
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{cwd}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for p in joined.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Whether `path` is a directory of the view (the root, or a prefix of some file).
pub fn is_dir(files: &BTreeMap<String, Vec<u8>>, path: &str) -> bool {
    if path == "/" {
        return true;
    }
    let prefix = format!("{path}/");
    files.keys().any(|k| k.starts_with(&prefix))
}

/// The names directly under directory `dir`, each with whether it is a directory.
pub fn list_dir(files: &BTreeMap<String, Vec<u8>>, dir: &str) -> BTreeMap<String, bool> {
    let prefix = if dir == "/" {
        "/".to_string()
    } else {
        format!("{dir}/")
    };
    let mut out = BTreeMap::new();
    for k in files.keys() {
        if let Some(rest) = k.strip_prefix(&prefix) {
            match rest.split_once('/') {
                Some((d, _)) => {
                    out.insert(d.to_string(), true);
                }
                None => {
                    out.entry(rest.to_string()).or_insert(false);
                }
            }
        }
    }
    out
}
