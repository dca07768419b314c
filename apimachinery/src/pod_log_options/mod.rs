//! `PodLogOptions` (k8s.io/api `core/v1/types.go`): the query of `pods/{name}/log` (and of the
//! kubelet's `/containerLogs`), parsed and validated as `pkg/apis/core/validation`
//! `ValidatePodLogOptions` does, with the errors worded and coded as Kubernetes answers them.
//! The API server checks them before it reaches the node; the simulated kubelet reads them.
//!
//! | file | what |
//! | --- | --- |
//! | [`options`] | [`LogOptions`] parsed from the query |
//! | [`error`] | [`LogError`]: Kubernetes' texts and HTTP codes |

pub mod error;
pub mod options;

pub use error::{LogError, StatusReason};
pub use options::LogOptions;
