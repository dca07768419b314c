//! Whether a Deployment's rollout is done, and what to print meanwhile: kubectl's
//! `DeploymentStatusViewer` (`staging/src/k8s.io/kubectl/pkg/polymorphichelpers/rollout_status.go`)
//! plus miniplane's progress bar.
//!
//! The checks, in kubectl's order, on each version of the Deployment the watch delivers:
//!
//! ```text
//!   generation > observedGeneration        Waiting for deployment spec update to be observed...
//!   Progressing=ProgressDeadlineExceeded   error: deployment "web" exceeded its progress deadline
//!   updated < spec.replicas                ... 1 out of 3 new replicas have been updated...
//!   status.replicas > updated              ... 1 old replicas are pending termination...
//!   available < updated                    ... 2 of 3 updated replicas are available...
//!   otherwise                              deployment "web" successfully rolled out
//! ```

use k8s_openapi::api::apps::v1::Deployment;

/// The counts the progress bar shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// `spec.replicas` (1 if unset).
    pub desired: i32,
    /// `status.updatedReplicas`: pods of the new template.
    pub updated: i32,
    /// `status.readyReplicas`.
    pub ready: i32,
    /// `status.availableReplicas`: ready for `minReadySeconds`.
    pub available: i32,
}

/// One look at a Deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Whether the rollout is complete.
    pub done: bool,
    /// kubectl's message (without the trailing newline).
    pub message: String,
    /// The counts.
    pub progress: Progress,
}

/// kubectl's `DeploymentStatusViewer.Status`; `Err` is the progress-deadline failure.
pub fn status(d: &Deployment) -> Result<Status, String> {
    let name = d.metadata.name.as_deref().unwrap_or_default();
    let spec = d.spec.clone().unwrap_or_default();
    let st = d.status.clone().unwrap_or_default();
    let progress = Progress {
        desired: spec.replicas.unwrap_or(1),
        updated: st.updated_replicas.unwrap_or(0),
        ready: st.ready_replicas.unwrap_or(0),
        available: st.available_replicas.unwrap_or(0),
    };
    let waiting = |message: String| {
        Ok(Status {
            done: false,
            message,
            progress,
        })
    };
    if d.metadata.generation.unwrap_or(0) > st.observed_generation.unwrap_or(0) {
        return waiting("Waiting for deployment spec update to be observed...".to_owned());
    }
    let deadline_exceeded = st.conditions.iter().flatten().any(|c| {
        c.type_ == "Progressing" && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
    });
    if deadline_exceeded {
        return Err(format!(
            "deployment \"{name}\" exceeded its progress deadline"
        ));
    }
    let total = st.replicas.unwrap_or(0);
    if spec.replicas.is_some() && progress.updated < progress.desired {
        return waiting(format!(
            "Waiting for deployment \"{name}\" rollout to finish: {} out of {} new replicas have been updated...",
            progress.updated, progress.desired
        ));
    }
    if total > progress.updated {
        return waiting(format!(
            "Waiting for deployment \"{name}\" rollout to finish: {} old replicas are pending termination...",
            total - progress.updated
        ));
    }
    if progress.available < progress.updated {
        return waiting(format!(
            "Waiting for deployment \"{name}\" rollout to finish: {} of {} updated replicas are available...",
            progress.available, progress.updated
        ));
    }
    Ok(Status {
        done: true,
        message: format!("deployment \"{name}\" successfully rolled out"),
        progress,
    })
}

/// The terminal's one redrawn line: a bar of updated-and-available pods out of the desired,
/// then the counts, e.g. `[██████████░░░░░] 2/3 updated, 3/3 ready, 2/3 available`.
pub fn progress_line(p: &Progress, width: usize) -> String {
    let done = p.updated.min(p.available).max(0) as usize;
    let desired = p.desired.max(0) as usize;
    let filled = (done * width)
        .checked_div(desired)
        .map_or(width, |f| f.min(width));
    format!(
        "[{}{}] {}/{} updated, {}/{} ready, {}/{} available",
        "█".repeat(filled),
        "░".repeat(width - filled),
        p.updated,
        p.desired,
        p.ready,
        p.desired,
        p.available,
        p.desired
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(generation: i64, status: serde_json::Value) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "generation": generation},
            "spec": {"replicas": 3, "selector": {}, "template": {}},
            "status": status
        }))
        .unwrap()
    }

    fn message(generation: i64, st: serde_json::Value) -> String {
        status_of(generation, st).message
    }

    fn status_of(generation: i64, st: serde_json::Value) -> Status {
        status(&deployment(generation, st)).unwrap()
    }

    #[test]
    fn kubectl_messages_in_order() {
        assert_eq!(
            message(2, json!({"observedGeneration": 1})),
            "Waiting for deployment spec update to be observed..."
        );
        assert_eq!(
            message(
                2,
                json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1})
            ),
            "Waiting for deployment \"web\" rollout to finish: 1 out of 3 new replicas have been updated..."
        );
        assert_eq!(
            message(
                2,
                json!({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 3})
            ),
            "Waiting for deployment \"web\" rollout to finish: 1 old replicas are pending termination..."
        );
        assert_eq!(
            message(
                2,
                json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 1})
            ),
            "Waiting for deployment \"web\" rollout to finish: 1 of 3 updated replicas are available..."
        );
        let done = status_of(
            2,
            json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3}),
        );
        assert!(done.done);
        assert_eq!(done.message, "deployment \"web\" successfully rolled out");
    }

    #[test]
    fn progress_deadline_is_an_error() {
        let d = deployment(
            1,
            json!({"observedGeneration": 1, "conditions": [
                {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}),
        );
        assert_eq!(
            status(&d).unwrap_err(),
            "deployment \"web\" exceeded its progress deadline"
        );
    }

    #[test]
    fn bar() {
        let p = Progress {
            desired: 3,
            updated: 2,
            ready: 3,
            available: 1,
        };
        assert_eq!(
            progress_line(&p, 6),
            "[██░░░░] 2/3 updated, 3/3 ready, 1/3 available"
        );
        assert_eq!(
            progress_line(&Progress::default(), 2),
            "[██] 0/0 updated, 0/0 ready, 0/0 available"
        );
    }
}
