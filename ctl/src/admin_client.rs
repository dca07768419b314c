//! [`AdminClient`]: the admin API (`/miniplane/v1/faults`, `controllers`, `lab`, `history`,
//! `snapshot`, `clock`; see `docs/faults.md`) from Rust, over any kube client of the cluster.
//! `miniplane fault`, `miniplane snapshot`, the lab runner and the tests use it.

use admin::{ControllerList, ControllerStatus, Fault, FaultList, FaultSpec, LabStatus, PREFIX};
use serde::de::DeserializeOwned;

/// Errors of the admin API: the server's `Status` message, or a transport error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AdminError(pub String);

impl From<kube::Error> for AdminError {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(status) => AdminError(status.message),
            other => AdminError(other.to_string()),
        }
    }
}

/// The admin API of one cluster.
#[derive(Clone)]
pub struct AdminClient {
    client: kube::Client,
}

impl AdminClient {
    /// Talks to the cluster `client` reaches.
    pub fn new(client: kube::Client) -> Self {
        AdminClient { client }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: http::Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<T, AdminError> {
        let mut builder = http::Request::builder()
            .method(method)
            .uri(format!("{PREFIX}/{path}"));
        if body.is_some() {
            builder = builder.header(http::header::CONTENT_TYPE, "application/json");
        }
        let request = builder
            .body(body.unwrap_or_default())
            .map_err(|e| AdminError(e.to_string()))?;
        let text = self.client.request_text(request).await?;
        serde_json::from_str(&text).map_err(|e| AdminError(format!("{path}: {e}")))
    }

    fn json<T: serde::Serialize>(value: &T) -> Option<Vec<u8>> {
        Some(serde_json::to_vec(value).unwrap_or_default())
    }

    /// The faults in force.
    pub async fn faults(&self) -> Result<Vec<Fault>, AdminError> {
        let list: FaultList = self.call(http::Method::GET, "faults", None).await?;
        Ok(list.items)
    }

    /// Injects a fault (named after its kind and target); returns it as stored.
    pub async fn inject(&self, spec: FaultSpec) -> Result<Fault, AdminError> {
        self.call(http::Method::POST, "faults", Self::json(&Fault::new(spec)))
            .await
    }

    /// Clears the fault `name`; returns it.
    pub async fn clear(&self, name: &str) -> Result<Fault, AdminError> {
        self.call(http::Method::DELETE, &format!("faults/{name}"), None)
            .await
    }

    /// Clears every fault; returns them.
    pub async fn clear_all(&self) -> Result<Vec<Fault>, AdminError> {
        let list: FaultList = self.call(http::Method::DELETE, "faults", None).await?;
        Ok(list.items)
    }

    /// The controllers' work queues, as last reported.
    pub async fn controllers(&self) -> Result<Vec<ControllerStatus>, AdminError> {
        let list: ControllerList = self.call(http::Method::GET, "controllers", None).await?;
        Ok(list.items)
    }

    /// Pauses `controller`'s work queue.
    pub async fn pause(&self, controller: &str) -> Result<Fault, AdminError> {
        self.call(
            http::Method::POST,
            &format!("controllers/{controller}/pause"),
            None,
        )
        .await
    }

    /// Resumes it.
    pub async fn resume(&self, controller: &str) -> Result<Vec<Fault>, AdminError> {
        let list: FaultList = self
            .call(
                http::Method::POST,
                &format!("controllers/{controller}/resume"),
                None,
            )
            .await?;
        Ok(list.items)
    }

    /// Lets `count` keys through its paused queue.
    pub async fn step(&self, controller: &str, count: u64) -> Result<Fault, AdminError> {
        self.call(
            http::Method::POST,
            &format!("controllers/{controller}/step"),
            Self::json(&admin::StepRequest { count }),
        )
        .await
    }

    /// Publishes a lab's status.
    pub async fn put_lab(&self, lab: &LabStatus) -> Result<(), AdminError> {
        let _: serde_json::Value = self.call(http::Method::PUT, "lab", Self::json(lab)).await?;
        Ok(())
    }

    /// The lab status, if a lab published one.
    pub async fn lab(&self) -> Result<Option<LabStatus>, AdminError> {
        let request = http::Request::get(format!("{PREFIX}/lab"))
            .body(Vec::new())
            .map_err(|e| AdminError(e.to_string()))?;
        match self.client.request_text(request).await {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| AdminError(e.to_string())),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Every kept version of the object at `api_path` (its API path without the leading
    /// `/`, e.g. `apis/apps/v1/namespaces/default/deployments/web`).
    pub async fn history(&self, api_path: &str) -> Result<admin::ObjectHistory, AdminError> {
        self.call(http::Method::GET, &format!("history/{api_path}"), None)
            .await
    }

    /// The cluster's clock: Real or Virtual, its time and speed.
    pub async fn clock(&self) -> Result<admin::ClockStatus, AdminError> {
        self.call(http::Method::GET, "clock", None).await
    }

    /// Advances, runs or pauses the cluster's virtual clock; returns it as changed.
    pub async fn move_clock(
        &self,
        request: &admin::ClockRequest,
    ) -> Result<admin::ClockStatus, AdminError> {
        self.call(http::Method::POST, "clock", Self::json(request))
            .await
    }

    /// Advances the cluster's virtual clock by `by` (a Go duration) at `speed` (the default
    /// when `None`) and waits until its time has got there; returns the clock then.
    pub async fn advance_clock(
        &self,
        by: &str,
        speed: Option<f64>,
    ) -> Result<admin::ClockStatus, AdminError> {
        let request = admin::ClockRequest::Advance {
            by: by.to_string(),
            speed,
        };
        let mut status = self.move_clock(&request).await?;
        while status.advancing_to.is_some() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            status = self.clock().await?;
        }
        Ok(status)
    }

    /// The spans the API server's trace collector holds of trace `id` (32 hex digits).
    pub async fn trace_spans(&self, id: &str) -> Result<Vec<trace::Span>, AdminError> {
        #[derive(serde::Deserialize)]
        struct Trace {
            spans: Vec<trace::Span>,
        }
        let request = http::Request::get(format!("{}/{id}", trace::COLLECTOR_PATH))
            .body(Vec::new())
            .map_err(|e| AdminError(e.to_string()))?;
        let trace: Trace = self.client.request(request).await?;
        Ok(trace.spans)
    }

    /// A snapshot of the cluster's store: every object at one revision, as a snapshot file's
    /// bytes (`apiserver::snapshot`).
    pub async fn snapshot(&self) -> Result<Vec<u8>, AdminError> {
        use futures::AsyncReadExt;
        let request = http::Request::get(format!("{PREFIX}/snapshot"))
            .body(Vec::new())
            .map_err(|e| AdminError(e.to_string()))?;
        let mut body = Box::pin(self.client.request_stream(request).await?);
        let mut data = Vec::new();
        body.read_to_end(&mut data)
            .await
            .map_err(|e| AdminError(format!("reading the snapshot: {e}")))?;
        Ok(data)
    }
}
