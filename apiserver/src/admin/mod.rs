//! miniplane's admin API,
//! `/miniplane/v1/{faults,controllers,components,lab,history,snapshot,clock}`
//! (the contract is `docs/faults.md`; the types are the `admin` crate). No Kubernetes
//! counterpart.
//!
//! ```text
//!   POST /miniplane/v1/faults ─┐ read ConfigMap kube-system/miniplane-faults
//!   DELETE .../faults/{name}  ─┤ change its data
//!   POST .../controllers/{c}/  ┤ write it back with an ordinary PUT/POST through the same
//!        pause|resume|step    ─┘ handler chain as any client (traced, manager "miniplane-fault")
//!                                 └─▶ every write to it reloads the [`FaultTable`]
//!   PUT .../components/{c}/controllers, PUT .../lab ─▶ [`Reports`] (memory)
//!   GET .../history/{api path of an object} ─▶ the store's kept versions ([`history`])
//!   GET .../snapshot ─▶ every object at one revision, a snapshot file (`crate::snapshot`)
//!   GET|POST .../clock ─▶ ConfigMap kube-system/miniplane-clock, as the faults ([`clock`])
//! ```
//!
//! Going through the ConfigMap (rather than keeping faults in this process's memory) is what
//! lets components in other processes learn them by an ordinary watch, and what makes a fault
//! visible in `miniplane get` and in the trace.

pub mod clock;
pub mod fault_table;
pub mod history;
pub mod reports;
pub mod route;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use admin::{
    CLOCK_CONFIGMAP, ControllerList, ControllerStatus, FAULTS_CONFIGMAP, FAULTS_NAMESPACE,
    FIELD_MANAGER, Fault, FaultList, FaultSpec, LabStatus, StepRequest, faults_from_data,
};
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use serde::Serialize;
use serde_json::{Value, json};

pub use self::fault_table::{FaultTable, WatchAction};
pub use self::route::AdminRoute;
use crate::error::{ApiError, ErrorTarget, Result};
use crate::gvk::GroupVersion;
use crate::meta;
use crate::request::ResourcePath;
use crate::response::json_response;
use crate::state::AppState;
use crate::storage::ObjectRef;

/// Header of the admin API's own writes of the faults ConfigMap, naming the change
/// (`inject pause-deployment`, `clear stop-heartbeats-node-1`): the write's span carries it as
/// the attribute `fault`, so the trace says which fault was set or cleared.
pub const FAULT_HEADER: &str = "x-miniplane-fault";

/// Attempts of a read-modify-write of the faults ConfigMap before giving up.
const MAX_ATTEMPTS: usize = 8;

/// Whether a resource request writes one of the admin API's ConfigMaps in `kube-system`
/// (the faults', the clock's, or a ConfigMap not yet named: a create), after which the fault
/// table and the clock are reloaded ([`reload`]).
pub fn touches_admin_configmaps(method: &Method, path: &ResourcePath) -> bool {
    *method != Method::GET
        && path.gv.group.is_empty()
        && path.resource == "configmaps"
        && path.namespace.as_deref() == Some(FAULTS_NAMESPACE)
        && path
            .name
            .as_deref()
            .is_none_or(|n| n == FAULTS_CONFIGMAP || n == CLOCK_CONFIGMAP)
}

/// The `kube-system` ConfigMap `name` (the faults' or the clock's).
fn configmap_ref(state: &AppState, name: &str) -> Result<ObjectRef> {
    let info = state
        .registry()
        .lookup(&GroupVersion::new("", "v1"), "configmaps")
        .ok_or_else(|| ApiError::Internal("configmaps are not registered".into()))?;
    Ok(ObjectRef {
        info,
        namespace: Some(FAULTS_NAMESPACE.into()),
        name: name.into(),
    })
}

fn data_of(obj: &Value) -> BTreeMap<String, String> {
    obj.get("data")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Reads the faults ConfigMap into the fault table and the clock ConfigMap into the server's
/// clock (at start and after each write to either).
pub async fn reload(state: &AppState) {
    reload_faults(state).await;
    clock::reload(state).await;
}

async fn reload_faults(state: &AppState) {
    let result = match configmap_ref(state, FAULTS_CONFIGMAP) {
        Ok(r) => state.storage().get(&r).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(obj) => {
            let (faults, errors) = faults_from_data(&obj.as_ref().map(data_of).unwrap_or_default());
            for e in errors {
                tracing::warn!(error = %e, "ignoring an invalid fault in {FAULTS_NAMESPACE}/{FAULTS_CONFIGMAP}");
            }
            state.faults().set(faults);
        }
        Err(e) => tracing::warn!(error = %e, "cannot read the faults ConfigMap"),
    }
}

/// The 415 of a miniplane API body that is not JSON, in kube-apiserver's words
/// (`negotiation.NewUnsupportedMediaTypeError`).
const UNSUPPORTED_BODY: &str = "the body of the request was in an unknown format - accepted media types include: application/json";

/// Refuses (415) a request body sent as anything but JSON. A missing `Content-Type` means
/// JSON, as on the Kubernetes API; a page on another origin cannot send one (its `Origin` is
/// refused first, [`crate::access`]), while `text/plain` is what an HTML form or a `no-cors`
/// fetch can send.
pub fn require_json(headers: &HeaderMap, body: &[u8]) -> Result<()> {
    if body.is_empty() || !headers.contains_key(header::CONTENT_TYPE) {
        return Ok(());
    }
    match crate::request::content_type(headers).as_str() {
        "application/json" => Ok(()),
        _ => Err(ApiError::UnsupportedMediaType(UNSUPPORTED_BODY.into())),
    }
}

/// How the admin API sends a request through the server's whole handler chain (tracing,
/// fault table reload, as a client's request): the router hands its own dispatch to
/// [`handle`], so this module needs no import of the router above it.
pub type Dispatch = fn(AppState, Request) -> Pin<Box<dyn Future<Output = Response> + Send>>;

/// Serves one admin request; its writes of the faults ConfigMap go through `dispatch`.
pub async fn handle(
    state: AppState,
    dispatch: Dispatch,
    route: AdminRoute,
    method: Method,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response> {
    require_json(headers, body)?;
    let traceparent = headers.get("traceparent").cloned();
    let writer = Writer {
        state: &state,
        dispatch,
        traceparent,
    };
    match (route, method) {
        (AdminRoute::Snapshot, Method::GET) => crate::snapshot::serve(&state).await,
        (AdminRoute::Clock, Method::GET) => ok(&state.clock().status()),
        (AdminRoute::Clock, Method::POST) => {
            let request: admin::ClockRequest = parse(body)?;
            ok(&clock::change(&writer, request).await?)
        }
        (AdminRoute::History(path), Method::GET) => {
            let found = history::read(&state, &path).await;
            history::record(&state, headers, &path, &found);
            ok(&found?)
        }
        (AdminRoute::Faults(None), Method::GET) => ok(&FaultList {
            items: state.faults().list(),
        }),
        (AdminRoute::Faults(Some(name)), Method::GET) => {
            let fault = state
                .faults()
                .list()
                .into_iter()
                .find(|f| f.name == name)
                .ok_or_else(|| not_found(&name))?;
            ok(&fault)
        }
        (AdminRoute::Faults(None), Method::POST) => {
            let fault: Fault = parse(body)?;
            let fault = fault
                .normalize()
                .map_err(|e| ApiError::BadRequest(format!("invalid fault: {e}")))?;
            let created = writer.create(fault).await?;
            Ok(json_response(StatusCode::CREATED, &to_value(&created)))
        }
        (AdminRoute::Faults(Some(name)), Method::DELETE) => {
            let removed = writer.remove(|f| f.name == name).await?;
            match removed.into_iter().next() {
                Some(f) => ok(&f),
                None => Err(not_found(&name)),
            }
        }
        (AdminRoute::Faults(None), Method::DELETE) => ok(&FaultList {
            items: writer.remove(|_| true).await?,
        }),
        (AdminRoute::Controllers, Method::GET) => ok(&ControllerList {
            items: controllers(&state),
        }),
        (AdminRoute::ControllerAction(name, action), Method::POST) => {
            if !admin::fault::PAUSABLE_CONTROLLERS.contains(&name.as_str()) {
                return Err(ApiError::NotFound {
                    target: ErrorTarget {
                        group: String::new(),
                        resource: "controllers".into(),
                        kind: "Controller".into(),
                        name,
                    },
                });
            }
            let pause_name = format!("pause-{name}");
            match action.as_str() {
                "pause" => {
                    let fault = Fault::new(FaultSpec::PauseController {
                        controller: name,
                        steps: 0,
                    });
                    match writer.create(fault).await {
                        Ok(f) => ok(&f),
                        Err(ApiError::AlreadyExists { .. }) => {
                            let existing = state
                                .faults()
                                .list()
                                .into_iter()
                                .find(|f| f.name == pause_name);
                            existing.map_or_else(|| Err(not_found(&pause_name)), |f| ok(&f))
                        }
                        Err(e) => Err(e),
                    }
                }
                "resume" => ok(&FaultList {
                    items: writer.remove(|f| f.name == pause_name).await?,
                }),
                "step" => {
                    let request: StepRequest = if body.iter().all(u8::is_ascii_whitespace) {
                        StepRequest::default()
                    } else {
                        parse(body)?
                    };
                    if !(1..=100).contains(&request.count) {
                        return Err(ApiError::BadRequest(format!(
                            "count: Invalid value: {}: must be between 1 and 100",
                            request.count
                        )));
                    }
                    ok(&writer.step(&pause_name, &name, request.count).await?)
                }
                _ => Err(ApiError::PathNotFound),
            }
        }
        (AdminRoute::ComponentControllers(component), Method::PUT) => {
            let list: ControllerList = parse(body)?;
            let now = state.now().to_string();
            state
                .reports()
                .set_controllers(&component, list.items, &now);
            ok(&json!({}))
        }
        (AdminRoute::Lab, Method::GET) => match state.reports().lab() {
            Some(lab) => ok(&lab),
            None => Err(ApiError::NotFound {
                target: ErrorTarget {
                    group: String::new(),
                    resource: "labs".into(),
                    kind: "Lab".into(),
                    name: String::new(),
                },
            }),
        },
        (AdminRoute::Lab, Method::PUT) => {
            let lab: LabStatus = parse(body)?;
            state.reports().set_lab(lab);
            ok(&json!({}))
        }
        (_, method) => Err(ApiError::MethodNotAllowed(format!(
            "the server does not allow this method on the requested resource ({method})"
        ))),
    }
}

/// The reported controllers, as their components last reported them: `paused` is the
/// queue's own state (a pause takes effect when the component has seen the fault, usually
/// within milliseconds), not merely the fault's presence.
fn controllers(state: &AppState) -> Vec<ControllerStatus> {
    state.reports().controllers()
}

fn to_value<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn ok<T: Serialize>(value: &T) -> Result<Response> {
    Ok(json_response(StatusCode::OK, &to_value(value)))
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("invalid request body: {e}")))
}

fn not_found(name: &str) -> ApiError {
    ApiError::NotFound {
        target: ErrorTarget {
            group: String::new(),
            resource: "faults".into(),
            kind: "Fault".into(),
            name: name.to_string(),
        },
    }
}

/// A `kube-system` ConfigMap the admin API writes, and how its writes are told apart.
struct ConfigMapTarget {
    name: &'static str,
    /// The header naming the change (its span carries it as an attribute).
    header: &'static str,
    /// The field manager and User-Agent program of the writes.
    manager: &'static str,
    /// What it holds, for messages.
    what: &'static str,
}

/// The faults ConfigMap.
const FAULTS_TARGET: ConfigMapTarget = ConfigMapTarget {
    name: FAULTS_CONFIGMAP,
    header: FAULT_HEADER,
    manager: FIELD_MANAGER,
    what: "faults",
};

/// Writes the admin API's ConfigMaps (faults, clock) through the server's own handler chain.
struct Writer<'a> {
    state: &'a AppState,
    /// The router's dispatch ([`Dispatch`]).
    dispatch: Dispatch,
    /// The admin request's trace context, so the ConfigMap write joins the caller's trace.
    traceparent: Option<axum::http::HeaderValue>,
}

impl Writer<'_> {
    /// Adds `fault` (stamped with the time); 409 AlreadyExists if its name is taken.
    async fn create(&self, mut fault: Fault) -> Result<Fault> {
        fault.created = Some(self.state.now().to_string());
        let name = fault.name.clone();
        self.update(&FAULTS_TARGET, &format!("inject {name}"), |data| {
            if data.contains_key(&name) {
                return Err(ApiError::AlreadyExists {
                    target: ErrorTarget {
                        group: String::new(),
                        resource: "faults".into(),
                        kind: "Fault".into(),
                        name: name.clone(),
                    },
                });
            }
            data.insert(
                name.clone(),
                serde_json::to_string(&fault).unwrap_or_default(),
            );
            Ok(fault.clone())
        })
        .await
    }

    /// Removes the faults `which` selects; returns them.
    async fn remove(&self, which: impl Fn(&Fault) -> bool) -> Result<Vec<Fault>> {
        let names: Vec<String> = self
            .state
            .faults()
            .list()
            .into_iter()
            .filter(|f| which(f))
            .map(|f| f.name)
            .collect();
        self.update(
            &FAULTS_TARGET,
            &format!("clear {}", names.join(", ")),
            |data| {
                let (faults, _) = faults_from_data(data);
                let removed: Vec<Fault> = faults.into_iter().filter(|f| which(f)).collect();
                for f in &removed {
                    data.remove(&f.name);
                }
                Ok(removed)
            },
        )
        .await
    }

    /// Grants `count` more steps to the pause `pause_name`; 409 if the controller is not paused.
    async fn step(&self, pause_name: &str, controller: &str, count: u64) -> Result<Fault> {
        self.update(
            &FAULTS_TARGET,
            &format!("step {pause_name} by {count}"),
            |data| {
                let (faults, _) = faults_from_data(data);
                let mut fault = faults
                    .into_iter()
                    .find(|f| f.name == pause_name)
                    .ok_or_else(|| ApiError::Conflict {
                        target: ErrorTarget {
                            group: String::new(),
                            resource: "controllers".into(),
                            kind: "Controller".into(),
                            name: controller.to_string(),
                        },
                        detail: "the controller is not paused; pause it first".into(),
                    })?;
                if let FaultSpec::PauseController { steps, .. } = &mut fault.spec {
                    *steps += count;
                }
                data.insert(
                    pause_name.to_string(),
                    serde_json::to_string(&fault).unwrap_or_default(),
                );
                Ok(fault)
            },
        )
        .await
    }

    /// Read-modify-write of the ConfigMap's data; retried when another writer wins.
    async fn update<T>(
        &self,
        target: &ConfigMapTarget,
        what: &str,
        mut change: impl FnMut(&mut BTreeMap<String, String>) -> Result<T>,
    ) -> Result<T> {
        let r = configmap_ref(self.state, target.name)?;
        for _ in 0..MAX_ATTEMPTS {
            let current = self.state.storage().get(&r).await?;
            let mut data = current.as_ref().map(data_of).unwrap_or_default();
            let answer = change(&mut data)?;
            let path = format!("/api/v1/namespaces/{FAULTS_NAMESPACE}/configmaps");
            let (method, uri, body) = match &current {
                None => (
                    Method::POST,
                    path,
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": target.name, "namespace": FAULTS_NAMESPACE},
                           "data": data}),
                ),
                Some(obj) => {
                    let mut obj = obj.clone();
                    obj["data"] = json!(data);
                    let rv = meta::resource_version(&obj).unwrap_or_default().to_string();
                    obj["metadata"]["resourceVersion"] = json!(rv);
                    (Method::PUT, format!("{path}/{}", target.name), obj)
                }
            };
            let status = self.send(target, method, &uri, &body, what).await?;
            match status {
                s if s.is_success() => return Ok(answer),
                StatusCode::CONFLICT => continue,
                s => {
                    return Err(ApiError::Internal(format!(
                        "writing {FAULTS_NAMESPACE}/{}: {s}",
                        target.name
                    )));
                }
            }
        }
        Err(ApiError::Conflict {
            target: r.target(),
            detail: format!(
                "too many concurrent changes to the {}; try again",
                target.what
            ),
        })
    }

    /// One request through the server's router, as the client `target.manager`.
    async fn send(
        &self,
        target: &ConfigMapTarget,
        method: Method,
        uri: &str,
        body: &Value,
        what: &str,
    ) -> Result<StatusCode> {
        let mut builder = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::CONTENT_TYPE, "application/json")
            .header(target.header, what)
            .header(header::USER_AGENT, format!("{}/v1", target.manager));
        if let Some(tp) = &self.traceparent {
            builder = builder.header("traceparent", tp.clone());
        }
        let req = builder
            .body(Body::from(serde_json::to_vec(body).unwrap_or_default()))
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        let resp = (self.dispatch)(self.state.clone(), req).await;
        Ok(resp.status())
    }
}
