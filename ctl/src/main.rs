//! The `miniplane` binary: one executable for every component (like kind's and k3s' single
//! binary). Each subcommand parses flags and calls its component library's `run`.

use clap::{Parser, Subcommand};

/// A Kubernetes control plane in one binary.
#[derive(Debug, Parser)]
#[command(name = "miniplane", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the API server (kube-apiserver) with the embedded store.
    Apiserver,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Apiserver => anyhow::bail!("the API server is not wired up yet"),
    }
}
