//! Where the store bench's processes run: `STORE_BENCH_PIN=1` puts every server (the etcd
//! member and the store's gRPC endpoint, each its own process) on core 0 and the load
//! generator (this process: the `etcd-client` writers and watchers, and the in-process store
//! column) on core 1, so neither side takes the other's core. Unset, every process may run on
//! every core, as the scheduler likes.
//!
//! Both servers are started the same way (`taskset -c 0 <program>`), and both size their
//! worker pools from the cores they may use: Go's `GOMAXPROCS` and tokio's default worker
//! count both follow the affinity mask, so each gets one worker thread when pinned.

use std::path::Path;
use std::process::Command;

/// The core the servers run on when pinned.
const SERVER_CORE: usize = 0;
/// The core the load generator runs on when pinned.
const CLIENT_CORE: usize = 1;

/// Whether the run is pinned (`STORE_BENCH_PIN=1`).
pub fn pinned() -> bool {
    std::env::var("STORE_BENCH_PIN").is_ok_and(|v| v == "1")
}

/// What the table header says about the cores.
pub fn describe() -> String {
    if pinned() {
        format!(
            "pinned: servers (etcd, the store's endpoint) on core {SERVER_CORE}, the load \
             generator and the in-process store on core {CLIENT_CORE}"
        )
    } else {
        "not pinned: servers and load generator share every core (STORE_BENCH_PIN=1 pins them)"
            .to_string()
    }
}

/// The command that starts a server `program`: under `taskset -c 0` when pinned.
pub fn server_command(program: &Path) -> Command {
    if pinned() {
        let mut command = Command::new("taskset");
        command.arg("-c").arg(SERVER_CORE.to_string()).arg(program);
        command
    } else {
        Command::new(program)
    }
}

/// Pins this process (every thread it has now; threads started later inherit it) to the load
/// generator's core when the run is pinned. Called before the runtime starts its threads.
pub fn pin_load_generator() {
    if !pinned() {
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        cores > CLIENT_CORE,
        "STORE_BENCH_PIN=1 needs 2 cores, this machine has {cores}"
    );
    let status = Command::new("taskset")
        .args(["-a", "-p", "-c", &CLIENT_CORE.to_string()])
        .arg(std::process::id().to_string())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run taskset (util-linux)");
    assert!(status.success(), "taskset failed: {status}");
}
