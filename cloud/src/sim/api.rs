//! The simulated cloud's wire format: the request bodies its HTTP API takes, the list and
//! error bodies it answers with, and [`Rejection`], the cloud's "no" with its HTTP status. Both
//! the server (`server.rs`) and the client (`client.rs`) use these types, so they cannot
//! drift apart. The answered objects themselves ([`CloudInstance`](super::CloudInstance),
//! [`CloudLoadBalancer`](super::CloudLoadBalancer), [`CloudRoute`](super::CloudRoute),
//! [`Fault`](super::Fault)) live with their concept.
//!
//! A real cloud's API has the same shape: EC2 answers `InvalidInstanceID.NotFound` with a
//! status and a message, and a provider passes the message on. Every error here is
//! `{"message": "..."}` with a fitting status (400 bad request, 404 not found, 409 conflict or
//! exhausted pool, 503 injected fault, 500 the cloud could not save its state).

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::LoadBalancerPort;

use super::load_balancers::LoadBalancerService;

/// `POST /v1/instances`: launch an instance named `name` (idempotent by name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LaunchRequest {
    /// The instance's (and so the node's) name.
    pub name: String,
    /// Its InternalIP; `None`: the lowest free address of 172.31.0.0/16.
    #[serde(default)]
    pub internal_ip: Option<Ipv4Addr>,
    /// Its type; `None`: [`DEFAULT_INSTANCE_TYPE`](super::DEFAULT_INSTANCE_TYPE).
    #[serde(default)]
    pub instance_type: Option<String>,
}

/// `PUT /v1/loadbalancers/{name}`: create or update a load balancer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EnsureLoadBalancerRequest {
    /// The cluster it serves.
    pub cluster: String,
    /// The Service it belongs to.
    pub service: LoadBalancerService,
    /// Its ports.
    pub ports: Vec<LoadBalancerPort>,
    /// The node names it forwards to.
    pub backends: Vec<String>,
}

/// `PUT /v1/loadbalancers/{name}/backends`: replace the backends of an existing one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct UpdateBackendsRequest {
    /// The node names it forwards to.
    pub backends: Vec<String>,
}

/// `POST /v1/routes`: create a route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CreateRouteRequest {
    /// Its name, `<cluster>-<name hint>`.
    pub name: String,
    /// The cluster it belongs to.
    pub cluster: String,
    /// The node traffic goes to.
    pub target_node: String,
    /// The destination, e.g. `10.244.1.0/24`.
    pub destination_cidr: String,
}

/// The body of every list answer: `{"items": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct List<T> {
    /// The objects, in the cloud's order.
    pub items: Vec<T>,
}

/// The body of every error answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ErrorBody {
    /// What went wrong, for a person.
    pub message: String,
}

/// The cloud refuses a call: a kind (which gives the HTTP status) and a message for a person.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Rejection {
    /// 400: the request is malformed or names something invalid.
    #[error("{0}")]
    Invalid(String),
    /// 404: the named object does not exist.
    #[error("{0}")]
    NotFound(String),
    /// 409: the request conflicts with what exists, or a pool (of addresses) is exhausted.
    #[error("{0}")]
    Conflict(String),
    /// 503: an injected fault.
    #[error("{0}")]
    Unavailable(String),
    /// 500: the cloud could not save its state; nothing changed.
    #[error("{0}")]
    Internal(String),
}

impl Rejection {
    /// The HTTP status it is answered with.
    pub(crate) fn status(&self) -> u16 {
        match self {
            Rejection::Invalid(_) => 400,
            Rejection::NotFound(_) => 404,
            Rejection::Conflict(_) => 409,
            Rejection::Internal(_) => 500,
            Rejection::Unavailable(_) => 503,
        }
    }
}

/// Whether `name` can name an instance, a load balancer or a route: an RFC 1123 subdomain
/// (what a node name is), so that it is safe in a URL path and a table.
pub(crate) fn check_name(what: &str, name: &str) -> Result<(), Rejection> {
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if valid {
        Ok(())
    } else {
        Err(Rejection::Invalid(format!(
            "invalid {what} name {name:?}: lowercase letters, digits, '-' and '.', at most 253 characters"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_rfc_1123_subdomains() {
        for ok in ["node-1", "a", "kind-worker.local", "a3f2a9c1e7d4b4e8"] {
            assert_eq!(check_name("instance", ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "Node",
            "a b",
            "-a",
            "a-",
            "a..b",
            "a/b",
            &"x".repeat(64),
        ] {
            let err = check_name("instance", bad).expect_err(bad);
            assert_eq!(err.status(), 400);
            assert!(
                err.to_string().starts_with("invalid instance name"),
                "{err}"
            );
        }
    }
}
