//! Container logs of the simulated kubelet: what each container run "printed", derived from the
//! Pod (spec, annotations, status) and the clock, never stored — so the log of the previous run
//! survives a restart (`lastState.terminated`) as it does on a node.
//!
//! Mirrors the kubelet's side of `GET /containerLogs/{ns}/{pod}/{container}`
//! (`pkg/kubelet/server/server.go` `getContainerLogs`, `pkg/kubelet/kubelet_pods.go`
//! `GetKubeletContainerLogs` / `validateContainerLogStatus`, `pkg/kubelet/kuberuntime/logs/logs.go`
//! `ReadLogs`) and the API server's choice of container for `pods/log`
//! (`pkg/registry/core/pod/strategy.go` `LogLocation` / `validateContainer`), with
//! `PodLogOptions` validated as `pkg/apis/core/validation` `ValidatePodLogOptions` does.
//!
//! | file | what |
//! | --- | --- |
//! | [`options`] | [`LogOptions`] parsed from the query of `pods/log` (`apimachinery::pod_log_options`, shared with the API server) |
//! | [`lines`] | what one container run prints: start-up text by image, annotated lines, `echo`, probe failures, shutdown |
//! | [`read`] | which run to read, the options applied ([`logs`], [`render`]) and [`follow`] |
//! | [`error`] | [`LogError`]: Kubernetes' texts and HTTP codes (`apimachinery::pod_log_options`) |
//!
//! Annotations (same [`crate::annotations::PREFIX`] and `.<container>` overlay as the other knobs):
//!
//! | annotation | value | effect |
//! | --- | --- | --- |
//! | `miniplane.dev/log-lines[.<container>]` | lines separated by `\n` | printed in turn, repeating, at `log-rate` from the start while the container runs (without a rate: each once, at the start) |
//! | `miniplane.dev/log-rate[.<container>]` | `N/s`, `N/m`, `N/h` (`2/s`, `10/m`) | how many annotated lines per second, minute or hour |

pub use apimachinery::pod_log_options::{error, options};
pub mod lines;
pub mod read;

#[cfg(test)]
mod tests;

pub use error::{LogError, StatusReason};
pub use lines::{LogLine, LogStream, RunWindow, run_lines};
pub use options::LogOptions;
pub use read::{FollowStep, Logs, follow, format_timestamp, logs, render};
