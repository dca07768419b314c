//! The store's integration tests, one binary so the dependencies are linked once; run one
//! area with `cargo test -p store --test store <module>::`. The crash test (`crash.rs`) stays
//! a binary of its own: it runs without the test harness, killing child processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod bad_input;
mod checkpoint;
mod etcd;
mod history_budget;
mod key_history;
mod memory_smoke;
mod model;
mod pipeline;
mod restart;
mod snapshot;
mod watch;
