//! Per-pod simulation overrides, read from annotations (kwok reads the same kind of knobs from
//! annotations in its chaos stages, `kustomize/stage/pod/chaos/`).
//!
//! | annotation | value | effect |
//! | --- | --- | --- |
//! | `miniplane.dev/fail` | `image-pull` | every pull fails: `ErrImagePull` → `ImagePullBackOff` |
//! | | `crash` | the container exits with code 1 after `exit_after` (or `run-for`) |
//! | | `exit-0` / `exit-1` | the container finishes with that code (`Completed` / `Error`) |
//! | | `never-ready` | the container runs but never becomes Ready |
//! | `miniplane.dev/ready-after` | duration (`5s`) | Ready this long after the start |
//! | `miniplane.dev/run-for` | duration | the container exits (code 0 unless `fail` says 1) after this |
//! | `miniplane.dev/pull-delay` | duration | the simulated image pull takes this long |
//!
//! An image whose name contains `doesnotexist` fails to pull as `fail: image-pull` does.
//! Unknown values are ignored (logged by the caller), as a kubelet ignores unknown annotations.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use apimachinery::duration::parse_duration;

/// `miniplane.dev/fail`.
pub const FAIL: &str = "miniplane.dev/fail";
/// `miniplane.dev/ready-after`.
pub const READY_AFTER: &str = "miniplane.dev/ready-after";
/// `miniplane.dev/run-for`.
pub const RUN_FOR: &str = "miniplane.dev/run-for";
/// `miniplane.dev/pull-delay`.
pub const PULL_DELAY: &str = "miniplane.dev/pull-delay";
/// Image names containing this fail to pull.
pub const MISSING_IMAGE_MARKER: &str = "doesnotexist";

/// The failure a pod is told to simulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Image pulls fail.
    ImagePull,
    /// The container exits with code 1.
    Crash,
    /// The container exits with this code (0 or 1).
    Exit(i32),
    /// The container never becomes Ready.
    NeverReady,
}

/// The overrides of one pod.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodOverrides {
    /// `miniplane.dev/fail`.
    pub fail: Option<Failure>,
    /// `miniplane.dev/ready-after`.
    pub ready_after: Option<Duration>,
    /// `miniplane.dev/run-for`.
    pub run_for: Option<Duration>,
    /// `miniplane.dev/pull-delay`.
    pub pull_delay: Option<Duration>,
}

impl PodOverrides {
    /// Reads the annotations of `pod`; malformed values are ignored.
    pub fn of(pod: &Pod) -> Self {
        let Some(annotations) = pod.metadata.annotations.as_ref() else {
            return PodOverrides::default();
        };
        let duration = |key: &str| annotations.get(key).and_then(|v| parse_duration(v).ok());
        PodOverrides {
            fail: annotations.get(FAIL).and_then(|v| match v.as_str() {
                "image-pull" => Some(Failure::ImagePull),
                "crash" => Some(Failure::Crash),
                "exit-0" => Some(Failure::Exit(0)),
                "exit-1" => Some(Failure::Exit(1)),
                "never-ready" => Some(Failure::NeverReady),
                _ => None,
            }),
            ready_after: duration(READY_AFTER),
            run_for: duration(RUN_FOR),
            pull_delay: duration(PULL_DELAY),
        }
    }

    /// Whether pulling `image` fails for this pod.
    pub fn pull_fails(&self, image: &str) -> bool {
        self.fail == Some(Failure::ImagePull) || image.contains(MISSING_IMAGE_MARKER)
    }
}
