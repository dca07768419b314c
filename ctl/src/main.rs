//! The `miniplane` binary: one executable for every component (like kind's and k3s' single
//! binary). Each subcommand parses flags and calls its component library's `run`.

mod apiserver_cmd;
mod cli;
mod closed_pipe;
mod component_flags;
mod controller_manager_cmd;
mod fault_cmd;
mod kubeconfig_cmd;
mod kubelet_cmd;
mod lab_cmd;
mod scheduler_cmd;
mod trace_cmd;
mod up_cmd;

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
    Up(up_cmd::UpArgs),
    /// Prints the kubeconfig of `miniplane up`, or merges it into ~/.kube/config.
    Kubeconfig(kubeconfig_cmd::KubeconfigArgs),
    /// Runs the API server (kube-apiserver) with the embedded store.
    Apiserver(apiserver_cmd::ApiserverArgs),
    /// Runs the controller-manager (kube-controller-manager) against an API server.
    ControllerManager(controller_manager_cmd::ControllerManagerArgs),
    /// Runs the scheduler (kube-scheduler) against an API server.
    Scheduler(scheduler_cmd::SchedulerArgs),
    /// Runs simulated kubelets for many nodes (registration, heartbeats, pod lifecycle).
    Kubelet(kubelet_cmd::KubeletArgs),
    /// The kubectl-like verbs: apply, get, describe, delete, scale, rollout, events.
    #[command(flatten)]
    Verb(cli::Verb),
    /// Shows what a write set in motion: one causal, timed trace (tree, waterfall, exports).
    Trace(trace_cmd::TraceArgs),
    /// Injects faults into a running cluster and clears them (docs/faults.md).
    Fault(fault_cmd::FaultArgs),
    /// Teaching labs: list, start, status, check, hint, solve, reset (docs/labs.md).
    Lab(lab_cmd::LabArgs),
}

fn main() -> std::process::ExitCode {
    // A closed stdout (`miniplane lab check | head -2`) ends any subcommand quietly.
    closed_pipe::install();
    let cli = Cli::parse();
    // `up` shows progress lines on stderr: component logs only when something is wrong.
    let default_filter = match cli.command {
        Command::Up(_) | Command::Kubeconfig(_) => "warn",
        // Errors are reported as one line; kube's own request logs stay off (RUST_LOG shows them).
        Command::Fault(_) | Command::Lab(_) => "off",
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
        Command::Up(args) => up_cmd::main(args),
        Command::Kubeconfig(args) => kubeconfig_cmd::main(args),
        Command::Apiserver(args) => apiserver_cmd::main(args),
        Command::ControllerManager(args) => controller_manager_cmd::main(args),
        Command::Scheduler(args) => scheduler_cmd::main(args),
        Command::Kubelet(args) => kubelet_cmd::main(args),
        Command::Verb(verb) => cli::main(verb),
        Command::Trace(args) => trace_cmd::main(args),
        Command::Fault(args) => fault_cmd::main(args),
        Command::Lab(args) => lab_cmd::main(args),
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

/// The runtime of a client component run as its own process (`kubelet`, `scheduler`,
/// `controller-manager`): one thread. These processes wait on the API server most of the time
/// and do a few hundred microseconds of work per pod; on a small machine shared with the API
/// server, a multi-threaded runtime spends more on waking its idle workers (futex calls,
/// context switches, work stealing) than it gains from running them side by side. With 1,000
/// nodes and 10,000 pods on 2 cores, one thread cut these processes' CPU by about 13%
/// (`docs/benchmarks.md`, "Apply to Running at scale"). The API server keeps a worker per
/// core: it needs more than one core at times.
fn client_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}
