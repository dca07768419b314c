//! The cloud under a cluster: the cloud-provider interface (`k8s.io/cloud-provider`'s
//! `cloud.go`) and a simulated cloud that implements it (`docs/cloud.md`).
//!
//! | file | concept | Kubernetes counterpart |
//! | --- | --- | --- |
//! | `provider.rs` | [`Interface`], [`InstancesV2`], [`LoadBalancer`], [`Routes`], [`CloudError`] | `k8s.io/cloud-provider/cloud.go` |
//! | `sim/` | [`sim::Server`]: a cloud of its own, an HTTP JSON API on 127.0.0.1 with its state in a directory | a cloud's API (EC2, ELB, VPC route tables) |
//! | `sim/client.rs`, `sim/provider.rs` | [`sim::HttpCloud`]: the provider that talks to it | an in-tree or external provider (`legacy-cloud-providers/aws`) |
//!
//! The simulated cloud is a system outside the control plane, as a real cloud is: the
//! cloud-controller-manager reaches it only through [`Interface`], and [`sim::HttpCloud`]
//! reaches it only over HTTP, so a provider for a real cloud could take its place.
//!
//! Like `store`, this crate knows nothing of the rest of the workspace, nor of the Kubernetes
//! API types: a Node is a [`NodeRef`], a Service a [`ServiceRef`].

mod provider;
pub mod sim;

pub use provider::{
    CloudError, InstanceMetadata, InstancesV2, Interface, LoadBalancer, LoadBalancerIngress,
    LoadBalancerPort, LoadBalancerStatus, NodeAddress, NodeRef, Route, Routes, ServiceRef,
    default_load_balancer_name,
};
