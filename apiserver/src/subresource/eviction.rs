//! `pods/{name}/eviction`: a `policy/v1 Eviction`, a delete that asks the pod's
//! PodDisruptionBudget first (`pkg/registry/core/pod/storage/eviction.go`).
//!
//! ```text
//!   POST pods/web-1/eviction
//!     pod terminal, Pending or already being deleted ─▶ delete it (no budget to ask)
//!     budgets selecting the pod: none ─▶ delete · more than one ─▶ 500
//!     one: pod not Ready and (AlwaysAllow, or the budget is met without it) ─▶ delete
//!          status not caught up with its spec ─▶ 429 (retry after 10 s)
//!          disruptionsAllowed 0 ─▶ 429 "Cannot evict pod as it would violate the pod's
//!                                  disruption budget." (kubectl drain retries every 5 s)
//!          else disruptionsAllowed - 1, disruptedPods[web-1] = now (one write of the budget's
//!               status, re-decided on a conflict) ─▶ delete
//!   delete: the pod gets the condition DisruptionTarget (EvictionByEvictionAPI), then the
//!           Eviction's deleteOptions apply (grace period, preconditions); 201 Success
//! ```
//!
//! The disruption controller (`controllers::disruption`) recomputes the budget's status from
//! the pods and forgets a `disruptedPods` entry once its pod is gone. Unlike Kubernetes, a
//! conflicting write of the pod is not retried with a fresh read (the budget's write is).

use super::success;
use crate::error::{ApiError, Result};
use crate::gvk::GroupVersion;
use crate::handlers::delete::{DeleteOptions, delete_object};
use crate::handlers::{RequestContext, object_ref};
use crate::request::decode_body;
use crate::response::json_response;
use crate::storage::{ObjectRef, Update, prefix};
use apimachinery::Selector;
use axum::http::StatusCode;
use axum::response::Response;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::{Value, json};
use std::sync::Arc;

/// `MaxDisruptedPodSize`: evictions the controller has not yet confirmed, at most.
pub const MAX_DISRUPTED_POD_SIZE: usize = 2000;
/// The 429's message.
pub const BUDGET_VIOLATED: &str =
    "Cannot evict pod as it would violate the pod's disruption budget.";
/// `policyv1.DisruptionBudgetCause`.
pub const DISRUPTION_BUDGET_CAUSE: &str = "DisruptionBudget";
/// `policyv1.DisruptionAllowedCondition`.
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";

/// POST `pods/{name}/eviction`.
pub async fn create(
    ctx: RequestContext,
    info: Arc<crate::registry::ResourceInfo>,
    name: &str,
) -> Result<Response> {
    let eviction = decode_body(&ctx.headers, &ctx.body, "Eviction")?;
    if let Some(n) = crate::meta::name(&eviction)
        && n != name
    {
        return Err(ApiError::BadRequest(format!(
            "name in URL does not match name in Eviction object: {name} != {n}"
        )));
    }
    let mut opts: DeleteOptions = match eviction.get("deleteOptions") {
        Some(o) if !o.is_null() => serde_json::from_value(o.clone())
            .map_err(|e| ApiError::BadRequest(format!("invalid deleteOptions: {e}")))?,
        _ => DeleteOptions::default(),
    };
    ctx.query.validate_options("CreateOptions", Vec::new())?;
    if ctx.query.dry_run()? {
        opts.dry_run = vec!["All".into()];
    }
    let r = object_ref(&info, &ctx.path, name);
    let pod: Pod = match ctx.storage().get(&r).await? {
        Some(v) => serde_json::from_value(v)
            .map_err(|e| ApiError::Internal(format!("stored pod does not decode: {e}")))?,
        None => return Err(r.not_found()),
    };
    if !can_ignore_budget(&pod) {
        check_budget(&ctx, &pod, name, opts.dry_run()).await?;
    }
    if !opts.dry_run() {
        add_disruption_condition(&ctx, &r).await?;
    }
    delete_object(&ctx, &r, &opts).await?;
    Ok(json_response(StatusCode::CREATED, &success(201)))
}

/// `canIgnorePDB`: a pod that has finished, never started, or is already going.
pub fn can_ignore_budget(pod: &Pod) -> bool {
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("");
    matches!(phase, "Succeeded" | "Failed" | "Pending") || pod.metadata.deletion_timestamp.is_some()
}

/// `IsPodReady`.
fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Finds the pod's budget and, unless the pod may go without, takes one disruption from it.
async fn check_budget(ctx: &RequestContext, pod: &Pod, name: &str, dry_run: bool) -> Result<()> {
    let Some(pdb_info) = ctx
        .state
        .registry()
        .lookup(&GroupVersion::new("policy", "v1"), "poddisruptionbudgets")
    else {
        return Ok(());
    };
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let page = ctx
        .storage()
        .list(
            &prefix(&pdb_info, Some(&namespace)),
            None,
            None,
            0,
            &|_: &Value| true,
        )
        .await?;
    // `getPodDisruptionBudgets`: an empty selector selects every pod, a missing one none.
    let budgets: Vec<PodDisruptionBudget> = page
        .items
        .into_iter()
        .filter_map(|v| serde_json::from_value::<PodDisruptionBudget>(v).ok())
        .filter(|pdb| {
            Selector::from_label_selector(pdb.spec.as_ref().and_then(|s| s.selector.as_ref()))
                .is_ok_and(|s| s.matches(&labels))
        })
        .collect();
    let pdb = match budgets.as_slice() {
        [] => return Ok(()),
        [one] => one,
        _ => {
            return Err(ApiError::Exhausted(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.".to_owned(),
            ));
        }
    };
    if !is_ready(pod) && unhealthy_may_go(pdb) {
        return Ok(());
    }
    let pdb_name = pdb.metadata.name.clone().unwrap_or_default();
    let r = ObjectRef {
        info: pdb_info,
        namespace: Some(namespace),
        name: pdb_name,
    };
    let now = ctx.state.now();
    ctx.storage()
        .guaranteed_update(&r, dry_run, |current| {
            let Some(current) = current else {
                // Deleted meanwhile: nothing guards the pod any more.
                return Ok(Update::Keep(Value::Null));
            };
            let latest: PodDisruptionBudget = serde_json::from_value(current.clone())
                .map_err(|e| ApiError::Internal(format!("stored budget does not decode: {e}")))?;
            let decremented = check_and_decrement(&latest, name, now)?;
            let mut obj = current.clone();
            obj["status"] = serde_json::to_value(decremented.status)
                .map_err(|e| ApiError::Internal(e.to_string()))?;
            Ok(Update::Put(obj))
        })
        .await?;
    Ok(())
}

/// Whether a pod that is not Ready may be evicted without taking a disruption: the budget's
/// `unhealthyPodEvictionPolicy` is `AlwaysAllow`, or (`IfHealthyBudget`, the default) the
/// budget is met without it.
pub fn unhealthy_may_go(pdb: &PodDisruptionBudget) -> bool {
    let always = pdb
        .spec
        .as_ref()
        .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref())
        == Some("AlwaysAllow");
    let status = pdb.status.clone().unwrap_or_default();
    always || (status.current_healthy >= status.desired_healthy && status.desired_healthy > 0)
}

/// `checkAndDecrement`: the budget with one disruption taken for pod `pod_name` at `now`, or
/// why the eviction must wait (429) or is refused (403).
pub fn check_and_decrement(
    pdb: &PodDisruptionBudget,
    pod_name: &str,
    now: jiff::Timestamp,
) -> Result<PodDisruptionBudget> {
    let name = pdb.metadata.name.clone().unwrap_or_default();
    let mut status = pdb.status.clone().unwrap_or_default();
    if status.observed_generation.unwrap_or(0) < pdb.metadata.generation.unwrap_or(0) {
        return Err(ApiError::TooManyRequests {
            message: BUDGET_VIOLATED.to_owned(),
            causes: vec![(
                DISRUPTION_BUDGET_CAUSE,
                format!("The disruption budget {name} is still being processed by the server."),
            )],
            retry_after_seconds: 10,
        });
    }
    let forbidden = |why: &str| ApiError::Forbidden {
        target: target_of(&name),
        message: format!("poddisruptionbudgets.policy \"{name}\" is forbidden: {why}"),
    };
    if status.disruptions_allowed < 0 {
        return Err(forbidden("pdb disruptions allowed is negative"));
    }
    if status.disrupted_pods.as_ref().map_or(0, |d| d.len()) > MAX_DISRUPTED_POD_SIZE {
        return Err(forbidden(
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if status.disruptions_allowed == 0 {
        return Err(ApiError::TooManyRequests {
            message: BUDGET_VIOLATED.to_owned(),
            causes: vec![(
                DISRUPTION_BUDGET_CAUSE,
                format!(
                    "The disruption budget {name} needs {} healthy pods and has {} currently",
                    status.desired_healthy, status.current_healthy
                ),
            )],
            retry_after_seconds: 0,
        });
    }
    status.disruptions_allowed -= 1;
    if status.disruptions_allowed == 0 {
        set_disruption_allowed_condition(&mut status, now);
    }
    status
        .disrupted_pods
        .get_or_insert_with(Default::default)
        .insert(pod_name.to_owned(), Time(now));
    let mut out = pdb.clone();
    out.status = Some(status);
    Ok(out)
}

/// `UpdateDisruptionAllowedCondition` (`pkg/apis/policy/helper`): `DisruptionAllowed` True
/// with reason `SufficientPods` while disruptions are allowed, else False with
/// `InsufficientPods`; the transition time moves only when the status does.
pub fn set_disruption_allowed_condition(
    status: &mut k8s_openapi::api::policy::v1::PodDisruptionBudgetStatus,
    now: jiff::Timestamp,
) {
    let (value, reason) = if status.disruptions_allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    let observed = status.observed_generation;
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    match conditions
        .iter_mut()
        .find(|c| c.type_ == DISRUPTION_ALLOWED)
    {
        Some(c) => {
            if c.status != value {
                c.last_transition_time = Time(now);
            }
            c.status = value.to_owned();
            c.reason = reason.to_owned();
            c.observed_generation = observed;
        }
        None => conditions.push(Condition {
            type_: DISRUPTION_ALLOWED.to_owned(),
            status: value.to_owned(),
            reason: reason.to_owned(),
            message: String::new(),
            last_transition_time: Time(now),
            observed_generation: observed,
        }),
    }
}

fn target_of(name: &str) -> crate::error::ErrorTarget {
    crate::error::ErrorTarget {
        group: "policy".into(),
        resource: "poddisruptionbudgets".into(),
        kind: "PodDisruptionBudget".into(),
        name: name.to_owned(),
    }
}

/// `addConditionAndDeletePod`'s first half: the pod's `DisruptionTarget` condition, written
/// to its status before the delete.
async fn add_disruption_condition(ctx: &RequestContext, r: &ObjectRef) -> Result<()> {
    let now = ctx.state.now();
    let stamp = json!(now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
    ctx.storage()
        .guaranteed_update(r, false, |current| {
            let Some(current) = current else {
                return Err(r.not_found());
            };
            let mut pod = current.clone();
            let condition = json!({
                "type": "DisruptionTarget",
                "status": "True",
                "lastProbeTime": null,
                "lastTransitionTime": stamp,
                "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting",
            });
            let Some(status) = pod
                .as_object_mut()
                .map(|o| o.entry("status").or_insert_with(|| json!({})))
                .and_then(Value::as_object_mut)
            else {
                return Ok(Update::Keep(current.clone()));
            };
            let conditions = status.entry("conditions").or_insert_with(|| json!([]));
            let Some(list) = conditions.as_array_mut() else {
                return Ok(Update::Keep(current.clone()));
            };
            match list.iter_mut().find(|c| c["type"] == "DisruptionTarget") {
                Some(c) if c["status"] == "True" && c["reason"] == "EvictionByEvictionAPI" => {
                    return Ok(Update::Keep(current.clone()));
                }
                Some(c) => *c = condition,
                None => list.push(condition),
            }
            Ok(Update::Put(pod))
        })
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pdb(allowed: i32, current: i32, desired: i32) -> PodDisruptionBudget {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "generation": 1},
            "spec": {"minAvailable": 2},
            "status": {"observedGeneration": 1, "disruptionsAllowed": allowed,
                       "currentHealthy": current, "desiredHealthy": desired, "expectedPods": 3}
        }))
        .unwrap()
    }

    fn now() -> jiff::Timestamp {
        "2024-01-01T00:00:00Z".parse().unwrap()
    }

    #[test]
    fn a_disruption_is_taken_and_the_pod_remembered() {
        let out = check_and_decrement(&pdb(1, 3, 2), "web-1", now()).unwrap();
        let status = out.status.unwrap();
        assert_eq!(status.disruptions_allowed, 0);
        assert!(status.disrupted_pods.unwrap().contains_key("web-1"));
        let cond = &status.conditions.unwrap()[0];
        assert_eq!(
            (
                cond.type_.as_str(),
                cond.status.as_str(),
                cond.reason.as_str()
            ),
            ("DisruptionAllowed", "False", "InsufficientPods")
        );
    }

    #[test]
    fn no_disruption_left_is_a_429_with_kubernetes_words() {
        let err = check_and_decrement(&pdb(0, 2, 2), "web-1", now()).unwrap_err();
        assert_eq!(
            err.to_status(),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "Cannot evict pod as it would violate the pod's disruption budget.",
                   "reason": "TooManyRequests",
                   "details": {"causes": [{"reason": "DisruptionBudget",
                       "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}]},
                   "code": 429})
        );
        let mut stale = pdb(1, 3, 2);
        stale.metadata.generation = Some(2);
        let err = check_and_decrement(&stale, "web-1", now()).unwrap_err();
        assert_eq!(err.to_status()["details"]["retryAfterSeconds"], 10);
        assert_eq!(
            err.to_status()["details"]["causes"][0]["message"],
            "The disruption budget web is still being processed by the server."
        );
        let err = check_and_decrement(&pdb(-1, 3, 2), "web-1", now()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "poddisruptionbudgets.policy \"web\" is forbidden: pdb disruptions allowed is negative"
        );
    }

    #[test]
    fn which_pods_skip_the_budget() {
        let pod = |phase: &str, deleting: bool| -> Pod {
            let mut p: Pod = serde_json::from_value(json!({
                "metadata": {"name": "p"}, "status": {"phase": phase}
            }))
            .unwrap();
            if deleting {
                p.metadata.deletion_timestamp = Some(Time(now()));
            }
            p
        };
        assert!(can_ignore_budget(&pod("Succeeded", false)));
        assert!(can_ignore_budget(&pod("Pending", false)));
        assert!(can_ignore_budget(&pod("Running", true)));
        assert!(!can_ignore_budget(&pod("Running", false)));
        // An unready pod goes free while the budget is met without it, or always with
        // AlwaysAllow.
        assert!(unhealthy_may_go(&pdb(0, 2, 2)));
        assert!(!unhealthy_may_go(&pdb(0, 1, 2)));
        let mut always = pdb(0, 1, 2);
        always
            .spec
            .get_or_insert_default()
            .unhealthy_pod_eviction_policy = Some("AlwaysAllow".into());
        assert!(unhealthy_may_go(&always));
    }
}
