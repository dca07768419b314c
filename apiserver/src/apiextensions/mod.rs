//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`): new resources added to the API at
//! run time, served by the same generic registry as the built-in kinds.
//!
//! Kubernetes serves CRDs from a separate apiserver chained in front of kube-apiserver
//! (`staging/src/k8s.io/apiextensions-apiserver`). In miniplane a CRD is an object like any
//! other, stored under `/registry/apiextensions.k8s.io/customresourcedefinitions/<name>`, and
//! its served versions become rows of the one [`Registry`](crate::registry::Registry), which
//! also lists the row of `customresourcedefinitions` itself (with [`definition`]'s rules):
//!
//! ```text
//!  kubectl apply -f crd.yaml ─▶ POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions
//!      definition.rs   defaults, validation (name = plural.group, schemas, versions)
//!      controller.rs   NamesAccepted + Established ─▶ registry.set_custom(rows)
//!  kubectl apply -f website.yaml ─▶ POST /apis/demo.miniplane.dev/v1/namespaces/default/websites
//!      custom_resource.rs  the row's strategy: structural.rs (prune, default)
//!                                              validation.rs (the schema's rules)
//!                                              printer_columns.rs (kubectl get columns)
//!  discovery, OpenAPI v3 (kubectl explain), watch, patch, finalizers: the generic paths
//!  kubectl delete crd ─▶ controller deletes the custom resources, then the CRD
//! ```

pub mod controller;
pub mod custom_resource;
pub mod definition;
pub mod printer_columns;
pub mod structural;
pub mod validation;
