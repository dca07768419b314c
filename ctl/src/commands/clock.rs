//! `miniplane clock [show] | advance DURATION | run --speed N | pause`: the cluster's virtual
//! clock (`miniplane up --clock virtual`), which every component reads for its timers,
//! backoffs, grace periods, Leases and timestamps. No Kubernetes counterpart: a Kubernetes
//! cluster runs on its machines' clocks.
//!
//! ```text
//!   miniplane clock                  Virtual  2026-12-07T08:00:00Z  paused
//!   miniplane clock advance 5m       POST /miniplane/v1/clock {"advance":{"by":"5m"}}: runs
//!                                    at 100x until 5 minutes later (3 s), then as before
//!   miniplane clock run --speed 60   a minute of cluster time per second
//!   miniplane clock pause            the cluster's time stands still
//! ```
//!
//! The API server refuses a clock moved backwards (`advance -5m`) and any change of a
//! cluster on the machine's clock.

use admin::{ClockMode, ClockRequest, ClockStatus};

use super::fault::ClusterArgs;

/// `miniplane clock`.
#[derive(Debug, clap::Args)]
pub struct ClockArgs {
    #[command(subcommand)]
    command: Option<ClockCommand>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Debug, clap::Subcommand)]
enum ClockCommand {
    /// Prints the cluster's time, its clock (Virtual or Real) and its speed (the default).
    Show,
    /// Moves the cluster's time forward (a Go duration: 30s, 5m, 1h30m), running fast until
    /// there so every timer due on the way fires in order; waits until it has arrived.
    Advance {
        /// How far (`-5m` is refused: the clock never moves back).
        #[arg(allow_hyphen_values = true)]
        duration: String,
        /// Cluster seconds per machine second on the way (default 100: 5m in 3 s).
        #[arg(long, value_name = "SPEED")]
        speed: Option<f64>,
        /// Return at once instead of waiting for the clock to arrive.
        #[arg(long)]
        no_wait: bool,
    },
    /// Lets the cluster's time run at SPEED cluster seconds per machine second.
    Run {
        /// Cluster seconds per machine second (1: real time; 60: a minute a second).
        #[arg(long, value_name = "SPEED", default_value_t = 1.0)]
        speed: f64,
    },
    /// Stops the cluster's time until it is advanced or run again.
    Pause,
}

/// Runs `miniplane clock`.
pub fn main(args: ClockArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let api = args.cluster.admin().await?;
        let status = match args.command.unwrap_or(ClockCommand::Show) {
            ClockCommand::Show => api.clock().await?,
            ClockCommand::Advance {
                duration,
                speed,
                no_wait,
            } if no_wait => {
                api.move_clock(&ClockRequest::Advance {
                    by: duration,
                    speed,
                })
                .await?
            }
            ClockCommand::Advance {
                duration, speed, ..
            } => api.advance_clock(&duration, speed).await?,
            ClockCommand::Run { speed } => api.move_clock(&ClockRequest::Run { speed }).await?,
            ClockCommand::Pause => api.move_clock(&ClockRequest::Pause).await?,
        };
        println!("{}", line(&status));
        Ok(())
    })
}

/// `Virtual  2026-12-07T08:00:00Z  paused` / `running at 60x`.
pub(crate) fn line(status: &ClockStatus) -> String {
    let mode = match status.mode {
        ClockMode::Real => "Real",
        ClockMode::Virtual => "Virtual",
    };
    let pace = if status.speed == 0.0 {
        "paused".to_string()
    } else {
        format!("running at {}x", status.speed)
    };
    match &status.advancing_to {
        Some(to) => format!("{mode}  {}  {pace} to {to}", status.now),
        None => format!("{mode}  {}  {pace}", status.now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_mode_time_and_pace() {
        let mut status = ClockStatus {
            mode: ClockMode::Virtual,
            now: "2026-12-07T08:00:00Z".into(),
            speed: 0.0,
            advancing_to: None,
        };
        assert_eq!(line(&status), "Virtual  2026-12-07T08:00:00Z  paused");
        status.speed = 60.0;
        assert_eq!(
            line(&status),
            "Virtual  2026-12-07T08:00:00Z  running at 60x"
        );
        status.mode = ClockMode::Real;
        status.speed = 1.0;
        assert_eq!(line(&status), "Real  2026-12-07T08:00:00Z  running at 1x");
    }
}
