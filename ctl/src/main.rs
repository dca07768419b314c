//! The `miniplane` binary: one executable for every component (like kind's and k3s' single
//! binary). Each subcommand parses flags and calls its component library's `run`.

mod closed_pipe;
mod commands;
mod components;
mod kubectl;

use clap::{Parser, Subcommand};

/// mimalloc instead of the C library's allocator: a request to the API server makes and frees
/// hundreds of small JSON values across threads, and glibc's malloc/free were ~18% of the
/// server's CPU under load (creates at 64 clients, docs/benchmarks.md, "API server"). Built with
/// transparent huge pages off for the process (the workspace's `no_thp` feature), which kept
/// page faults from stalling requests. The API server bench (`apiserver/benches/apiserver.rs`)
/// uses the same allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A Kubernetes control plane in one binary.
#[derive(Debug, Parser)]
#[command(name = "miniplane", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Starts the whole control plane (API server, controller-manager, scheduler, nodes).
    Up(commands::up::UpArgs),
    /// Prints the kubeconfig of `miniplane up`, or merges it into ~/.kube/config.
    Kubeconfig(commands::kubeconfig::KubeconfigArgs),
    /// Runs the API server (kube-apiserver) with the embedded store.
    Apiserver(Box<components::apiserver::ApiserverArgs>),
    /// Runs the controller-manager (kube-controller-manager) against an API server.
    ControllerManager(components::controller_manager::ControllerManagerArgs),
    /// Runs the scheduler (kube-scheduler) against an API server.
    Scheduler(components::scheduler::SchedulerArgs),
    /// Runs simulated kubelets for many nodes (registration, heartbeats, pod lifecycle).
    Kubelet(components::kubelet::KubeletArgs),
    /// Runs the cloud-controller-manager against an API server and a cloud (docs/cloud.md).
    CloudControllerManager(components::cloud_controller_manager::CloudControllerManagerArgs),
    /// Runs the metrics-server (metrics.k8s.io for `kubectl top` and the HPA) against an API
    /// server, registered through API aggregation.
    MetricsServer(components::metrics_server::MetricsServerArgs),
    /// The kubectl-like verbs: apply, get, describe, delete, scale, rollout, events.
    #[command(flatten)]
    Verb(kubectl::Verb),
    /// Shows what a write set in motion: one causal, timed trace (tree, waterfall, exports).
    Trace(commands::trace::TraceArgs),
    /// Injects faults into a running cluster and clears them (docs/faults.md).
    Fault(commands::fault::FaultArgs),
    /// Sets the simulated CPU and memory a workload's pods use (`kubectl top`, the HPA).
    Load(commands::load::LoadArgs),
    /// Saves a running cluster's objects at one revision, checks a snapshot file, restores one
    /// into a new data directory (etcdctl/etcdutl snapshot).
    Snapshot(commands::snapshot::SnapshotArgs),
    /// Records every write of a running cluster (who, what, when, its trace) to a file.
    Record(commands::record::RecordArgs),
    /// Replays a recording's client writes on a new cluster and reports where the outcome
    /// differs from the recording, object by object (exit status 1 if it does).
    Replay(commands::replay::ReplayArgs),
    /// Shows and moves the cluster's virtual clock (`up --clock virtual`): advance, run, pause.
    Clock(commands::clock::ClockArgs),
    /// Teaching labs: list, start, status, check, hint, solve, reset (docs/labs.md).
    Lab(commands::lab::LabArgs),
    /// The simulated cloud: its instances, load balancers, routes and faults; `serve` runs it
    /// (docs/cloud.md).
    Cloud(commands::cloud::CloudArgs),
}

fn main() -> std::process::ExitCode {
    // A closed stdout (`miniplane lab check | head -2`) ends any subcommand quietly.
    closed_pipe::install();
    let cli = Cli::parse();
    // `up` shows progress lines on stderr: component logs only when something is wrong.
    let default_filter = match cli.command {
        Command::Up(_) | Command::Kubeconfig(_) => "warn",
        // Errors are reported as one line; kube's own request logs stay off (RUST_LOG shows them).
        Command::Fault(_)
        | Command::Lab(_)
        | Command::Load(_)
        | Command::Snapshot(_)
        | Command::Record(_)
        | Command::Replay(_)
        | Command::Clock(_) => "off",
        // The client verbs likewise; `cloud serve` logs as a component does.
        Command::Cloud(ref args) => args.default_log_filter(),
        _ => "info",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let result = match cli.command {
        Command::Up(args) => commands::up::main(args),
        Command::Kubeconfig(args) => commands::kubeconfig::main(args),
        Command::Apiserver(args) => components::apiserver::main(*args),
        Command::ControllerManager(args) => components::controller_manager::main(args),
        Command::Scheduler(args) => components::scheduler::main(args),
        Command::Kubelet(args) => components::kubelet::main(args),
        Command::CloudControllerManager(args) => components::cloud_controller_manager::main(args),
        Command::MetricsServer(args) => components::metrics_server::main(args),
        Command::Verb(verb) => kubectl::main(verb),
        Command::Trace(args) => commands::trace::main(args),
        Command::Fault(args) => commands::fault::main(args),
        Command::Load(args) => commands::load::main(args),
        Command::Snapshot(args) => commands::snapshot::main(args),
        Command::Clock(args) => commands::clock::main(args),
        Command::Record(args) => commands::record::main(args),
        // As diff(1): 0 the same, 1 different, 2 trouble.
        Command::Replay(args) => {
            return match commands::replay::main(args) {
                Ok(code) => code,
                Err(e) => {
                    eprintln!("miniplane: {e}");
                    std::process::ExitCode::from(2)
                }
            };
        }
        Command::Lab(args) => commands::lab::main(args),
        Command::Cloud(args) => commands::cloud::main(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if closed_pipe::is_closed_stdout_error(&e) => closed_pipe::die(),
        Err(e) => {
            eprintln!("miniplane: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
