//! The cluster clock on the API server: `GET|POST /miniplane/v1/clock`, the ConfigMap
//! `kube-system/miniplane-clock` behind it (the `admin` crate's `clock` module has the
//! rule), and the server's own reading of it ([`ServerClock`]), which stamps
//! creationTimestamps, managedFields times, deletionTimestamps and the server's Leases and
//! conditions.
//!
//! No Kubernetes counterpart (kube-apiserver reads the machine's clock).
//!
//! ```text
//!   up --clock virtual ─▶ bootstrap: create the ConfigMap if absent (time = machine now)
//!   POST /clock {"advance":{"by":"10m"}} ─▶ read-modify-write of the ConfigMap through the handler
//!        chain (manager miniplane-clock, span attribute `clock`) ─▶ reload ─▶ ServerClock
//!   every component watches the same ConfigMap (client::cluster_clock)
//! ```

use std::sync::RwLock;

use admin::{CLOCK_CONFIGMAP, CLOCK_NAMESPACE, ClockMode, ClockRequest, ClockState, ClockStatus};
use jiff::{SignedDuration, Timestamp};
use serde_json::json;

use super::{ConfigMapTarget, Writer, configmap_ref, data_of};
use crate::error::{ApiError, Result};
use crate::rest::{self, WriteContext};
use crate::state::AppState;

/// Header of the admin API's writes of the clock ConfigMap, naming the change (`advance
/// 10m`, `run --speed 60`, `pause`): the write's span carries it as the attribute `clock`.
pub const CLOCK_HEADER: &str = "x-miniplane-clock";

/// Field manager (and User-Agent program) of the admin API's writes of the clock.
pub const CLOCK_MANAGER: &str = "miniplane-clock";

/// The clock ConfigMap.
const CLOCK_TARGET: ConfigMapTarget = ConfigMapTarget {
    name: CLOCK_CONFIGMAP,
    header: CLOCK_HEADER,
    manager: CLOCK_MANAGER,
    what: "clock",
};

/// The server's reading of the cluster clock: the machine's until a clock ConfigMap is
/// loaded, then its virtual time (never moving back).
#[derive(Debug, Default)]
pub struct ServerClock {
    state: RwLock<Option<ClockState>>,
}

impl ServerClock {
    /// The cluster's time now.
    pub fn now(&self) -> Timestamp {
        let real = Timestamp::now();
        match *self.state.read().unwrap_or_else(|e| e.into_inner()) {
            Some(state) => state.now(real),
            None => real,
        }
    }

    /// The virtual clock's state, `None` on the machine's clock.
    pub fn state(&self) -> Option<ClockState> {
        *self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes `next` unless it would move the clock back (ignored with a warning: the admin
    /// API refuses such a change, but the ConfigMap can be written by hand).
    pub fn set(&self, next: ClockState) {
        let real = Timestamp::now();
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        if let Some(current) = *state
            && next.now(real) < current.now(real)
        {
            tracing::warn!(
                "ignoring a change of {CLOCK_NAMESPACE}/{CLOCK_CONFIGMAP} that moves the clock back"
            );
            return;
        }
        *state = Some(next);
    }

    /// `GET /miniplane/v1/clock`.
    pub fn status(&self) -> ClockStatus {
        let real = Timestamp::now();
        match self.state() {
            Some(state) => state.status(real),
            None => ClockStatus {
                mode: ClockMode::Real,
                now: real.to_string(),
                speed: 1.0,
                advancing_to: None,
            },
        }
    }
}

/// Reads the clock ConfigMap into the server's clock (a missing one leaves it as it was: a
/// cluster does not switch clocks while it runs).
pub async fn reload(state: &AppState) {
    let found = match configmap_ref(state, CLOCK_CONFIGMAP) {
        Ok(r) => state.storage().get(&r).await,
        Err(e) => Err(e),
    };
    match found {
        Ok(Some(obj)) => match ClockState::from_data(&data_of(&obj)) {
            Ok(clock) => state.clock().set(clock),
            Err(e) => tracing::warn!(error = %e, "ignoring an invalid cluster clock"),
        },
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "cannot read the clock ConfigMap"),
    }
}

/// Starts the cluster on a virtual clock running at `speed` (0: paused) from `start` (the
/// machine's time if `None`), unless it already has one (a restarted cluster keeps its time).
pub async fn bootstrap(state: &AppState, speed: f64, start: Option<Timestamp>) -> Result<()> {
    let r = configmap_ref(state, CLOCK_CONFIGMAP)?;
    if state.storage().get(&r).await?.is_some() {
        return Ok(());
    }
    let mut clock = ClockState::starting(Timestamp::now(), speed);
    if let Some(start) = start {
        clock.time = start;
    }
    let mut obj = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CLOCK_CONFIGMAP, "namespace": CLOCK_NAMESPACE},
        "data": clock.to_data(),
    });
    let wctx = WriteContext::server_own(CLOCK_MANAGER, clock.time, state.ids().clone());
    rest::default(&r.info, &mut obj)?;
    rest::before_create(&r.info, Some(CLOCK_NAMESPACE), &mut obj, &wctx)?;
    match state.storage().create(&r, obj).await {
        Ok(_) | Err(ApiError::AlreadyExists { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// A Go duration that may be negative (`-5m`), for `advance`.
fn signed_duration(text: &str) -> Result<SignedDuration> {
    let (negative, magnitude) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let d = apimachinery::duration::parse_duration(magnitude)
        .ok()
        .and_then(|d| SignedDuration::try_from(d).ok())
        .ok_or_else(|| {
            ApiError::BadRequest(format!(
                "advance: Invalid value: {text:?}: time: invalid duration {text:?}"
            ))
        })?;
    Ok(if negative { -d } else { d })
}

/// What a change is called in its span and in its write's header.
fn describe(request: &ClockRequest) -> String {
    match request {
        ClockRequest::Advance { by, speed: None } => format!("advance {by}"),
        ClockRequest::Advance {
            by,
            speed: Some(speed),
        } => format!("advance {by} --speed {speed}"),
        ClockRequest::Run { speed } => format!("run --speed {speed}"),
        ClockRequest::Pause => "pause".into(),
    }
}

/// `POST /miniplane/v1/clock`: the change made, through the ConfigMap; 400 on a clock that
/// is real, a negative advance or a bad speed.
pub(super) async fn change(writer: &Writer<'_>, request: ClockRequest) -> Result<ClockStatus> {
    let advance = match &request {
        ClockRequest::Advance { by, .. } => Some(signed_duration(by)?),
        _ => None,
    };
    let next = writer
        .update(&CLOCK_TARGET, &describe(&request), |data| {
            if data.is_empty() {
                return Err(ApiError::BadRequest(
                    "the cluster runs on the machine's clock: start it with --clock virtual to move its time".into(),
                ));
            }
            let current = ClockState::from_data(data)
                .map_err(|e| ApiError::Internal(e.to_string()))?;
            let next = current
                .apply(&request, advance, Timestamp::now())
                .map_err(|e| ApiError::BadRequest(e.to_string()))?;
            *data = next.to_data();
            Ok(next)
        })
        .await?;
    Ok(next.status(Timestamp::now()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advances_parse_with_their_sign() {
        assert_eq!(
            signed_duration("1h30m").expect("ok"),
            SignedDuration::from_mins(90)
        );
        assert_eq!(
            signed_duration("-5m").expect("ok"),
            SignedDuration::from_mins(-5)
        );
        assert!(signed_duration("soon").is_err());
    }

    #[test]
    fn the_server_clock_never_moves_back() {
        let clock = ServerClock::default();
        assert_eq!(clock.status().mode, ClockMode::Real);
        let t: Timestamp = "2030-01-01T00:00:00Z".parse().expect("ts");
        let paused = ClockState {
            anchor: Timestamp::now(),
            ..ClockState::starting(t, 0.0)
        };
        clock.set(paused);
        assert_eq!(clock.now(), t);
        clock.set(ClockState {
            time: t - SignedDuration::from_hours(1),
            ..paused
        });
        assert_eq!(clock.now(), t, "a state from the past is ignored");
        assert_eq!(clock.status().mode, ClockMode::Virtual);
    }
}
