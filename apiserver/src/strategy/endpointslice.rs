//! discovery.k8s.io/v1 EndpointSlice: `pkg/registry/discovery/endpointslice/strategy.go`
//! (generation), `pkg/apis/discovery/v1/defaults.go` (`SetDefaults_EndpointPort`),
//! `pkg/apis/discovery/validation/validation.go` (`ValidateEndpointSliceCreate`/`Update`) and
//! `printEndpointSlice` of `pkg/printers/internalversion/printers.go`.
//!
//! ```text
//!   addressType   required, one of FQDN, IPv4, IPv6; immutable
//!   endpoints     at most 1000; each 1..100 addresses valid for the type (IPs: no loopback,
//!                 unspecified or link-local), nodeName a DNS subdomain, hostname a DNS label
//!   ports         at most 100; names unique (DNS labels), protocol TCP, UDP or SCTP
//!   generation    1 on create; +1 when anything but metadata (or the labels) changes
//!   table         NAME ADDRESSTYPE PORTS ENDPOINTS AGE (at most three each, `<unset>` if none)
//! ```

use super::field::{FieldPath, validate_immutable};
use super::meta::validate_labels;
use super::table::{age_column, column, text};
use super::typed::{KindRules, age};
use super::{FieldError, TableColumn};
use apimachinery::fmt::go_quote;
use apimachinery::validation::{is_dns1123_label, is_dns1123_subdomain, is_qualified_name};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};
use serde_json::Value;
use std::net::IpAddr;

/// `maxEndpoints`: endpoints per slice.
pub const MAX_ENDPOINTS: usize = 1000;
/// `maxAddresses`: addresses per endpoint.
pub const MAX_ADDRESSES: usize = 100;
/// `maxPorts`: ports per slice.
pub const MAX_PORTS: usize = 100;
/// `maxTopologyLabels`: entries of `deprecatedTopology`.
const MAX_TOPOLOGY_LABELS: usize = 16;
/// The address types a slice may have (`supportedAddressTypes`), as Go lists them sorted.
const ADDRESS_TYPES: [&str; 3] = ["FQDN", "IPv4", "IPv6"];
/// `supportedPortProtocols`, sorted.
const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];

/// The EndpointSlice rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct EndpointSliceRules;

impl KindRules for EndpointSliceRules {
    type Object = EndpointSlice;

    fn set_defaults(&self, obj: &mut EndpointSlice) {
        for port in obj.ports.iter_mut().flatten() {
            port.name.get_or_insert_with(String::new);
            port.protocol.get_or_insert_with(|| "TCP".to_owned());
        }
    }

    fn prepare_for_update(&self, new: &mut EndpointSlice, old: &EndpointSlice) {
        let changed = new.address_type != old.address_type
            || new.endpoints != old.endpoints
            || new.ports != old.ports
            || new.metadata.labels != old.metadata.labels;
        let generation = old.metadata.generation.unwrap_or(0);
        new.metadata.generation = Some(if changed { generation + 1 } else { generation });
    }

    fn validate(&self, obj: &EndpointSlice) -> Vec<FieldError> {
        let mut errs = validate_address_type(&obj.address_type);
        errs.extend(validate_endpoints(&obj.endpoints, &obj.address_type));
        errs.extend(validate_ports(obj.ports.as_deref().unwrap_or_default()));
        errs
    }

    fn validate_update(&self, new: &EndpointSlice, old: &EndpointSlice) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(validate_immutable(
            &new.address_type,
            &old.address_type,
            || go_quote(&new.address_type),
            &FieldPath::new("addressType"),
        ));
        errs
    }

    fn table_columns(&self) -> Vec<TableColumn> {
        vec![
            column(
                "AddressType",
                "string",
                "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name.",
                0,
            ),
            column(
                "Ports",
                "string",
                "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. When ports is empty, it indicates that there are no defined ports. When a port is defined with a nil port value, it indicates \"all ports\". Each slice may include a maximum of 100 ports.",
                0,
            ),
            column(
                "Endpoints",
                "string",
                "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.",
                0,
            ),
            age_column(),
        ]
    }

    fn table_row(&self, obj: &EndpointSlice, now: jiff::Timestamp) -> Vec<Value> {
        vec![
            text(obj.address_type.as_str()),
            text(format_ports(obj.ports.as_deref().unwrap_or_default())),
            text(format_endpoints(&obj.endpoints)),
            text(age(&obj.metadata, now)),
        ]
    }
}

fn validate_address_type(address_type: &str) -> Vec<FieldError> {
    let path = FieldPath::new("addressType");
    if address_type.is_empty() {
        vec![FieldError::required(&path, "")]
    } else if !ADDRESS_TYPES.contains(&address_type) {
        vec![FieldError::not_supported(
            &path,
            address_type,
            &ADDRESS_TYPES,
        )]
    } else {
        Vec::new()
    }
}

fn validate_endpoints(endpoints: &[Endpoint], address_type: &str) -> Vec<FieldError> {
    let path = FieldPath::new("endpoints");
    if endpoints.len() > MAX_ENDPOINTS {
        return vec![FieldError::too_many(&path, endpoints.len(), MAX_ENDPOINTS)];
    }
    let mut errs = Vec::new();
    for (i, endpoint) in endpoints.iter().enumerate() {
        let idx = path.index(i);
        let addresses = idx.child("addresses");
        if endpoint.addresses.is_empty() {
            errs.push(FieldError::required(
                &addresses,
                "must contain at least 1 address",
            ));
        } else if endpoint.addresses.len() > MAX_ADDRESSES {
            errs.push(FieldError::too_many(
                &addresses,
                endpoint.addresses.len(),
                MAX_ADDRESSES,
            ));
        }
        for (j, address) in endpoint.addresses.iter().enumerate() {
            errs.extend(validate_address(address, address_type, &addresses, j));
        }
        if let Some(node) = &endpoint.node_name {
            for msg in is_dns1123_subdomain(node) {
                errs.push(FieldError::invalid(&idx.child("nodeName"), node, &msg));
            }
        }
        let topology_path = idx.child("deprecatedTopology");
        if let Some(topology) = &endpoint.deprecated_topology {
            if topology.len() > MAX_TOPOLOGY_LABELS {
                errs.push(FieldError::too_many(
                    &topology_path,
                    topology.len(),
                    MAX_TOPOLOGY_LABELS,
                ));
            }
            errs.extend(validate_labels(topology, &topology_path));
        }
        if let Some(hostname) = &endpoint.hostname {
            for msg in is_dns1123_label(hostname) {
                errs.push(FieldError::invalid(&idx.child("hostname"), hostname, &msg));
            }
        }
    }
    errs
}

/// One address of an endpoint, by the slice's type (unknown types are not checked).
fn validate_address(
    address: &str,
    address_type: &str,
    addresses: &FieldPath,
    j: usize,
) -> Vec<FieldError> {
    let at = addresses.index(j);
    let want_v6 = match address_type {
        "IPv4" => false,
        "IPv6" => true,
        "FQDN" => return validate_fqdn(address, &at),
        _ => return Vec::new(),
    };
    let Ok(ip) = address.parse::<IpAddr>() else {
        return vec![FieldError::invalid(
            &at,
            address,
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        )];
    };
    let mut errs = Vec::new();
    // Go's `netutils.IsIPv4String` takes IPv4-mapped IPv6 addresses for IPv4.
    let is_v4 = ip.to_canonical().is_ipv4();
    if want_v6 == is_v4 {
        let family = if want_v6 { "IPv6" } else { "IPv4" };
        errs.push(FieldError::invalid(
            addresses,
            address,
            &format!("must be an {family} address"),
        ));
    }
    errs.extend(validate_endpoint_ip(address, ip, &at));
    errs
}

/// `ValidateEndpointIP`: no unspecified, loopback or link-local addresses.
fn validate_endpoint_ip(address: &str, ip: IpAddr, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ip = ip.to_canonical();
    let (unspecified, loopback, link_local, link_local_multicast) = match ip {
        IpAddr::V4(v4) => (
            v4.is_unspecified(),
            v4.is_loopback(),
            v4.is_link_local(),
            v4.octets()[..3] == [224, 0, 0],
        ),
        IpAddr::V6(v6) => (
            v6.is_unspecified(),
            v6.is_loopback(),
            v6.segments()[0] & 0xffc0 == 0xfe80,
            v6.segments()[0] & 0xff0f == 0xff02,
        ),
    };
    if unspecified {
        errs.push(FieldError::invalid(
            path,
            address,
            &format!("may not be unspecified ({address})"),
        ));
    }
    if loopback {
        errs.push(FieldError::invalid(
            path,
            address,
            "may not be in the loopback range (127.0.0.0/8, ::1/128)",
        ));
    }
    if link_local {
        errs.push(FieldError::invalid(
            path,
            address,
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)",
        ));
    }
    if link_local_multicast {
        errs.push(FieldError::invalid(
            path,
            address,
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        ));
    }
    errs
}

/// `IsFullyQualifiedDomainName`.
fn validate_fqdn(name: &str, path: &FieldPath) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    let errs = is_dns1123_subdomain(name);
    if !errs.is_empty() {
        return vec![FieldError::invalid(path, name, &errs.join(","))];
    }
    if name.split('.').count() < 2 {
        return vec![FieldError::invalid(
            path,
            name,
            "should be a domain with at least two segments separated by dots",
        )];
    }
    for label in name.split('.') {
        let errs = is_dns1123_label(label);
        if !errs.is_empty() {
            return vec![FieldError::invalid(path, label, &errs.join(","))];
        }
    }
    Vec::new()
}

fn validate_ports(ports: &[EndpointPort]) -> Vec<FieldError> {
    let path = FieldPath::new("ports");
    if ports.len() > MAX_PORTS {
        return vec![FieldError::too_many(&path, ports.len(), MAX_PORTS)];
    }
    let mut errs = Vec::new();
    let mut names: Vec<&str> = Vec::with_capacity(ports.len());
    for (i, port) in ports.iter().enumerate() {
        let idx = path.index(i);
        let name = port.name.as_deref().unwrap_or("");
        if !name.is_empty() {
            for msg in is_dns1123_label(name) {
                errs.push(FieldError::invalid(&idx.child("name"), name, &msg));
            }
        }
        if names.contains(&name) {
            errs.push(FieldError::duplicate(&idx.child("name"), name));
        } else {
            names.push(name);
        }
        match port.protocol.as_deref() {
            None => errs.push(FieldError::required(&idx.child("protocol"), "")),
            Some(p) if !PROTOCOLS.contains(&p) => errs.push(FieldError::not_supported(
                &idx.child("protocol"),
                p,
                &PROTOCOLS,
            )),
            Some(_) => {}
        }
        if let Some(app) = &port.app_protocol {
            for msg in is_qualified_name(app) {
                errs.push(FieldError::invalid(&idx.child("appProtocol"), app, &msg));
            }
        }
    }
    errs
}

/// `listWithMoreString`: up to three items, then `+ N more...`; `<unset>` for none.
fn list_with_more(list: &[String], count: usize) -> String {
    const MAX: usize = 3;
    let shown = &list[..list.len().min(MAX)];
    let joined = shown.join(",");
    if count > MAX {
        format!("{joined} + {} more...", count - MAX)
    } else if joined.is_empty() {
        "<unset>".to_owned()
    } else {
        joined
    }
}

/// `formatDiscoveryPorts`: each port's number, else its name, else `*`.
pub fn format_ports(ports: &[EndpointPort]) -> String {
    let list: Vec<String> = ports
        .iter()
        .map(|p| match (p.port, &p.name) {
            (Some(n), _) => n.to_string(),
            (None, Some(name)) => name.clone(),
            (None, None) => "*".to_owned(),
        })
        .collect();
    list_with_more(&list, ports.len())
}

/// `formatDiscoveryEndpoints`: every address of every endpoint.
pub fn format_endpoints(endpoints: &[Endpoint]) -> String {
    let list: Vec<String> = endpoints
        .iter()
        .flat_map(|e| e.addresses.iter().cloned())
        .collect();
    let count = list.len();
    list_with_more(&list, count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;
    use crate::strategy::messages;
    use crate::strategy::typed::Typed;
    use serde_json::json;

    fn slice(address_type: &str, endpoints: Value, ports: Value) -> Value {
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": "web-abcde", "namespace": "default"},
               "addressType": address_type, "endpoints": endpoints, "ports": ports})
    }

    fn errors(obj: &Value) -> Vec<String> {
        let s = Typed(EndpointSliceRules);
        let mut obj = obj.clone();
        s.default(&mut obj).unwrap();
        messages(&s.validate_create(&obj))
    }

    #[test]
    fn defaults_name_and_protocol_of_ports() {
        let s = Typed(EndpointSliceRules);
        let mut obj = slice("IPv4", json!([]), json!([{"port": 80}]));
        s.default(&mut obj).unwrap();
        assert_eq!(
            obj["ports"][0],
            json!({"name": "", "port": 80, "protocol": "TCP"})
        );
    }

    #[test]
    fn validation_words_errors_as_kubernetes() {
        let ok = slice(
            "IPv4",
            json!([{"addresses": ["10.244.0.5"], "nodeName": "node-1"}]),
            json!([{"name": "http", "port": 80}]),
        );
        assert_eq!(errors(&ok), Vec::<String>::new());
        assert_eq!(
            errors(&slice("", json!([]), json!([]))),
            vec!["addressType: Required value"]
        );
        assert_eq!(
            errors(&slice("IP", json!([]), json!([]))),
            vec![
                "addressType: Unsupported value: \"IP\": supported values: \"FQDN\", \"IPv4\", \"IPv6\""
            ]
        );
        assert_eq!(
            errors(&slice(
                "IPv4",
                json!([{"addresses": []}, {"addresses": ["nope", "127.0.0.1", "fd00::1"]}]),
                json!([])
            )),
            vec![
                "endpoints[0].addresses: Required value: must contain at least 1 address",
                "endpoints[1].addresses[0]: Invalid value: \"nope\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                "endpoints[1].addresses[1]: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
                "endpoints[1].addresses: Invalid value: \"fd00::1\": must be an IPv4 address",
            ]
        );
        assert_eq!(
            errors(&slice(
                "IPv4",
                json!([]),
                json!([{"name": "http", "port": 80}, {"name": "http", "port": 81, "protocol": "ICMP"}])
            )),
            vec![
                "ports[1].name: Duplicate value: \"http\"",
                "ports[1].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            ]
        );
        let many: Vec<Value> = (0..1001)
            .map(|i| json!({"addresses": [format!("10.0.{}.{}", i / 250, i % 250 + 1)]}))
            .collect();
        assert_eq!(
            errors(&slice("IPv4", json!(many), json!([]))),
            vec!["endpoints: Too many: 1001: must have at most 1000 items"]
        );
        assert_eq!(
            errors(&slice(
                "FQDN",
                json!([{"addresses": ["example"]}]),
                json!([])
            )),
            vec![
                "endpoints[0].addresses[0]: Invalid value: \"example\": should be a domain with at least two segments separated by dots"
            ]
        );
    }

    #[test]
    fn address_type_is_immutable_and_changes_bump_the_generation() {
        let s = Typed(EndpointSliceRules);
        let mut old = slice("IPv4", json!([]), json!([]));
        old["metadata"]["generation"] = json!(1);
        let mut new = slice("IPv6", json!([]), json!([]));
        new["metadata"]["generation"] = json!(1);
        let (errs, _) = s.admit_update(&mut new, &old, true).unwrap();
        assert_eq!(
            messages(&errs),
            vec!["addressType: Invalid value: \"IPv6\": field is immutable"]
        );
        assert_eq!(new["metadata"]["generation"], json!(2));
        let mut same = old.clone();
        s.admit_update(&mut same, &old, true).unwrap();
        assert_eq!(same["metadata"]["generation"], json!(1));
    }

    #[test]
    fn table_cells_as_kubectl_prints_them() {
        let s = Typed(EndpointSliceRules);
        let now: jiff::Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        let obj = slice(
            "IPv4",
            json!([{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2"]}, {"addresses": ["10.0.0.3"]}, {"addresses": ["10.0.0.4"]}]),
            json!([{"name": "http", "port": 80}]),
        );
        let row = s.table_row(&obj, now);
        assert_eq!(row[0], json!("IPv4"));
        assert_eq!(row[1], json!("80"));
        assert_eq!(row[2], json!("10.0.0.1,10.0.0.2,10.0.0.3 + 1 more..."));
        let empty = s.table_row(&slice("IPv4", json!([]), json!([])), now);
        assert_eq!(empty[1], json!("<unset>"));
        assert_eq!(empty[2], json!("<unset>"));
    }
}
