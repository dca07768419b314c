//! core/v1 Service (`SetDefaults_Service` in `pkg/apis/core/v1/defaults.go`,
//! `pkg/registry/core/service/strategy.go` and `storage/alloc.go`, `ValidateService` and
//! `ValidateServiceUpdate` in `pkg/apis/core/validation/validation.go`, and `printService`).
//!
//! A new Service's cluster IP is first picked as a hash of `namespace/name` inside
//! `10.96.0.0/12` (the `kubernetes` Service in `default` gets `10.96.0.1`), and node ports as a
//! hash inside `30000-32767`; `crate::service_alloc` then checks them against every other
//! Service (moving a picked value that is taken to the next free one, refusing a requested
//! one with Kubernetes' errors). An update that omits the allocated values keeps the old ones.

use super::field::{FieldPath, Rendered};
use super::meta::validate_labels;
use super::pod_spec::validate_protocol;
use super::table::{age_column, column, text};
use super::typed::{KindRules, age};
use super::{FieldError, TableColumn};
use apimachinery::fmt::go_quote;
use apimachinery::labels::format_labels;
use apimachinery::validation::{is_dns1123_label, is_valid_port_name, is_valid_port_num};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};

/// The Service rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct ServiceRules;

impl KindRules for ServiceRules {
    type Object = Service;
    const NAME_RULE: apimachinery::validation::NameRule =
        apimachinery::validation::NameRule::Dns1035Label;
    const STATUS_SUBRESOURCE: bool = true;

    fn set_defaults(&self, obj: &mut Service) {
        let spec = obj.spec.get_or_insert_with(ServiceSpec::default);
        let affinity = spec
            .session_affinity
            .get_or_insert_with(|| "None".to_owned());
        if affinity.is_empty() {
            *affinity = "None".to_owned();
        }
        if affinity == "None" {
            spec.session_affinity_config = None;
        }
        let type_ = spec.type_.get_or_insert_with(|| "ClusterIP".to_owned());
        if type_.is_empty() {
            *type_ = "ClusterIP".to_owned();
        }
        let type_ = type_.clone();
        for p in spec.ports.iter_mut().flatten() {
            if p.protocol.as_deref().unwrap_or("").is_empty() {
                p.protocol = Some("TCP".to_owned());
            }
            if matches!(&p.target_port, None | Some(IntOrString::Int(0)))
                || matches!(&p.target_port, Some(IntOrString::String(s)) if s.is_empty())
            {
                p.target_port = Some(IntOrString::Int(p.port));
            }
        }
        let externally_accessible = type_ == "LoadBalancer"
            || type_ == "NodePort"
            || (type_ == "ClusterIP"
                && spec
                    .external_ips
                    .as_ref()
                    .is_some_and(|ips| !ips.is_empty()));
        if externally_accessible
            && spec
                .external_traffic_policy
                .as_deref()
                .unwrap_or("")
                .is_empty()
        {
            spec.external_traffic_policy = Some("Cluster".to_owned());
        }
        if matches!(type_.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
            spec.internal_traffic_policy
                .get_or_insert_with(|| "Cluster".to_owned());
        }
        if type_ == "LoadBalancer" {
            spec.allocate_load_balancer_node_ports.get_or_insert(true);
        }
    }

    fn prepare_for_create(&self, obj: &mut Service) {
        let key = format!(
            "{}/{}",
            obj.metadata.namespace.as_deref().unwrap_or(""),
            obj.metadata.name.as_deref().unwrap_or("")
        );
        let spec = obj.spec.get_or_insert_with(ServiceSpec::default);
        allocate(spec, &key);
        // Go's non-pointer `LoadBalancerStatus` always shows: `status: {loadBalancer: {}}`.
        obj.status
            .get_or_insert_with(Default::default)
            .load_balancer
            .get_or_insert_with(Default::default);
    }

    fn prepare_for_update(&self, new: &mut Service, old: &Service) {
        let (Some(spec), Some(old_spec)) = (new.spec.as_mut(), old.spec.as_ref()) else {
            return;
        };
        let same_kind_of_ip = (spec.type_.as_deref() == Some("ExternalName"))
            == (old_spec.type_.as_deref() == Some("ExternalName"));
        if spec.cluster_ip.as_deref().unwrap_or("").is_empty() && same_kind_of_ip {
            spec.cluster_ip.clone_from(&old_spec.cluster_ip);
            spec.cluster_ips.clone_from(&old_spec.cluster_ips);
            spec.ip_families.clone_from(&old_spec.ip_families);
            spec.ip_family_policy.clone_from(&old_spec.ip_family_policy);
        }
        for p in spec.ports.iter_mut().flatten() {
            if p.node_port.unwrap_or(0) == 0
                && let Some(o) = old_spec
                    .ports
                    .iter()
                    .flatten()
                    .find(|o| o.port == p.port && o.protocol == p.protocol)
            {
                p.node_port = o.node_port;
            }
        }
        let key = format!(
            "{}/{}",
            new.metadata.namespace.as_deref().unwrap_or(""),
            new.metadata.name.as_deref().unwrap_or("")
        );
        if let Some(spec) = new.spec.as_mut() {
            allocate(spec, &key);
        }
    }

    fn validate(&self, obj: &Service) -> Vec<FieldError> {
        validate_spec(&obj.spec.clone().unwrap_or_default())
    }

    fn validate_update(&self, new: &Service, old: &Service) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let ips = |s: &Service| {
            s.spec
                .as_ref()
                .and_then(|s| s.cluster_ips.clone())
                .unwrap_or_default()
        };
        let (new_ips, old_ips) = (ips(new), ips(old));
        if let (Some(n), Some(o)) = (new_ips.first(), old_ips.first())
            && n != o
        {
            let rendered: Vec<String> = new_ips.iter().map(|ip| go_quote(ip)).collect();
            errs.push(FieldError::invalid(
                &FieldPath::new("spec").child("clusterIPs").index(0),
                Rendered(format!("[]string{{{}}}", rendered.join(", "))),
                "may not change once set",
            ));
        }
        errs
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![
            column(
                "Type",
                "string",
                "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer.",
                0,
            ),
            column(
                "Cluster-IP",
                "string",
                "clusterIP is the IP address of the service and is usually assigned randomly.",
                0,
            ),
            column(
                "External-IP",
                "string",
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
                0,
            ),
            column(
                "Port(s)",
                "string",
                "The list of ports that are exposed by this service.",
                0,
            ),
            age_column(),
            column(
                "Selector",
                "string",
                "Route service traffic to pods with label keys and values matching this selector.",
                1,
            ),
        ]
    }

    fn table_row(&self, obj: &Service, now: jiff::Timestamp) -> Vec<Value> {
        let spec = obj.spec.clone().unwrap_or_default();
        let cluster_ip = spec
            .cluster_ips
            .as_ref()
            .and_then(|ips| ips.first().cloned())
            .unwrap_or_else(|| "<none>".to_owned());
        let ports: Vec<String> = spec
            .ports
            .iter()
            .flatten()
            .map(|p| {
                let proto = p.protocol.as_deref().unwrap_or("");
                match p.node_port.filter(|n| *n > 0) {
                    Some(np) => format!("{}:{np}/{proto}", p.port),
                    None => format!("{}/{proto}", p.port),
                }
            })
            .collect();
        vec![
            text(spec.type_.clone().unwrap_or_default()),
            text(cluster_ip),
            text(external_ip(obj)),
            text(if ports.is_empty() {
                "<none>".to_owned()
            } else {
                ports.join(",")
            }),
            text(age(&obj.metadata, now)),
            text(format_labels(spec.selector.as_ref())),
        ]
    }
}

/// `getServiceExternalIP` (the server prints tables wide, so load-balancer lists are not cut).
fn external_ip(svc: &Service) -> String {
    let spec = svc.spec.clone().unwrap_or_default();
    let external = spec.external_ips.clone().unwrap_or_default();
    match spec.type_.as_deref().unwrap_or("") {
        "ClusterIP" | "NodePort" => {
            if external.is_empty() {
                "<none>".to_owned()
            } else {
                external.join(",")
            }
        }
        "LoadBalancer" => {
            let mut all: Vec<String> = svc
                .status
                .iter()
                .flat_map(|s| s.load_balancer.iter())
                .flat_map(|lb| lb.ingress.iter().flatten())
                .filter_map(|i| i.ip.clone().or_else(|| i.hostname.clone()))
                .collect();
            all.extend(external);
            if all.is_empty() {
                "<pending>".to_owned()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => spec.external_name.unwrap_or_default(),
        _ => "<unknown>".to_owned(),
    }
}

fn fnv1a(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The cluster IP a Service gets: `10.96.0.1` for `default/kubernetes`, else a hash of its key
/// inside `10.96.0.0/12`, avoiding the network, broadcast and `.1`/`.10` (kube-dns) addresses.
pub fn cluster_ip_for(key: &str) -> Ipv4Addr {
    if key == "default/kubernetes" {
        return Ipv4Addr::new(10, 96, 0, 1);
    }
    let size = 1u32 << 20;
    let mut offset = fnv1a(key) % size;
    if matches!(offset, 0 | 1 | 10) || offset == size - 1 {
        offset += 11;
    }
    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 96, 0, 0)) + offset)
}

/// `storage/alloc.go` in miniplane's hashing form: cluster IPs, IP families and node ports.
fn allocate(spec: &mut ServiceSpec, key: &str) {
    let type_ = spec.type_.clone().unwrap_or_default();
    if type_ == "ExternalName" {
        return;
    }
    let ip = match spec.cluster_ip.as_deref().unwrap_or("") {
        "" => cluster_ip_for(key).to_string(),
        ip => ip.to_owned(),
    };
    spec.cluster_ip = Some(ip.clone());
    if spec.cluster_ips.as_ref().is_none_or(Vec::is_empty) {
        spec.cluster_ips = Some(vec![ip]);
    }
    spec.ip_families
        .get_or_insert_with(|| vec!["IPv4".to_owned()]);
    spec.ip_family_policy
        .get_or_insert_with(|| "SingleStack".to_owned());
    if type_ == "NodePort"
        || (type_ == "LoadBalancer" && spec.allocate_load_balancer_node_ports != Some(false))
    {
        for (i, p) in spec.ports.iter_mut().flatten().enumerate() {
            if p.node_port.unwrap_or(0) == 0 {
                let n = fnv1a(&format!("{key}/{i}/{}", p.port)) % 2768;
                p.node_port = Some(30000 + i32::try_from(n).unwrap_or(0));
            }
        }
    }
}

fn go_render_port_key(p: &ServicePort) -> Rendered {
    Rendered(format!(
        "core.ServicePort{{Name:\"\", Protocol:{}, AppProtocol:(*string)(nil), Port:{}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}",
        go_quote(p.protocol.as_deref().unwrap_or("")),
        p.port
    ))
}

fn validate_spec(spec: &ServiceSpec) -> Vec<FieldError> {
    let path = FieldPath::new("spec");
    let mut errs = Vec::new();
    let type_ = spec.type_.clone().unwrap_or_default();
    let ports = spec.ports.clone().unwrap_or_default();
    let headless = spec.cluster_ip.as_deref() == Some("None");
    if type_ == "ExternalName" {
        if spec.cluster_ips.as_ref().is_some_and(|ips| !ips.is_empty()) {
            errs.push(FieldError::forbidden(
                &path.child("clusterIPs"),
                "may not be set for ExternalName services",
            ));
        }
        if spec.external_name.as_deref().unwrap_or("").is_empty() {
            errs.push(FieldError::required(&path.child("externalName"), ""));
        }
    } else if ports.is_empty() && !headless {
        errs.push(FieldError::required(&path.child("ports"), ""));
    }
    let ports_path = path.child("ports");
    let mut names = BTreeSet::new();
    let mut keys = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let pp = ports_path.index(i);
        let name = p.name.clone().unwrap_or_default();
        if ports.len() > 1 && name.is_empty() {
            errs.push(FieldError::required(&pp.child("name"), ""));
        } else if !name.is_empty() {
            for msg in is_dns1123_label(&name) {
                errs.push(FieldError::invalid(&pp.child("name"), name.as_str(), &msg));
            }
            if !names.insert(name.clone()) {
                errs.push(FieldError::duplicate(&pp.child("name"), name.as_str()));
            }
        }
        for msg in is_valid_port_num(p.port) {
            errs.push(FieldError::invalid(&pp.child("port"), p.port, &msg));
        }
        errs.extend(validate_protocol(
            p.protocol.as_deref(),
            &pp.child("protocol"),
        ));
        match &p.target_port {
            Some(IntOrString::Int(n)) => {
                for msg in is_valid_port_num(*n) {
                    errs.push(FieldError::invalid(&pp.child("targetPort"), *n, &msg));
                }
            }
            Some(IntOrString::String(s)) => {
                for msg in is_valid_port_name(s) {
                    errs.push(FieldError::invalid(
                        &pp.child("targetPort"),
                        s.as_str(),
                        &msg,
                    ));
                }
            }
            None => {}
        }
        if type_ == "ClusterIP" && p.node_port.unwrap_or(0) != 0 {
            errs.push(FieldError::forbidden(
                &pp.child("nodePort"),
                "may not be used when `type` is 'ClusterIP'",
            ));
        }
        if !keys.insert((p.protocol.clone(), p.port)) {
            errs.push(FieldError::duplicate(&pp, go_render_port_key(p)));
        }
    }
    match type_.as_str() {
        "" => errs.push(FieldError::required(&path.child("type"), "")),
        "ClusterIP" | "ExternalName" | "LoadBalancer" | "NodePort" => {}
        other => errs.push(FieldError::not_supported(
            &path.child("type"),
            other,
            &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
        )),
    }
    let affinity = spec.session_affinity.clone().unwrap_or_default();
    if !["ClientIP", "None"].contains(&affinity.as_str()) {
        errs.push(FieldError::not_supported(
            &path.child("sessionAffinity"),
            affinity.as_str(),
            &["ClientIP", "None"],
        ));
    }
    if let Some(selector) = &spec.selector {
        errs.extend(validate_labels(selector, &path.child("selector")));
    }
    for (i, ip) in spec.cluster_ips.iter().flatten().enumerate() {
        if ip != "None" && ip.parse::<IpAddr>().is_err() {
            errs.push(FieldError::invalid(
                &path.child("clusterIPs").index(i),
                ip.as_str(),
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use crate::strategy::typed::Typed;
    use serde_json::json;

    fn created(spec: Value) -> Value {
        let s = Typed(ServiceRules);
        let mut obj = json!({"metadata": {"name": "web", "namespace": "default", "creationTimestamp": "2024-01-01T00:00:00Z"}, "spec": spec});
        s.default(&mut obj).unwrap();
        s.prepare_for_create(&mut obj);
        obj
    }

    fn errs(spec: Value) -> Vec<String> {
        crate::strategy::messages(&Typed(ServiceRules).validate_create(&created(spec)))
    }

    #[test]
    fn defaults_and_allocation() {
        let obj = created(json!({"selector": {"app": "web"}, "ports": [{"port": 80}]}));
        let ip = cluster_ip_for("default/web").to_string();
        assert_eq!(
            obj["spec"],
            json!({
                "clusterIP": ip, "clusterIPs": [ip], "internalTrafficPolicy": "Cluster",
                "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
                "selector": {"app": "web"}, "sessionAffinity": "None", "type": "ClusterIP"
            })
        );
        assert_eq!(
            cluster_ip_for("default/kubernetes").to_string(),
            "10.96.0.1"
        );
        assert!(ip.starts_with("10.9") || ip.starts_with("10.1"));
        let np =
            created(json!({"type": "NodePort", "ports": [{"port": 80, "targetPort": "http"}]}));
        let node_port = np["spec"]["ports"][0]["nodePort"].as_i64().unwrap_or(0);
        assert!((30000..=32767).contains(&node_port));
        assert_eq!(np["spec"]["externalTrafficPolicy"], json!("Cluster"));
    }

    #[test]
    fn validation_rules() {
        assert!(errs(json!({"ports": [{"port": 80}]})).is_empty());
        assert_eq!(errs(json!({})), vec!["spec.ports: Required value"]);
        assert_eq!(
            errs(json!({"ports": [{"port": 80, "name": "a"}, {"port": 81}]})),
            vec!["spec.ports[1].name: Required value"]
        );
        assert_eq!(
            errs(json!({"ports": [{"port": 0}]})),
            vec![
                "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
                "spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive",
            ]
        );
        assert_eq!(
            errs(json!({"type": "Magic", "ports": [{"port": 1}]})),
            vec![
                "spec.type: Unsupported value: \"Magic\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""
            ]
        );
        assert_eq!(
            errs(json!({"ports": [{"port": 1, "nodePort": 30001}]})),
            vec!["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]
        );
        assert_eq!(
            errs(json!({"ports": [{"port": 1, "name": "a"}, {"port": 1, "name": "b"}]})).len(),
            1
        );
        assert_eq!(
            errs(json!({"type": "ExternalName"})),
            vec!["spec.externalName: Required value"]
        );
        let bad_name: Vec<String> = crate::strategy::messages(&Typed(ServiceRules).validate_create(&json!({"metadata": {"name": "1web", "namespace": "d"}, "spec": {"clusterIP": "None"}})));
        assert!(
            bad_name[0].starts_with("metadata.name: Invalid value: \"1web\": a DNS-1035 label"),
            "{bad_name:?}"
        );
    }

    #[test]
    fn updates_keep_allocations_and_cluster_ip_is_fixed() {
        let s = Typed(ServiceRules);
        let old = created(json!({"type": "NodePort", "ports": [{"port": 80}]}));
        let mut new = json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}});
        s.default(&mut new).unwrap();
        s.prepare_for_update(&mut new, &old);
        assert_eq!(new["spec"]["clusterIP"], old["spec"]["clusterIP"]);
        assert_eq!(
            new["spec"]["ports"][0]["nodePort"],
            old["spec"]["ports"][0]["nodePort"]
        );
        assert!(s.validate_update(&new, &old).is_empty());
        new["spec"]["clusterIPs"] = json!(["10.96.0.99"]);
        let errs: Vec<String> = crate::strategy::messages(&s.validate_update(&new, &old));
        assert_eq!(
            errs,
            vec![
                "spec.clusterIPs[0]: Invalid value: []string{\"10.96.0.99\"}: may not change once set"
            ]
        );
    }

    #[test]
    fn table_row() {
        let obj = created(
            json!({"type": "NodePort", "selector": {"app": "web"}, "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP", "name": "dns", "nodePort": 30053}]}),
        );
        let now: jiff::Timestamp = "2024-01-01T00:02:00Z".parse().unwrap();
        let row = Typed(ServiceRules).table_row(&obj, now);
        assert_eq!(row[0], json!("NodePort"));
        assert_eq!(row[2], json!("<none>"));
        assert_eq!(row[3], json!("80:30080/TCP,53:30053/UDP"));
        assert_eq!(row[4], json!("2m"));
        assert_eq!(row[5], json!("app=web"));
        let lb = created(json!({"type": "LoadBalancer", "ports": [{"port": 80}]}));
        assert_eq!(
            Typed(ServiceRules).table_row(&lb, now)[2],
            json!("<pending>")
        );
    }
}
