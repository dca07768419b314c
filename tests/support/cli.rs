//! Running `miniplane`'s own kubectl-like verbs (`miniplane get`, `apply`, `rollout` ...)
//! against a [`Server`], as a user without kubectl would: the binary Cargo built, pointed at
//! the server with `--kubeconfig`, in an environment that holds nothing of the machine's.

use std::process::Command;

use super::Server;
use super::kubectl::{Background, KUBECTL_TIMEOUT, Run, run_with_timeout};

impl Server {
    /// `miniplane <args> --kubeconfig <this server's>` with a clean environment.
    pub fn cli_command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_miniplane"));
        cmd.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.dir().join("home"))
            .args(args)
            .arg("--kubeconfig")
            .arg(self.kubeconfig());
        cmd
    }

    /// Runs `miniplane <args>` with optional standard input.
    pub fn cli_run(&self, args: &[&str], stdin: Option<&str>) -> Run {
        let output = run_with_timeout(self.cli_command(args), stdin, KUBECTL_TIMEOUT)
            .unwrap_or_else(|e| panic!("miniplane {}: {e}", args.join(" ")));
        Run {
            args: format!("(miniplane) {}", args.join(" ")),
            status: output.status,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs `miniplane <args>`.
    pub fn cli(&self, args: &[&str]) -> Run {
        self.cli_run(args, None)
    }

    /// Runs `miniplane <args>`, expects success and an empty stderr; returns stdout.
    pub fn cli_ok(&self, args: &[&str]) -> String {
        let run = self.cli(args);
        assert!(run.ok(), "expected success: {run}");
        assert_eq!(run.stderr, "", "expected nothing on stderr: {run}");
        run.stdout
    }

    /// Runs `miniplane <args>`, expects exit status 1 and exactly one line on stderr; returns
    /// that line (without its newline).
    pub fn cli_err(&self, args: &[&str]) -> String {
        let run = self.cli(args);
        one_line_error(&run)
    }

    /// Starts `miniplane <args>` in the background (`get -w`, `rollout status`).
    pub fn cli_spawn(&self, args: &[&str]) -> Background {
        Background::spawn(
            self.cli_command(args),
            format!("(miniplane) {}", args.join(" ")),
        )
    }
}

/// Checks that `run` failed the way kubectl fails (status 1, one line on stderr) and
/// returns the line.
pub fn one_line_error(run: &Run) -> String {
    assert_eq!(run.status.code(), Some(1), "expected exit status 1: {run}");
    assert_eq!(
        run.stderr.lines().count(),
        1,
        "expected one line on stderr: {run}"
    );
    run.stderr.trim_end().to_owned()
}
