//! The API server's router driven in-process (no sockets; `serving` alone uses a loopback
//! socket, for the connection layer): every module is one area of the
//! REST semantics (and `ui`, the web UI's files and reads). One test binary for all of them,
//! so the dependency tree is linked once; run one area with
//! `cargo test -p apiserver --test router <module>::`.

mod common;

mod admin;
mod aggregator;
mod bad_requests;
mod connect;
mod control_plane;
mod custom_resources;
mod deep_objects;
mod fuzz;
mod generic;
mod list_watch;
mod services;
mod serving;
mod subresources;
mod traces;
mod ui;
mod wire;
mod writes;
