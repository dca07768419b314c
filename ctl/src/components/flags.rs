//! The flags `miniplane controller-manager` and `miniplane scheduler` share, named as
//! kube-controller-manager's and kube-scheduler's (component-base's `--leader-elect*` and the
//! serving options' `--secure-port`).
//!
//! Unlike Kubernetes, `/healthz` and `/metrics` are served over plain HTTP on 127.0.0.1 (no
//! certificates yet); `--listen ADDR` sets the whole address instead of the port.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use apimachinery::duration::parse_duration;

/// `--leader-elect` and its timing.
#[derive(Debug, Clone, clap::Args)]
pub struct LeaderElectArgs {
    /// Do the work only while holding this component's Lease in kube-system, so that several
    /// copies can run and one takes over when the leader stops (`--leader-elect=false`: no
    /// Lease).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// How long a standby waits after the last observed renewal before taking the Lease.
    #[arg(long, value_parser = parse_duration, default_value = "15s")]
    leader_elect_lease_duration: Duration,
    /// How long the leader retries renewing before giving up.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    leader_elect_renew_deadline: Duration,
    /// Time between acquire/renew attempts.
    #[arg(long, value_parser = parse_duration, default_value = "2s")]
    leader_elect_retry_period: Duration,
}

impl LeaderElectArgs {
    /// The election for the Lease `kube-system/<lease>`, `None` with `--leader-elect=false`;
    /// refuses timings Kubernetes refuses (`ValidateLeaderElectionConfiguration`).
    pub fn election(&self, lease: &str) -> anyhow::Result<Option<client::LeaderElection>> {
        if !self.leader_elect {
            return Ok(None);
        }
        let zero = Duration::ZERO;
        if self.leader_elect_lease_duration <= zero
            || self.leader_elect_renew_deadline <= zero
            || self.leader_elect_retry_period <= zero
        {
            anyhow::bail!("--leader-elect-* durations must be greater than zero");
        }
        if self.leader_elect_lease_duration <= self.leader_elect_renew_deadline {
            anyhow::bail!(
                "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline"
            );
        }
        Ok(Some(client::LeaderElection {
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
            ..client::LeaderElection::new(lease)
        }))
    }
}

/// Where `/healthz` and `/metrics` are served: `--listen` if given, else 127.0.0.1 on
/// `--secure-port`; `None` for `--secure-port 0` (not served, as in Kubernetes).
pub fn health_address(listen: Option<SocketAddr>, secure_port: u16) -> Option<SocketAddr> {
    match (listen, secure_port) {
        (Some(addr), _) => Some(addr),
        (None, 0) => None,
        (None, port) => Some(SocketAddr::from((Ipv4Addr::LOCALHOST, port))),
    }
}

/// The one-line error for a health address that could not be bound (`in_use`: the port is
/// taken; `detail`: the OS error).
pub fn bind_error(component: &str, addr: SocketAddr, in_use: bool, detail: &str) -> anyhow::Error {
    if in_use {
        anyhow::anyhow!(
            "cannot serve /healthz on {addr}: the port is in use (another {component}?); \
             choose another with --secure-port, or --secure-port 0 to serve none"
        )
    } else {
        anyhow::anyhow!("cannot serve /healthz on {addr}: {detail}")
    }
}

/// A controller manager's bind error as the CLI says it: a health port that could not be
/// bound is [`bind_error`]'s one line, anything else as it is.
pub fn manager_bind_error(
    component: &str,
    listen: Option<SocketAddr>,
    error: controllers::Error,
) -> anyhow::Error {
    match (error, listen) {
        (
            controllers::Error::Bind {
                message, in_use, ..
            },
            Some(addr),
        ) => bind_error(component, addr, in_use, &message),
        (e, _) => e.into(),
    }
}

/// What a bound controller manager (`component`: `controller-manager`,
/// `cloud-controller-manager`) does in the foreground: print its start line on stdout
/// (`miniplane NAME started (healthz and metrics on URL)`), then `run` until Ctrl-C or SIGTERM.
pub async fn serve_manager<F, Fut>(
    component: &str,
    health: Option<SocketAddr>,
    run: F,
) -> anyhow::Result<()>
where
    F: FnOnce(tokio_util::sync::CancellationToken) -> Fut,
    Fut: std::future::Future<Output = controllers::Result<()>>,
{
    match health {
        Some(addr) => {
            println!("miniplane {component} started (healthz and metrics on http://{addr})")
        }
        None => println!("miniplane {component} started"),
    }
    let shutdown = tokio_util::sync::CancellationToken::new();
    let signal_token = shutdown.clone();
    tokio::spawn(async move {
        crate::components::apiserver::wait_for_signal().await;
        tracing::info!("shutting down");
        signal_token.cancel();
    });
    run(shutdown).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        election: LeaderElectArgs,
    }

    fn election(args: &[&str]) -> anyhow::Result<Option<client::LeaderElection>> {
        let flags = Flags::try_parse_from(std::iter::once("x").chain(args.iter().copied()))?;
        flags.election.election("kube-scheduler")
    }

    #[test]
    fn leader_election_is_on_by_default_with_kubernetes_timing() {
        let e = election(&[]).unwrap().unwrap();
        assert_eq!(e.lease(), "kube-system/kube-scheduler");
        assert_eq!(e.lease_duration, Duration::from_secs(15));
        assert!(election(&["--leader-elect=false"]).unwrap().is_none());
        let e = election(&["--leader-elect", "--leader-elect-lease-duration", "30s"])
            .unwrap()
            .unwrap();
        assert_eq!(e.lease_duration, Duration::from_secs(30));
    }

    #[test]
    fn a_lease_shorter_than_the_renew_deadline_is_refused() {
        let err = election(&["--leader-elect-lease-duration", "5s"]).unwrap_err();
        assert!(err.to_string().contains("must be greater than"), "{err}");
    }

    #[test]
    fn secure_port_zero_serves_nothing() {
        assert_eq!(health_address(None, 0), None);
        assert_eq!(
            health_address(None, 10259),
            Some("127.0.0.1:10259".parse().unwrap())
        );
        let listen = "127.0.0.1:0".parse().unwrap();
        assert_eq!(health_address(Some(listen), 10259), Some(listen));
    }

    #[test]
    fn a_taken_port_is_one_clear_line() {
        let addr = "127.0.0.1:10259".parse().unwrap();
        let msg = bind_error("scheduler", addr, true, "Address in use").to_string();
        assert!(!msg.contains('\n'));
        assert!(
            msg.contains("another scheduler") && msg.contains("--secure-port"),
            "{msg}"
        );
    }
}
