//! Resources as Kubernetes measures them (apimachinery's `pkg/api/resource`).

pub mod quantity;
