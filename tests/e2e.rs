//! The end-to-end suite: real `miniplane` processes driven by the real `kubectl`, kube-rs and
//! raw HTTP. One test binary for all of it, so the workspace links the whole dependency tree
//! (kube, k8s-openapi, axum) once for these tests instead of once per file; each module below
//! is one area and its tests run as `cargo test -p ctl --test e2e <module>::`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod abuse;
mod access;
mod api_semantics;
mod apiserver_etcd;
mod apiservers;
mod authz;
mod autoscaling;
mod bad_input;
mod certificates;
mod chaos;
mod cli;
mod clock;
mod cloud;
mod cloud_controller_manager;
mod cluster_apply;
mod control_plane;
mod controller_manager;
mod crd;
mod daemonsets;
mod determinism;
mod disruption;
mod etcd_faults;
mod etcdctl;
mod faults;
mod jobs;
mod kube_client;
mod kubectl_api;
mod kubectl_apply;
mod kubectl_debug;
mod kubectl_get;
mod kubectl_lifecycle;
mod kubectl_streams;
mod kubelet_pods;
mod kubelet_tls;
mod labs;
mod library;
mod metrics;
mod node_lifecycle;
mod operator;
mod preemption;
mod python_client;
mod rbac;
mod record_replay;
mod replication_controllers;
mod rollouts;
mod scheduler_e2e;
mod scheduling_constraints;
mod serviceaccounts;
mod services;
mod snapshot;
mod statefulsets;
mod trace;
mod ui;
mod up;
mod volume_scheduling;
mod volumes;
mod watch_expired;
