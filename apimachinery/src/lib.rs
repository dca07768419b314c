//! Kubernetes' small building blocks, shared by every miniplane component: what Kubernetes
//! keeps in `k8s.io/apimachinery` (plus pod QoS, from `k8s.io/component-helpers`).
//!
//! ```text
//!   labels          label selectors: parsing, matching, LabelSelector → selector   pkg/labels
//!   resource        resource quantities (500m, 1Gi)                               pkg/api/resource
//!   validation      name, label and key syntax, with Kubernetes' messages         pkg/util/validation
//!   duration        Go durations (flags), ages as kubectl prints them             pkg/util/duration
//!   object_key      namespace/name keys, references to objects                    client-go cache keys
//!   event_type      an Event's type: Normal or Warning                            core/v1 EventType*
//!   qos             a pod's quality-of-service class                              component-helpers
//!   fmt             Go's %q, as Kubernetes' messages quote values
//!   merge_patch     the JSON merge patch from one version of an object to another  pkg/util/jsonmergepatch
//!   ephemeral_container  an ephemeral container as a Container                  EphemeralContainerCommon
//!   pod_log_options PodLogOptions from a pods/log query, validated               core/v1 PodLogOptions,
//!                                                                                  ValidatePodLogOptions
//!   httpstream      exec/attach/port-forward wire protocols: WebSocket channels,  pkg/util/httpstream,
//!                   SPDY/3.1 frames and sessions, SPDY tunnelled in WebSocket      kubelet cri/streaming
//!   cron            CronJob schedules: robfig/cron's syntax, activation times      robfig/cron/v3
//!   net             IPv4 CIDR ranges: cluster and node pod CIDRs, pod IPs           k8s.io/utils/net
//!   pki             the cluster's CA, the certificates it issues, CSR signing,     kubeadm pkiutil,
//!                   client-chain checks, the API server's TLS configuration        client-go util/cert
//! ```
//!
//! `cron` is not apimachinery's in Kubernetes: the API server's CronJob validation and the
//! CronJob controller both use the vendored `github.com/robfig/cron/v3`; here both take it
//! from this crate. Nor is `pki`: kubeadm's CA and kube-apiserver's x509 authenticator are
//! shared here because the API server serves and verifies with it, the cluster launcher lays it
//! out, and the controller-manager's CSR signer issues certificates with it.
//!
//! The crate sits at the bottom of the workspace: it depends on no other miniplane crate, and
//! components take these types from here rather than from each other.

pub mod cron;
pub mod duration;
pub mod ephemeral_container;
pub mod event_type;
pub mod fmt;
pub mod hash;
pub mod httpstream;
pub mod labels;
pub mod merge_patch;
pub mod net;
pub mod object_key;
pub mod pki;
pub mod pod_log_options;
pub mod qos;
pub mod resource;
pub mod validation;

pub use event_type::EventType;
pub use labels::Selector;
pub use net::Ipv4Cidr;
pub use object_key::{ObjectKey, ObjectRef};
pub use resource::quantity::Quantity;
