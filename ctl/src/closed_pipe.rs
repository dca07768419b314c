//! A closed standard output or error ends the process quietly, as it ends a C tool
//! (`miniplane lab check | head -2`, `miniplane get pods -w | head`): killed by SIGPIPE, no
//! panic message, no exit status 101.
//!
//! Rust starts every program with SIGPIPE ignored, so a write to a pipe whose reader is gone
//! fails with `EPIPE`, and `println!` panics on that error. Restoring SIGPIPE's default
//! disposition for the whole process would be the C behaviour, but it would also kill the
//! process on *any* closed pipe or socket: a `kubectl` child of a lab that exits before
//! reading its stdin, or a client that drops its connection while the API server of
//! `miniplane up` writes a response with `writev` (which, unlike `send`, has no
//! `MSG_NOSIGNAL`). So SIGPIPE stays ignored, and only the standard streams are handled, once
//! for every subcommand:
//!
//! - [`install`] adds a panic hook: a panic of std's printing macros (`failed printing to
//!   stdout: ...`) while stdout or stderr is closed ends the process by [`die`] instead of
//!   being reported, on whichever thread it happens;
//! - [`is_closed_stdout_error`] lets `main` end the same way when an error that reaches it
//!   comes from writing to a closed stdout (`write!(stdout, ...)?`).
//!
//! Whether a stream is closed is asked of the kernel (`poll`: a pipe without readers reports
//! `POLLERR`, a socket whose peer is gone `POLLHUP`), not guessed from an error's text.

use std::os::fd::RawFd;

/// Installs the panic hook (before anything prints).
pub(crate) fn install() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        // std's `print_to`: `panic!("failed printing to {label}: {e}")`.
        if message.starts_with("failed printing to std")
            && (closed(libc::STDOUT_FILENO) || closed(libc::STDERR_FILENO))
        {
            die();
        }
        report(info);
    }));
}

/// Whether `error` (or what caused it) is a failed write to a closed standard output.
pub(crate) fn is_closed_stdout_error(error: &anyhow::Error) -> bool {
    let broken = error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    });
    broken && closed(libc::STDOUT_FILENO)
}

/// Whether writes to `fd` can no longer reach anyone: a pipe whose readers are all gone, or a
/// socket or terminal hung up.
fn closed(fd: RawFd) -> bool {
    let mut poll = libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    };
    #[allow(unsafe_code)]
    // SAFETY: one valid `pollfd` for the duration of the call; a timeout of 0 returns at once.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready > 0 && poll.revents & (libc::POLLERR | libc::POLLHUP) != 0
}

/// Ends the process as the default SIGPIPE disposition ends a C tool: killed by SIGPIPE (a
/// shell shows status 141, and `set -o pipefail` sees what it sees for `yes | head`).
pub(crate) fn die() -> ! {
    #[allow(unsafe_code)]
    // SAFETY: `signal` and `raise` touch no memory of ours; with the default disposition
    // restored, SIGPIPE terminates the process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    // Not reached; should the signal be blocked, the status a shell shows for it.
    std::process::exit(128 + libc::SIGPIPE)
}
