//! The `AvailableConditionController`: keeps each APIService's `Available` condition, and the
//! aggregator's table of registrations and discovered resources with it.
//!
//! Mirrors kube-aggregator's `pkg/controllers/status/local/local_available_controller.go` and
//! `pkg/controllers/status/remote/remote_available_controller.go` (1.33: EndpointSlices),
//! folded into one level-triggered loop over every APIService, as the CRD controller is:
//!
//! ```text
//!   list APIServices ─▶ for each:
//!     local                 ─▶ True  Local                "Local APIServices are always available"
//!     Service missing       ─▶ False ServiceNotFound      service/S in "NS" is not present
//!     no port spec.service.port ─▶ False ServicePortError service/S in "NS" is not listening on port P
//!     no EndpointSlice      ─▶ False EndpointsNotFound    cannot find endpointslices for service/S in "NS"
//!     no ready address with the port ─▶ False MissingEndpoints endpointslices for service/S in "NS" have no addresses with port name "N"
//!     GET /apis/<g>/<v> fails or is not 2xx ─▶ False FailedDiscoveryCheck failing or missing response from URL: ...
//!     else                  ─▶ True  Passed               all checks passed
//!   status written only when it changed (lastTransitionTime kept unless the status flips)
//!   ─▶ Aggregator::set_registrations; each GET's APIResourceList ─▶ Aggregator::set_discovered
//!   wait: an APIService event │ 1 s tick (a remote one is checked again when its Service or
//!         EndpointSlices changed, when a proxied request could not reach it, 30 s after its
//!         last check, or sooner after a failure: 1 s, 2 s, 4 s … up to 30 s) │ shutdown
//! ```
//!
//! Simplification: Services and EndpointSlices are read from the store on the 1 s tick
//! instead of being watched, and the discovery check is one GET, not five in parallel.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{
    APIService, APIServiceCondition, APIServiceStatus,
};
use serde_json::Value;
use store::Revision;

use super::apiservice::{AVAILABLE, available_condition, local_condition, set_condition};
use super::proxy::{self, Endpoint, Unresolved};
use super::{GROUP, RESOURCE, Registration};
use crate::auth::user::UserInfo;
use crate::error::{ApiError, Result};
use crate::gvk::GroupVersion;
use crate::meta;
use crate::registry::ResourceInfo;
use crate::state::AppState;
use crate::storage::{ObjectRef, Update, prefix};

/// How often every APIService is looked at when nothing happens.
pub const TICK: Duration = Duration::from_secs(1);
/// How long a passed discovery check stands before it is made again (the remote
/// controller's resync period).
pub const RECHECK: Duration = Duration::from_secs(30);
/// The discovery check's timeout.
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(5);
/// The user the discovery check is made as.
pub const AGGREGATOR_USER: &str = "system:kube-aggregator";

/// What the last check of a remote APIService saw.
#[derive(Debug, Clone)]
struct Checked {
    /// The inputs: the APIService's spec and what its Service resolved to.
    inputs: String,
    at: Instant,
    /// Consecutive failures (0 after a pass).
    failures: u32,
}

impl Checked {
    fn due(&self, inputs: &str, now: Instant) -> bool {
        if self.inputs != inputs {
            return true;
        }
        let wait = if self.failures == 0 {
            RECHECK
        } else {
            Duration::from_secs(1u64 << self.failures.saturating_sub(1).min(5)).min(RECHECK)
        };
        now.duration_since(self.at) >= wait
    }
}

/// The controller's memory between passes.
#[derive(Debug, Default)]
pub struct Controller {
    checked: HashMap<String, Checked>,
}

fn info(state: &AppState) -> Result<Arc<ResourceInfo>> {
    state
        .registry()
        .lookup(&GroupVersion::new(GROUP, "v1"), RESOURCE)
        .ok_or_else(|| ApiError::Internal("apiservices are not registered".into()))
}

/// The condition a failed resolution or check becomes.
fn unavailable(why: Unresolved, now: jiff::Timestamp) -> APIServiceCondition {
    APIServiceCondition {
        type_: AVAILABLE.to_owned(),
        status: "False".to_owned(),
        reason: Some(why.reason.to_owned()),
        message: Some(why.message),
        last_transition_time: Some(Time(now)),
    }
}

/// The `Passed` condition.
fn passed(now: jiff::Timestamp) -> APIServiceCondition {
    APIServiceCondition {
        type_: AVAILABLE.to_owned(),
        status: "True".to_owned(),
        reason: Some("Passed".to_owned()),
        message: Some("all checks passed".to_owned()),
        last_transition_time: Some(Time(now)),
    }
}

/// The discovery check's verdict on an answer to `GET url`: `Ok` with the resource list's
/// `resources` (empty when the body is not an `APIResourceList`), or the failure's text.
pub fn judge_discovery(
    url: &str,
    answer: std::result::Result<(axum::http::StatusCode, bytes::Bytes), String>,
) -> std::result::Result<Vec<Value>, String> {
    let (status, body) =
        answer.map_err(|e| format!("failing or missing response from {url}: {e}"))?;
    if !status.is_success() {
        return Err(format!(
            "failing or missing response from {url}: bad status from {url}: {}",
            status.as_u16()
        ));
    }
    let list: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Ok(list["resources"].as_array().cloned().unwrap_or_default())
}

impl Controller {
    /// One pass over every APIService; returns the revision they were listed at.
    pub async fn sync(&mut self, state: &AppState) -> Result<Revision> {
        let info = info(state)?;
        let page = state
            .storage()
            .list(&prefix(&info, None), None, None, 0, &|_| true)
            .await?;
        let now = state.now();
        let mut registrations = Vec::with_capacity(page.items.len());
        let mut seen = Vec::new();
        for item in &page.items {
            let Ok(svc) = serde_json::from_value::<APIService>(item.clone()) else {
                continue;
            };
            let name = svc.metadata.name.clone().unwrap_or_default();
            seen.push(name.clone());
            let condition = match self.desired(state, &svc, now).await {
                Some(c) => c,
                None => {
                    // Not due: as it stands.
                    registrations.push(Registration::of(&svc));
                    continue;
                }
            };
            let mut status = svc.status.clone().unwrap_or_default();
            set_condition(&mut status, condition);
            let mut current = svc.clone();
            if svc.status.as_ref() != Some(&status) {
                let r = ObjectRef {
                    info: info.clone(),
                    namespace: None,
                    name: name.clone(),
                };
                if let Err(e) = write_status(state, &r, &status).await {
                    tracing::warn!(apiservice = %name, error = %e, "updating the APIService status failed");
                }
                let old = available_condition(&svc).map(|c| c.status.clone());
                let new = status
                    .conditions
                    .iter()
                    .flatten()
                    .find(|c| c.type_ == AVAILABLE);
                if let Some(new) = new
                    && old.as_deref() != Some(new.status.as_str())
                {
                    tracing::info!(apiservice = %name, old = ?old, new = %new.status, reason = ?new.reason, message = ?new.message, "changing APIService availability");
                }
                current.status = Some(status);
            }
            registrations.push(Registration::of(&current));
        }
        self.checked.retain(|name, _| seen.contains(name));
        state.aggregator().set_registrations(registrations);
        Ok(page.revision)
    }

    /// The `Available` condition `svc` should have now; `None` when a remote one is not due
    /// for a check.
    async fn desired(
        &mut self,
        state: &AppState,
        svc: &APIService,
        now: jiff::Timestamp,
    ) -> Option<APIServiceCondition> {
        let registration = Registration::of(svc);
        let Some(service) = registration.service.clone() else {
            return Some(local_condition(now));
        };
        let endpoint = proxy::resolve(state, &service).await;
        let inputs = format!(
            "{}|{:?}",
            serde_json::to_string(&svc.spec).unwrap_or_default(),
            endpoint,
        );
        let clock = Instant::now();
        let suspect = state.aggregator().take_suspect(&registration.name);
        if let Some(checked) = self.checked.get(&registration.name)
            && !suspect
            && !checked.due(&inputs, clock)
            && available_condition(svc).is_some()
        {
            return None;
        }
        let outcome = match endpoint {
            Err(why) => Err(why),
            Ok(endpoint) => self.discovery_check(state, &registration, &endpoint).await,
        };
        let failures = match &outcome {
            Ok(()) => 0,
            Err(_) => self
                .checked
                .get(&registration.name)
                .map_or(1, |c| c.failures.saturating_add(1)),
        };
        self.checked.insert(
            registration.name.clone(),
            Checked {
                inputs,
                at: clock,
                failures,
            },
        );
        Some(match outcome {
            Ok(()) => passed(now),
            Err(why) => unavailable(why, now),
        })
    }

    /// `GET /apis/<group>/<version>` on the backend as `system:kube-aggregator` in
    /// `system:masters`; its resource list is what discovery shows of the group version.
    async fn discovery_check(
        &self,
        state: &AppState,
        registration: &Registration,
        endpoint: &Endpoint,
    ) -> std::result::Result<(), Unresolved> {
        let path = if registration.group.is_empty() {
            format!("/api/{}", registration.version)
        } else {
            format!("/apis/{}/{}", registration.group, registration.version)
        };
        let url = format!("http://{}{path}", endpoint.host());
        let user = UserInfo::new(AGGREGATOR_USER, &["system:masters"]);
        let answer = proxy::get(state, endpoint, &path, &user, DISCOVERY_TIMEOUT).await;
        match judge_discovery(&url, answer) {
            Ok(resources) => {
                state
                    .aggregator()
                    .set_discovered(&registration.name, Some(resources));
                Ok(())
            }
            Err(message) => {
                state.aggregator().set_discovered(&registration.name, None);
                Err(Unresolved {
                    reason: "FailedDiscoveryCheck",
                    message,
                })
            }
        }
    }
}

/// Writes `status` into the stored APIService (gone: nothing to do).
async fn write_status(state: &AppState, r: &ObjectRef, status: &APIServiceStatus) -> Result<()> {
    let status_json = serde_json::to_value(status)
        .map_err(|e| ApiError::Internal(format!("encode APIService status: {e}")))?;
    let result = state
        .storage()
        .guaranteed_update(r, false, |cur| {
            let Some(mut obj) = cur.cloned() else {
                return Ok(Update::Keep(Value::Null));
            };
            meta::set_status(&mut obj, Some(status_json.clone()));
            Ok(Update::Put(obj))
        })
        .await;
    match result {
        Ok(_) | Err(ApiError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Runs the controller until the server shuts down: a pass now, then on every APIService
/// event and every [`TICK`].
pub async fn run(state: AppState) {
    let mut controller = Controller::default();
    let Ok(info) = info(&state) else { return };
    let watched = prefix(&info, None);
    let mut revision = Revision::ZERO;
    loop {
        match controller.sync(&state).await {
            Ok(r) => revision = r,
            Err(e) => tracing::warn!(error = %e, "checking APIServices failed"),
        }
        let events = if revision == Revision::ZERO {
            None
        } else {
            state.watch_cache().watch(&watched, revision).await.ok()
        };
        match events {
            Some(mut events) => {
                tokio::select! {
                    () = state.shutdown().cancelled() => return,
                    _ = events.next() => {}
                    () = tokio::time::sleep(TICK) => {}
                }
            }
            None => {
                tokio::select! {
                    () = state.shutdown().cancelled() => return,
                    () = tokio::time::sleep(TICK) => {}
                }
            }
        }
    }
}
