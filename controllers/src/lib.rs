//! # controllers — the decisions of kube-controller-manager
//!
//! This crate is the **sans-IO core** of miniplane's controller-manager: plain synchronous
//! functions from a snapshot of cached objects (and an injected `now`) to a list of
//! [`Action`]s. Nothing here performs I/O or reads a clock, so every decision can be unit
//! tested and replayed step by step. The async shell (informers → workqueue → sync → API
//! writes, in the `client` crate's machinery) only moves data between the API server and
//! these functions.
//!
//! | module | Kubernetes |
//! | --- | --- |
//! | [`deployment`] | `pkg/controller/deployment/` (rolling update, recreate, rollback, progress) |
//! | [`replicaset`] | `pkg/controller/replicaset/replica_set.go` + `controller_utils.go` |
//! | [`expectations`] | `ControllerExpectations` / `UIDTrackingControllerExpectations` |
//! | [`controller_ref`] | `pkg/controller/controller_ref_manager.go` (adopt / release) |
//! | [`endpointslice`] | `pkg/controller/endpointslice/` + `staging/src/k8s.io/endpointslice/reconciler.go` |
//! | [`endpoint`] | `pkg/controller/endpoint/endpoints_controller.go` |
//! | [`garbage_collector`] | `pkg/controller/garbagecollector/` (owner graph, propagation) |
//! | [`job`] | `pkg/controller/job/` (completions, Indexed Jobs, back-off, pod failure and success policies, the tracking finalizer) |
//! | [`daemonset`] | `pkg/controller/daemon/` (a pod per eligible node through node affinity, daemon tolerations, ControllerRevisions, rolling updates with `maxUnavailable`/`maxSurge`, `OnDelete`) |
//! | [`statefulset`] | `pkg/controller/statefulset/` (stable pod identities, ordered or parallel pod management, PersistentVolumeClaims from templates and their retention policy, rolling updates with `partition`, `OnDelete`) |
//! | [`history`] | `pkg/controller/history/` (ControllerRevisions, shared by DaemonSets and StatefulSets) |
//! | [`cronjob`] | `pkg/controller/cronjob/` (a Job per scheduled time, concurrency policies, history limits) |
//! | [`ttl_after_finished`] | `pkg/controller/ttlafterfinished/` (finished Jobs deleted after their TTL) |
//! | [`podautoscaler`] | `pkg/controller/podautoscaler/` (HorizontalPodAutoscalers: the replica calculator for resource metrics, stabilization and scale rate behaviors, conditions and Events) |
//! | [`podgc`] | `pkg/controller/podgc/` (pods of deleted nodes, terminated pods over the threshold, unscheduled terminating pods) |
//! | [`volume`] | `pkg/controller/volume/persistentvolume/` (binding claims to volumes, release and reclaim) and a simulated external provisioner (`sig-storage-lib-external-provisioner`) |
//! | [`namespace`] | `pkg/controller/namespace/deletion/namespaced_resources_deleter.go` |
//! | [`node_ipam`] | `pkg/controller/nodeipam/ipam/range_allocator.go` + `cidrset` (node pod CIDRs) |
//! | [`clusterrole_aggregation`] | `pkg/controller/clusterroleaggregation/` (aggregated ClusterRoles' rules) |
//! | [`serviceaccount`] | `pkg/controller/serviceaccount/serviceaccounts_controller.go` (a `default` ServiceAccount per namespace) |
//! | [`csrsigning`] | `pkg/controller/certificates/signer/` (approved CertificateSigningRequests signed with the cluster CA) |
//! | [`root_ca_cert_publisher`] | `pkg/controller/certificates/rootcacertpublisher/` (a `kube-root-ca.crt` ConfigMap per namespace) |
//! | [`selector`] | `metav1.LabelSelectorAsSelector`, `labels.Selector` |
//! | [`action`] | what the shell executes: writes, events, requeues |
//!
//! ## Driving it from the async shell
//!
//! Each controller is a workqueue of keys and a sync function. For one key the shell reads
//! its informer caches, calls the core, and executes the returned [`Action`]s in order (see
//! [`action`] for the failure contract):
//!
//! | controller | informers | per key the shell passes | keeps |
//! | --- | --- | --- | --- |
//! | Deployment | Deployments, ReplicaSets, Pods | [`deployment::sync_deployment`]: the Deployment, its ReplicaSets after [`controller_ref::claim_objects`], pods by ReplicaSet UID, `now` | — |
//! | ReplicaSet | ReplicaSets, Pods | [`replicaset::sync_replica_set`]: the ReplicaSet, its claimed pods, sibling pods, `now` | [`expectations::Expectations`] (informer handlers call `creation_observed` / `deletion_observed`) |
//! | Job | Jobs, Pods | [`job::sync_job`]: the Job, its claimed pods, the UIDs whose finalizer removal is in flight, the failure back-off, `now` | [`expectations::Expectations`], finalizer expectations, back-off records |
//! | CronJob | CronJobs, Jobs | [`cronjob::sync_cron_job`]: the CronJob, its Jobs, the active Jobs a live GET found gone, `now` | — |
//! | TTL after finished | Jobs | [`ttl_after_finished::decide`]: the Job, `now` | — |
//! | pod GC (periodic) | Pods, Nodes | [`podgc::plan`]: every pod and node, `now` | when each missing node was first missed |
//! | DaemonSet | DaemonSets, Pods, Nodes, ControllerRevisions | [`daemonset::sync_daemon_set`]: the DaemonSet, every node, its claimed pods, the current revision's hash (the shell creates or renumbers the revision first), the old revisions, `now` | [`expectations::Expectations`], [`daemonset::failed_pods_backoff::FailedPodsBackoff`] |
//! | garbage collector | every resource (metadata) | [`garbage_collector::garbage_collect`] over an [`garbage_collector::graph::OwnerGraph`] it updates on every event | the graph |
//! | EndpointSlice | Services, Pods, EndpointSlices, Nodes | [`endpointslice::sync_endpoint_slices`]: the Service, the pods it selects, its managed slices, their nodes, the trigger time | generations written ([`endpointslice::trackers::EndpointSliceTracker`]), trigger times |
//! | Endpoints | Services, Pods, Endpoints | [`endpoint::sync_endpoints`]: the Service, the pods it selects, its Endpoints, the trigger time | trigger times, the resourceVersion last written over |
//! | namespace | Namespaces, plus a list of every namespaced resource | [`namespace::sync_namespace`]: the Namespace and what is left in it, `now` | — |
//! | node IPAM | Nodes | [`node_ipam::sync_node`]: the Node and the [`node_ipam::CidrSet`] | the set of blocks in use |
//! | ClusterRole aggregation | ClusterRoles | [`clusterrole_aggregation::aggregate`]: the aggregated ClusterRole and every cached ClusterRole | — |
//! | CSR signing | CertificateSigningRequests | [`csrsigning::decide`]: the CSR, its parsed request, the longest duration | the CA |
//! | root CA publisher | ConfigMaps, Namespaces | [`root_ca_cert_publisher::sync_namespace`]: the namespace's cached `kube-root-ca.crt` and the CA | — |
//!
//! Every sync also returns a one-line summary ("what and why") for logs and traces.
//!
//! ## The async shell
//!
//! | module | Kubernetes |
//! | --- | --- |
//! | [`manager`] | `cmd/kube-controller-manager/app/` (flags, informers, leader election, `/healthz`, `/metrics`) |
//! | `*/controller.rs` | the controllers' handlers and `sync*` I/O (`deployment_controller.go`, `replica_set.go`, `daemon_controller.go`, `endpointslice_controller.go`, `endpoints_controller.go`, `garbagecollector.go` + `graph_builder.go`, `namespace_controller.go`) |
//! | [`worker`] | `processNextWorkItem` / `handleErr` |
//! | [`executor`] | `podControl`, `rsControl`, the typed clientset writes |
//! | [`adoption`] | `ControllerRefManager.ClaimObject` with `RecheckDeletionTimestamp` |
//! | [`lookup`] | `resolveControllerRef`, `getDeploymentsForReplicaSet`, `getPodReplicaSets` |

pub mod action;
pub mod adoption;
pub mod clusterrole_aggregation;
pub mod controller_ref;
pub mod cronjob;
pub mod csrsigning;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod endpoint;
pub mod endpointslice;
pub mod error;
pub mod executor;
pub mod expectations;
pub mod garbage_collector;
pub mod history;
pub mod job;
pub mod lookup;
pub mod manager;
pub mod namespace;
pub mod node_ipam;
pub mod node_lifecycle;
pub mod owner_ref;
pub mod pod_readiness;
pub mod podautoscaler;
pub mod podgc;
pub mod replicaset;
pub mod replication;
pub mod root_ca_cert_publisher;
pub mod selector;
pub mod serviceaccount;
pub mod statefulset;
pub mod ttl_after_finished;
pub mod volume;
pub mod worker;

#[cfg(test)]
mod testing;

pub use action::{Action, Event, PatchType, PropagationPolicy};
pub use error::{Error, Result};
