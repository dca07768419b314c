//! core/v1 Endpoints (`SetDefaults_Endpoints`, `ValidateEndpoints` in
//! `pkg/apis/core/validation/validation.go`, and `printEndpoints`/`formatEndpoints`).
//!
//! The ENDPOINTS column lists at most three `ip:port` pairs, then `+ N more...`.

use super::field::FieldPath;
use super::pod_spec::validate_protocol;
use super::table::{age_column, column, text};
use super::typed::{KindRules, age};
use super::{FieldError, TableColumn};
use apimachinery::validation::{is_dns1123_label, is_valid_port_num};
use k8s_openapi::api::core::v1::Endpoints;
use serde_json::Value;
use std::net::IpAddr;

/// The Endpoints rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct EndpointsRules;

impl KindRules for EndpointsRules {
    type Object = Endpoints;

    fn set_defaults(&self, obj: &mut Endpoints) {
        for subset in obj.subsets.iter_mut().flatten() {
            for p in subset.ports.iter_mut().flatten() {
                if p.protocol.as_deref().unwrap_or("").is_empty() {
                    p.protocol = Some("TCP".to_owned());
                }
            }
        }
    }

    fn validate(&self, obj: &Endpoints) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for (i, subset) in obj.subsets.iter().flatten().enumerate() {
            let path = FieldPath::new("subsets").index(i);
            let addresses = [
                ("addresses", subset.addresses.as_deref().unwrap_or_default()),
                (
                    "notReadyAddresses",
                    subset.not_ready_addresses.as_deref().unwrap_or_default(),
                ),
            ];
            for (field, list) in addresses {
                for (j, a) in list.iter().enumerate() {
                    if a.ip.parse::<IpAddr>().is_err() {
                        errs.push(FieldError::invalid(
                            &path.child(field).index(j).child("ip"),
                            a.ip.as_str(),
                            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                        ));
                    }
                }
            }
            let ports = subset.ports.as_deref().unwrap_or_default();
            for (j, p) in ports.iter().enumerate() {
                let pp = path.child("ports").index(j);
                let name = p.name.as_deref().unwrap_or("");
                if ports.len() > 1 && name.is_empty() {
                    errs.push(FieldError::required(&pp.child("name"), ""));
                } else if !name.is_empty() {
                    for msg in is_dns1123_label(name) {
                        errs.push(FieldError::invalid(&pp.child("name"), name, &msg));
                    }
                }
                for msg in is_valid_port_num(p.port) {
                    errs.push(FieldError::invalid(&pp.child("port"), p.port, &msg));
                }
                errs.extend(validate_protocol(
                    p.protocol.as_deref(),
                    &pp.child("protocol"),
                ));
            }
        }
        errs
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![
            column("Endpoints", "string", "Endpoints of the service", 0),
            age_column(),
        ]
    }

    fn table_row(&self, obj: &Endpoints, now: jiff::Timestamp) -> Vec<Value> {
        vec![text(format_endpoints(obj)), text(age(&obj.metadata, now))]
    }
}

/// `formatEndpoints`: up to three `ip:port` (or bare IPs for port-less subsets), then
/// `+ N more...`; `<none>` without subsets.
pub fn format_endpoints(ep: &Endpoints) -> String {
    const MAX: usize = 3;
    let subsets = ep.subsets.as_deref().unwrap_or_default();
    if subsets.is_empty() {
        return "<none>".to_owned();
    }
    let mut list: Vec<String> = Vec::new();
    let mut count = 0usize;
    let mut more = false;
    for ss in subsets {
        let addrs = ss.addresses.as_deref().unwrap_or_default();
        let ports = ss.ports.as_deref().unwrap_or_default();
        let mut push = |entry: String, list: &mut Vec<String>| {
            if list.len() == MAX {
                more = true;
            } else {
                list.push(entry);
            }
        };
        if ports.is_empty() {
            count += addrs.len();
            for a in addrs {
                push(a.ip.clone(), &mut list);
            }
            continue;
        }
        for p in ports {
            count += addrs.len();
            for a in addrs {
                let host = if a.ip.contains(':') {
                    format!("[{}]", a.ip)
                } else {
                    a.ip.clone()
                };
                push(format!("{host}:{}", p.port), &mut list);
            }
        }
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", count - MAX)
    } else if joined.is_empty() {
        "<none>".to_owned()
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use crate::strategy::typed::Typed;
    use serde_json::json;

    #[test]
    fn endpoints_column() {
        let s = Typed(EndpointsRules);
        let now: jiff::Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        let ep = |ips: &[&str]| {
            let addresses: Vec<Value> = ips.iter().map(|ip| json!({"ip": ip})).collect();
            json!({"metadata": {"name": "web"}, "subsets": [{"addresses": addresses, "ports": [{"port": 8080}]}]})
        };
        assert_eq!(
            s.table_row(&ep(&["10.0.0.1", "10.0.0.2"]), now)[0],
            json!("10.0.0.1:8080,10.0.0.2:8080")
        );
        assert_eq!(
            s.table_row(
                &ep(&["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"]),
                now
            )[0],
            json!("10.0.0.1:8080,10.0.0.2:8080,10.0.0.3:8080 + 2 more...")
        );
        assert_eq!(
            s.table_row(&json!({"metadata": {"name": "web"}}), now)[0],
            json!("<none>")
        );
    }

    #[test]
    fn defaults_and_validation() {
        let s = Typed(EndpointsRules);
        let mut obj = json!({"metadata": {"name": "web", "namespace": "d"}, "subsets": [{"addresses": [{"ip": "nope"}], "ports": [{"port": 80}]}]});
        s.default(&mut obj).unwrap();
        assert_eq!(obj["subsets"][0]["ports"][0]["protocol"], json!("TCP"));
        let errs: Vec<String> = crate::strategy::messages(&s.validate_create(&obj));
        assert_eq!(
            errs,
            vec![
                "subsets[0].addresses[0].ip: Invalid value: \"nope\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
            ]
        );
    }
}
