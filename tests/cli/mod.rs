//! End to end: `miniplane`'s own kubectl-like verbs (`apply`, `get`, `describe`, `delete`,
//! `scale`, `rollout`, `events`) against a running API server (and, for rollouts, the whole
//! control plane), with exact output where it is deterministic, the same output as the real
//! kubectl where both print the same thing, and bad input failing with one line and exit
//! status 1.
//!
//! Run with `cargo test -p ctl --test e2e cli::`.

mod bad_input;
mod events_scale;
mod read_write;
mod rollout;

use crate::support::Server;

/// Writes `text` into the server's temporary folder as `name`; returns the path.
fn write_file(s: &Server, name: &str, text: &str) -> String {
    let path = s.dir().join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A table with its last column (AGE, which may tick between two runs) cut off each line.
fn without_last_column(table: &str) -> String {
    table
        .lines()
        .map(|l| {
            let l = l.trim_end();
            l.rsplit_once("   ").map_or(l, |(rest, _)| rest).trim_end()
        })
        .collect::<Vec<_>>()
        .join("\n")
}
