//! End to end: `miniplane`'s own kubectl-like verbs (`apply`, `get`, `describe`, `delete`,
//! `scale`, `rollout`, `events`, and `history`, which kubectl lacks) against a running API server (and, for rollouts, the whole
//! control plane), with exact output where it is deterministic, the same output as the real
//! kubectl where both print the same thing, and bad input failing with one line and exit
//! status 1.
//!
//! Run with `cargo test -p ctl --test e2e cli::`.

mod bad_input;
mod events_scale;
mod history;
mod read_write;
mod rollout;

use crate::support::Server;

/// Writes `text` into the server's temporary folder as `name`; returns the path.
fn write_file(s: &Server, name: &str, text: &str) -> String {
    let path = s.dir().join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// The cells of a printed table (cells are at least two spaces apart; one space may sit
/// inside a cell), without the AGE column, which may tick between two runs. Blocks of
/// several tables stay apart.
fn without_age(table: &str) -> Vec<Vec<String>> {
    let mut age = None;
    let mut rows = Vec::new();
    for line in table.lines() {
        let cells: Vec<String> = line
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
            .collect();
        if cells
            .first()
            .is_some_and(|c| c == "NAME" || c == "NAMESPACE")
        {
            age = cells.iter().position(|c| c == "AGE");
        }
        rows.push(
            cells
                .into_iter()
                .enumerate()
                .filter(|(i, _)| Some(*i) != age)
                .map(|(_, c)| c)
                .collect(),
        );
    }
    rows
}
