//! Per-pod and per-container simulation overrides, read from annotations (kwok reads the same
//! kind of knobs from annotations in its chaos stages, `kustomize/stage/pod/chaos/`). The
//! pod-wide `fail`, `ready-after` and `run-for` act on every regular container (not on init
//! containers); a knob with a `.<container>` suffix acts on that container alone.
//!
//! | annotation | value | effect |
//! | --- | --- | --- |
//! | `miniplane.dev/fail` | `image-pull` | every pull fails: `ErrImagePull` → `ImagePullBackOff` |
//! | | `crash` | the containers exit with code 1 after `exit_after` (or `run-for`) |
//! | | `exit-0` / `exit-1` | the containers finish with that code (`Completed` / `Error`) |
//! | | `never-ready` | the containers run but never become Ready |
//! | `miniplane.dev/ready-after` | duration (`5s`) | Ready this long after the start |
//! | `miniplane.dev/run-for` | duration | the containers exit (code 0 unless `fail` says 1) after this |
//! | `miniplane.dev/pull-delay` | duration | the simulated image pull takes this long |
//! | `miniplane.dev/run-for.<container>` | duration | that container (init containers too) exits after this |
//! | `miniplane.dev/exit-code.<container>` | integer | that container exits with this code (after `run-for.<container>`, else after its command's run time, else `exit_after`) |
//! | `miniplane.dev/ready-after.<container>` | duration | that container is Ready this long after its start |
//! | `miniplane.dev/liveness-fails-after[.<container>]` | duration | the liveness probe fails from this long after the start: after `failureThreshold` failures the container is killed (exit 137) and restarted per `restartPolicy` |
//! | `miniplane.dev/readiness-fails-after[.<container>]` | duration | the readiness probe fails from then on: Ready turns False |
//! | `miniplane.dev/startup-fails-after[.<container>]` | duration | the startup probe fails from then on (`0s`: it never passes, the container is restarted) |
//! | `miniplane.dev/stop-after[.<container>]` | duration | the container exits this long after SIGTERM (default: it ignores SIGTERM and is killed when the grace period ends) |
//! | `miniplane.dev/cpu-usage[.<container>]` | CPU quantity (`250m`) | the CPU the running container uses, as the kubelet's stats report it (default: a share of its request, see [`crate::usage`]) |
//! | `miniplane.dev/memory-usage[.<container>]` | memory quantity (`64Mi`) | the running container's working set (default: a share of its request) |
//!
//! Which one decides how a container runs, first match wins:
//!
//! 1. the per-container `run-for.<c>` / `exit-code.<c>`;
//! 2. for regular containers (not init containers), the pod-wide `fail` and `run-for`;
//! 3. the container's `command` and `args` ([`crate::command`]: `sleep 5`, `sh -c "...; exit 3"`);
//! 4. otherwise it runs until stopped.
//!
//! The `*-fails-after` and `stop-after` knobs without `.<container>` apply to every container
//! that has that probe (or is stopped). A probe annotation on a container without that probe
//! does nothing, as the kubelet runs only the probes the spec declares.
//!
//! An image whose name contains `doesnotexist` fails to pull as `fail: image-pull` does.
//! Unknown values are ignored (logged by the caller), as a kubelet ignores unknown annotations.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use apimachinery::duration::parse_duration;

/// The prefix of every knob.
pub const PREFIX: &str = "miniplane.dev/";
/// `miniplane.dev/fail`.
pub const FAIL: &str = "miniplane.dev/fail";
/// `miniplane.dev/ready-after`.
pub const READY_AFTER: &str = "miniplane.dev/ready-after";
/// `miniplane.dev/run-for`.
pub const RUN_FOR: &str = "miniplane.dev/run-for";
/// `miniplane.dev/pull-delay`.
pub const PULL_DELAY: &str = "miniplane.dev/pull-delay";
/// `miniplane.dev/exit-code.<container>` (per container only).
pub const EXIT_CODE: &str = "miniplane.dev/exit-code";
/// `miniplane.dev/liveness-fails-after[.<container>]`.
pub const LIVENESS_FAILS_AFTER: &str = "miniplane.dev/liveness-fails-after";
/// `miniplane.dev/readiness-fails-after[.<container>]`.
pub const READINESS_FAILS_AFTER: &str = "miniplane.dev/readiness-fails-after";
/// `miniplane.dev/startup-fails-after[.<container>]`.
pub const STARTUP_FAILS_AFTER: &str = "miniplane.dev/startup-fails-after";
/// `miniplane.dev/stop-after[.<container>]`.
pub const STOP_AFTER: &str = "miniplane.dev/stop-after";
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
    /// The knobs given for all containers (`liveness-fails-after`, ... without a container).
    pub all: ContainerOverrides,
    /// The knobs given per container (`<knob>.<container>`), by container name. Empty for a
    /// pod without such annotations, so a plain pod pays nothing for them.
    pub per_container: Vec<(String, ContainerOverrides)>,
}

/// The knobs of one container (or of all of them), each unset unless annotated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerOverrides {
    /// `run-for.<c>`.
    pub run_for: Option<Duration>,
    /// `exit-code.<c>`.
    pub exit_code: Option<i32>,
    /// `ready-after.<c>`.
    pub ready_after: Option<Duration>,
    /// `liveness-fails-after`.
    pub liveness_fails_after: Option<Duration>,
    /// `readiness-fails-after`.
    pub readiness_fails_after: Option<Duration>,
    /// `startup-fails-after`.
    pub startup_fails_after: Option<Duration>,
    /// `stop-after`.
    pub stop_after: Option<Duration>,
}

impl ContainerOverrides {
    /// Sets the knob `knob` (an annotation key without its `.<container>`) from `value`;
    /// false if the knob is not a per-container one or the value does not parse.
    fn set(&mut self, knob: &str, value: &str) -> bool {
        if knob == EXIT_CODE {
            self.exit_code = value.trim().parse().ok();
            return self.exit_code.is_some();
        }
        let slot = match knob {
            RUN_FOR => &mut self.run_for,
            READY_AFTER => &mut self.ready_after,
            LIVENESS_FAILS_AFTER => &mut self.liveness_fails_after,
            READINESS_FAILS_AFTER => &mut self.readiness_fails_after,
            STARTUP_FAILS_AFTER => &mut self.startup_fails_after,
            STOP_AFTER => &mut self.stop_after,
            _ => return false,
        };
        *slot = parse_duration(value).ok();
        slot.is_some()
    }
}

impl PodOverrides {
    /// Reads the annotations of `pod`; malformed values are ignored.
    pub fn of(pod: &Pod) -> Self {
        let Some(annotations) = pod.metadata.annotations.as_ref() else {
            return PodOverrides::default();
        };
        let duration = |key: &str| annotations.get(key).and_then(|v| parse_duration(v).ok());
        let mut all = ContainerOverrides::default();
        let mut per_container: Vec<(String, ContainerOverrides)> = Vec::new();
        for (key, value) in annotations {
            let Some(rest) = key.strip_prefix(PREFIX) else {
                continue;
            };
            match rest.split_once('.') {
                Some((knob, container)) => {
                    let knob = &key[..PREFIX.len() + knob.len()];
                    let i = match per_container.iter().position(|(c, _)| c == container) {
                        Some(i) => i,
                        None => {
                            per_container.push((container.to_owned(), Default::default()));
                            per_container.len() - 1
                        }
                    };
                    per_container[i].1.set(knob, value);
                }
                // The pod-wide `run-for` and `ready-after` are read below (regular
                // containers only); the probe and stop knobs apply to every container.
                None if key != RUN_FOR && key != READY_AFTER => {
                    all.set(key, value);
                }
                None => {}
            }
        }
        // Annotations whose container part matched no knob are dropped.
        per_container.retain(|(_, o)| *o != ContainerOverrides::default());
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
            all,
            per_container,
        }
    }

    /// The knobs annotated for container `name` alone (none: the default, all unset).
    pub fn container(&self, name: &str) -> Option<&ContainerOverrides> {
        self.per_container
            .iter()
            .find(|(c, _)| c == name)
            .map(|(_, o)| o)
    }

    /// Whether pulling `image` fails for this pod.
    pub fn pull_fails(&self, image: &str) -> bool {
        self.fail == Some(Failure::ImagePull) || image.contains(MISSING_IMAGE_MARKER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn overrides(annotations: &[(&str, &str)]) -> PodOverrides {
        let mut pod = Pod::default();
        pod.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        );
        PodOverrides::of(&pod)
    }

    #[test]
    fn per_container_knobs_are_read_apart_from_the_pod_wide_ones() {
        let o = overrides(&[
            ("miniplane.dev/run-for", "3s"),
            ("miniplane.dev/run-for.worker", "5s"),
            ("miniplane.dev/exit-code.worker", "3"),
            ("miniplane.dev/exit-code.bad", "three"),
            ("miniplane.dev/liveness-fails-after", "30s"),
            ("miniplane.dev/stop-after.web", "2s"),
            ("example.com/run-for.worker", "9s"),
        ]);
        assert_eq!(o.run_for, Some(Duration::from_secs(3)));
        assert_eq!(o.all.liveness_fails_after, Some(Duration::from_secs(30)));
        assert_eq!(
            o.all.run_for, None,
            "the pod-wide run-for is for regular containers"
        );
        let worker = o.container("worker").expect("worker's knobs");
        assert_eq!(worker.run_for, Some(Duration::from_secs(5)));
        assert_eq!(worker.exit_code, Some(3));
        assert_eq!(
            o.container("web").and_then(|c| c.stop_after),
            Some(Duration::from_secs(2))
        );
        assert_eq!(o.container("bad"), None, "a malformed value is ignored");
        assert_eq!(o.per_container.len(), 2);
        assert_eq!(overrides(&[]).per_container, []);
    }
}
