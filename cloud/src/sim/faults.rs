//! Faults: a flaky cloud on purpose. Per API group (`instances`, `loadbalancers`, `routes`,
//! or `all` of them), a fraction of the calls fail with HTTP 503 and a JSON message, and every
//! call can be slowed by a delay, so the cloud-controller-manager's retries, backoff and
//! timeouts can be watched at work. No Kubernetes counterpart: real clouds do this on their
//! own (throttling, `RequestLimitExceeded`, regional outages).
//!
//! ```text
//!   PUT /v1/faults {"api":"loadbalancers","fail_fraction":0.5,"delay_ms":2000}
//!   PUT /v1/loadbalancers/a3f2...  ──▶ waits 2 s, then half of the time:
//!       503 {"message":"injected fault: 50% of loadbalancers calls fail (miniplane cloud fault clear)"}
//! ```
//!
//! A call of a group meets that group's fault and the `all` fault: the delays add up and each
//! may fail it. The faults are part of the cloud's state, so they survive a restart; the
//! faults API itself (`/v1/faults`) is never faulted, so they can always be cleared.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::api::Rejection;
use super::state::CloudState;

/// The longest delay a fault may add (a longer one would only look like a hung cloud).
const MAX_DELAY_MS: u64 = 10 * 60 * 1000;

/// The API group a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum FaultApi {
    /// `/v1/instances`: `InstancesV2` and the instance admin calls.
    #[serde(rename = "instances")]
    Instances,
    /// `/v1/loadbalancers`: `LoadBalancer`.
    #[serde(rename = "loadbalancers")]
    LoadBalancers,
    /// `/v1/routes`: `Routes`.
    #[serde(rename = "routes")]
    Routes,
    /// Every group above.
    #[serde(rename = "all")]
    All,
}

impl FaultApi {
    /// `instances`, `loadbalancers`, `routes` or `all`.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultApi::Instances => "instances",
            FaultApi::LoadBalancers => "loadbalancers",
            FaultApi::Routes => "routes",
            FaultApi::All => "all",
        }
    }
}

impl fmt::Display for FaultApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for FaultApi {
    type Err = String;

    fn from_str(s: &str) -> Result<FaultApi, String> {
        match s {
            "instances" => Ok(FaultApi::Instances),
            "loadbalancers" => Ok(FaultApi::LoadBalancers),
            "routes" => Ok(FaultApi::Routes),
            "all" => Ok(FaultApi::All),
            _ => Err(format!(
                "unknown cloud API {s:?} (instances, loadbalancers, routes or all)"
            )),
        }
    }
}

/// A fault in force on one API group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    /// The group it applies to.
    pub api: FaultApi,
    /// The fraction of calls that fail with 503, from 0 to 1.
    #[serde(default)]
    pub fail_fraction: f64,
    /// The delay added to every call, in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
}

impl Fault {
    /// The delay added to every call.
    pub fn delay(&self) -> Duration {
        Duration::from_millis(self.delay_ms)
    }

    /// The fail fraction as a percentage, to one decimal: `50%`, `12.5%`.
    pub fn fail_percentage(&self) -> String {
        let tenths = (self.fail_fraction * 1000.0).round() as u64;
        if tenths.is_multiple_of(10) {
            format!("{}%", tenths / 10)
        } else {
            format!("{}.{}%", tenths / 10, tenths % 10)
        }
    }
}

/// What the faults do to one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// How long to wait before answering.
    pub delay: Duration,
    /// The message to fail with, if the call fails.
    pub failure: Option<String>,
}

impl CloudState {
    /// The faults in force, by group.
    pub(crate) fn faults(&self) -> Vec<Fault> {
        self.faults.clone()
    }

    /// Puts `fault` in force on its group, replacing the one there; a fault that neither
    /// fails nor delays clears the group.
    pub(crate) fn set_fault(&mut self, fault: Fault) -> Result<(), Rejection> {
        if !(0.0..=1.0).contains(&fault.fail_fraction) {
            return Err(Rejection::Invalid(format!(
                "fail_fraction {} is not between 0 and 1",
                fault.fail_fraction
            )));
        }
        if fault.delay_ms > MAX_DELAY_MS {
            return Err(Rejection::Invalid(format!(
                "delay_ms {} is longer than {MAX_DELAY_MS} (10 minutes)",
                fault.delay_ms
            )));
        }
        self.faults.retain(|f| f.api != fault.api);
        if fault.fail_fraction > 0.0 || fault.delay_ms > 0 {
            self.faults.push(fault);
            self.faults.sort_by_key(|f| f.api);
        }
        Ok(())
    }

    /// Clears the fault of `api`, or every fault.
    pub(crate) fn clear_faults(&mut self, api: Option<FaultApi>) {
        self.faults.retain(|f| api.is_some_and(|a| f.api != a));
    }

    /// What the faults do to a call of `api` (never [`FaultApi::All`]).
    pub(crate) fn fault_verdict(&self, api: FaultApi, rng: &mut impl Rng) -> Verdict {
        let mut verdict = Verdict {
            delay: Duration::ZERO,
            failure: None,
        };
        for fault in self
            .faults
            .iter()
            .filter(|f| f.api == api || f.api == FaultApi::All)
        {
            verdict.delay += fault.delay();
            if fault.fail_fraction > 0.0
                && verdict.failure.is_none()
                && rng.random_bool(fault.fail_fraction)
            {
                verdict.failure = Some(format!(
                    "injected fault: {} of {} calls fail (miniplane cloud fault clear)",
                    fault.fail_percentage(),
                    fault.api
                ));
            }
        }
        verdict
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    fn fault(api: FaultApi, fail_fraction: f64, delay_ms: u64) -> Fault {
        Fault {
            api,
            fail_fraction,
            delay_ms,
        }
    }

    #[test]
    fn a_group_meets_its_fault_and_the_all_fault() {
        let mut state = CloudState::default();
        state
            .set_fault(fault(FaultApi::Routes, 1.0, 200))
            .expect("set");
        state.set_fault(fault(FaultApi::All, 0.0, 50)).expect("set");
        let mut rng = StdRng::seed_from_u64(1);
        let routes = state.fault_verdict(FaultApi::Routes, &mut rng);
        assert_eq!(routes.delay, Duration::from_millis(250));
        assert_eq!(
            routes.failure.as_deref(),
            Some("injected fault: 100% of routes calls fail (miniplane cloud fault clear)")
        );
        let instances = state.fault_verdict(FaultApi::Instances, &mut rng);
        assert_eq!(
            instances,
            Verdict {
                delay: Duration::from_millis(50),
                failure: None
            }
        );
    }

    #[test]
    fn a_fraction_fails_about_that_share_of_calls() {
        let mut state = CloudState::default();
        state
            .set_fault(fault(FaultApi::Instances, 0.25, 0))
            .expect("set");
        let mut rng = StdRng::seed_from_u64(42);
        let failed = (0..4000)
            .filter(|_| {
                state
                    .fault_verdict(FaultApi::Instances, &mut rng)
                    .failure
                    .is_some()
            })
            .count();
        assert!((800..1200).contains(&failed), "{failed} of 4000 failed");
    }

    #[test]
    fn set_replaces_and_clear_removes() {
        let mut state = CloudState::default();
        state
            .set_fault(fault(FaultApi::Routes, 0.5, 0))
            .expect("set");
        state
            .set_fault(fault(FaultApi::Instances, 0.0, 100))
            .expect("set");
        state
            .set_fault(fault(FaultApi::Routes, 0.1, 0))
            .expect("replace");
        let apis: Vec<(FaultApi, f64)> = state
            .faults()
            .iter()
            .map(|f| (f.api, f.fail_fraction))
            .collect();
        assert_eq!(apis, [(FaultApi::Instances, 0.0), (FaultApi::Routes, 0.1)]);
        state
            .set_fault(fault(FaultApi::Instances, 0.0, 0))
            .expect("a no-op fault clears");
        assert_eq!(state.faults().len(), 1);
        state.set_fault(fault(FaultApi::All, 1.0, 0)).expect("set");
        state.clear_faults(Some(FaultApi::Routes));
        assert_eq!(
            state.faults().iter().map(|f| f.api).collect::<Vec<_>>(),
            [FaultApi::All]
        );
        state.clear_faults(None);
        assert!(state.faults().is_empty());
    }

    #[test]
    fn out_of_range_faults_are_refused() {
        let mut state = CloudState::default();
        for bad in [
            fault(FaultApi::All, 1.5, 0),
            fault(FaultApi::All, -0.1, 0),
            fault(FaultApi::All, f64::NAN, 0),
            fault(FaultApi::All, 0.0, MAX_DELAY_MS + 1),
        ] {
            let err = state.set_fault(bad.clone()).expect_err("out of range");
            assert_eq!(err.status(), 400, "{bad:?}");
        }
        assert!(state.faults().is_empty());
        assert_eq!("loadbalancers".parse(), Ok(FaultApi::LoadBalancers));
        assert_eq!(fault(FaultApi::All, 0.07, 0).fail_percentage(), "7%");
        assert_eq!(fault(FaultApi::All, 0.125, 0).fail_percentage(), "12.5%");
        assert!("lbs".parse::<FaultApi>().is_err());
    }
}
