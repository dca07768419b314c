//! The simulated cloud: a small cloud of its own, outside the control plane, with an HTTP JSON
//! API on 127.0.0.1 and its state in a directory, and [`HttpCloud`], the cloud provider that
//! talks to it. It plays the part EC2, ELB and a VPC route table play for a cluster on AWS,
//! so the cloud-controller-manager's controllers (`k8s.io/cloud-provider`'s
//! `controllers/{node,nodelifecycle,route,service}`) have a cloud to work against.
//!
//! ```text
//!   miniplane cloud serve --data-dir D         cloud-controller-manager --cloud-config D/cloud-config.json
//!   Server::bind(D, 127.0.0.1:0, options)        HttpCloud::from_cloud_config(..)  (cloud::Interface)
//!        │  D/state.json  D/LOCK                       │
//!        │  D/cloud-config.json ───────────────────────┘  {"endpoint": "http://127.0.0.1:PORT"}
//!        ▼
//!   HTTP JSON API ◀──────────── HttpCloud ────────────── miniplane cloud instances|launch|fault ...
//! ```
//!
//! # The HTTP API
//!
//! | method and path | what it does | answer |
//! | --- | --- | --- |
//! | `GET /v1/instances[?name=N][&id=I]` | instances in launch order (terminated ones for an hour), filtered | 200 `{"items": [instance]}` |
//! | `POST /v1/instances` `{"name", "internal_ip"?, "instance_type"?}` | launch, unless a live instance has the name | 201 new, 200 the existing one |
//! | `GET /v1/instances/{name}` | the live instance of that name | 200, 404 |
//! | `POST /v1/instances/{name}/stop`, `/start` | stop or start it | 200, 404 |
//! | `DELETE /v1/instances/{name}` | terminate it | 200, 404 |
//! | `GET /v1/loadbalancers` | every load balancer | 200 `{"items": [lb]}` |
//! | `GET /v1/loadbalancers/{name}` | one (`state` provisioning or active) | 200, 404 |
//! | `PUT /v1/loadbalancers/{name}` `{"cluster", "service", "ports", "backends"}` | create (provisioning) or update | 201 new, 200 updated, 409 |
//! | `PUT /v1/loadbalancers/{name}/backends` `{"backends"}` | replace its backends | 200, 404 |
//! | `DELETE /v1/loadbalancers/{name}` | delete it, free its IP | 200, 404 |
//! | `GET /v1/routes[?cluster=C]` | routes (with `blackhole`) | 200 `{"items": [route]}` |
//! | `POST /v1/routes` `{"name", "cluster", "target_node", "destination_cidr"}` | create | 201 new, 200 the same exists, 409 |
//! | `DELETE /v1/routes/{name}` | delete | 200, 404 |
//! | `GET /v1/faults` | the faults in force | 200 `{"items": [fault]}` |
//! | `PUT /v1/faults` `{"api", "fail_fraction", "delay_ms"}` | set the fault of a group | 200 the faults |
//! | `DELETE /v1/faults[?api=A]` | clear one group's fault, or all | 200 the faults |
//!
//! Every error is `{"message": "..."}`: 400 a bad request, 404 not found, 405 a method a path
//! does not take, 409 a conflict or an exhausted address pool, 500 the state could not be
//! saved (nothing changed), 503 an injected fault. The faults of a group (`faults.rs`) apply
//! to every call of its paths, the admin calls too; `/v1/faults` is never faulted.
//!
//! # Files
//!
//! | file | concept |
//! | --- | --- |
//! | `state.rs` | `CloudState`: the whole cloud as one value, and its JSON form |
//! | `instances.rs`, `load_balancers.rs`, `routes.rs`, `faults.rs` | the operations on it, one concept each, sans-IO |
//! | `address_pool.rs` | the address ranges IPs are taken from |
//! | `state_file.rs` | `state.json` written atomically, the directory's `LOCK` |
//! | `api.rs` | the wire format: request bodies, `{"items"}`, `{"message"}`, the statuses |
//! | `server.rs` | [`Server`]: bind the directory and the port, run until shut down |
//! | `handlers.rs` | the router, the handlers, the fault gate, errors as JSON |
//! | `shared.rs` | the state under its lock: reads, and writes saved before they are answered |
//! | `client.rs`, `provider.rs` | [`HttpCloud`]: the transport and admin calls; the provider interface |
//!
//! Simplifications (`docs/cloud.md` has the whole list): no authentication; no traffic flows
//! through a load balancer or a route; one region; all times are the wall clock of the one
//! machine.

mod address_pool;
mod api;
mod client;
mod error;
mod faults;
mod handlers;
mod instance_index;
mod instances;
mod load_balancers;
mod provider;
mod routes;
mod server;
mod shared;
mod state;
mod state_file;

pub use client::{DEFAULT_PROVISIONING_WAIT, DEFAULT_TIMEOUT, HttpCloud};
pub use error::{Error, Result};
pub use faults::{Fault, FaultApi};
pub use instances::{
    CloudInstance, DEFAULT_INSTANCE_TYPE, InstanceState, PROVIDER_NAME, REGION, ZONES,
    instance_id_from_provider_id, provider_id,
};
pub use load_balancers::{CloudLoadBalancer, LoadBalancerService, LoadBalancerState};
pub use routes::CloudRoute;
pub use server::{DEFAULT_LB_PROVISIONING_DELAY, Server, SimOptions};
pub use state_file::{CLOUD_CONFIG_FILE, STATE_FILE};
