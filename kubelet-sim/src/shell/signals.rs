//! `kill` in the simulated shell: signal names and numbers as Linux has them (`signal(7)`), and
//! what a signal does to the container's main process, PID 1.
//!
//! There are no processes: PID 1 stands for the container's main process, any other PID does
//! not exist. A signal whose default action ends a process ends PID 1 with the code a runtime
//! reports for it, `128 + N` (137 for SIGKILL, 143 for SIGTERM); the caller tells the pod
//! workers ([`crate::pod_workers::PodWorkers::process_exited`]), and the container restarts as
//! after any exit. Signals that are ignored, stop or continue a process by default (CHLD, CONT,
//! STOP, TSTP, TTIN, TTOU, URG, WINCH) and signal 0 change nothing.
//!
//! Simplification: a real PID 1 ignores every signal it installed no handler for, SIGKILL sent
//! from inside its own PID namespace included; here every terminating signal ends it, as if the
//! main process handled SIGTERM by exiting and `kill 1` came from outside.
//!
//! | argv | signal |
//! | --- | --- |
//! | `kill 1` | TERM (15) |
//! | `kill -9 1`, `kill -KILL 1`, `kill -SIGKILL 1`, `kill -s KILL 1`, `kill -n 9 1` | KILL (9) |
//! | `kill -l` | the list of names |

use super::{Flavor, Outcome, Session};

/// Linux's signals 1 to 31, by number (index + 1).
pub const NAMES: [&str; 31] = [
    "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV", "USR2",
    "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "URG",
    "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS",
];

/// SIGTERM, what `kill` sends without a signal given.
pub const SIGTERM: i32 = 15;

/// The number of a signal given as `9`, `KILL`, `SIGKILL` or `kill` (none: no such signal).
pub fn parse(spec: &str) -> Option<i32> {
    if let Ok(n) = spec.parse::<i32>() {
        return (0..=64).contains(&n).then_some(n);
    }
    let upper = spec.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    let name = if name == "POLL" { "IO" } else { name };
    NAMES
        .iter()
        .position(|n| *n == name)
        .and_then(|i| i32::try_from(i + 1).ok())
}

/// The exit code of a process that `signal` ends by default, `128 + signal`; none for a
/// signal whose default action is to ignore, stop or continue (and for signal 0).
pub fn terminating_exit_code(signal: i32) -> Option<i32> {
    match signal {
        0 | 17 | 18 | 19 | 20 | 21 | 22 | 23 | 28 => None,
        n => Some(128 + n),
    }
}

/// `kill [-SIGNAL | -s SIGNAL | -n N] PID...` and `kill -l`; returns its exit code. A signal
/// that ends PID 1 sets [`Outcome::kill_container`].
pub fn kill(s: &Session, args: &[String], out: &mut Outcome) -> i32 {
    let mut signal = SIGTERM;
    let mut rest = args;
    match rest.first().map(String::as_str) {
        Some("-l" | "-L") => {
            let list: Vec<&str> = NAMES.to_vec();
            out.stdout
                .extend(format!("{}\n", list.join(" ")).into_bytes());
            return 0;
        }
        Some("-s" | "-n") => {
            let spec = rest.get(1).map(String::as_str).unwrap_or_default();
            match parse(spec) {
                Some(n) => signal = n,
                None => return bad_signal(s, spec, out),
            }
            rest = rest.get(2..).unwrap_or_default();
        }
        Some(flag) if flag.starts_with('-') && flag.len() > 1 && flag != "--" => {
            let spec = &flag[1..];
            match parse(spec) {
                Some(n) => signal = n,
                None => return bad_signal(s, spec, out),
            }
            rest = &rest[1..];
        }
        Some("--") => rest = &rest[1..],
        _ => {}
    }
    if rest.is_empty() {
        let usage = match s.flavor {
            Flavor::Busybox => "kill: usage: kill [-s SIGNAL | -SIGNAL] PID...\n",
            Flavor::Bash => {
                "bash: kill: usage: kill [-s sigspec | -n signum | -sigspec] pid | jobspec ... or kill -l [sigspec]\n"
            }
        };
        out.stderr.extend_from_slice(usage.as_bytes());
        return if s.flavor == Flavor::Bash { 2 } else { 1 };
    }
    let mut code = 0;
    for pid in rest {
        if pid == "1" {
            if let Some(exit) = terminating_exit_code(signal) {
                out.kill_container = Some(exit);
            }
            continue;
        }
        code = 1;
        let text = match (s.flavor, pid.parse::<i64>()) {
            (Flavor::Busybox, Ok(_)) => format!("sh: can't kill pid {pid}: No such process\n"),
            (Flavor::Busybox, Err(_)) => format!("sh: invalid number '{pid}'\n"),
            (Flavor::Bash, Ok(_)) => format!("bash: kill: ({pid}) - No such process\n"),
            (Flavor::Bash, Err(_)) => {
                format!("bash: kill: {pid}: arguments must be process or job IDs\n")
            }
        };
        out.stderr.extend(text.into_bytes());
    }
    code
}

fn bad_signal(s: &Session, spec: &str, out: &mut Outcome) -> i32 {
    let text = match s.flavor {
        Flavor::Busybox => format!("sh: kill: bad signal name '{spec}'\n"),
        Flavor::Bash => format!("bash: kill: {spec}: invalid signal specification\n"),
    };
    out.stderr.extend(text.into_bytes());
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        assert_eq!(parse("9"), Some(9));
        assert_eq!(parse("KILL"), Some(9));
        assert_eq!(parse("SIGKILL"), Some(9));
        assert_eq!(parse("term"), Some(15));
        assert_eq!(parse("HUP"), Some(1));
        assert_eq!(parse("POLL"), Some(29));
        assert_eq!(parse("FOO"), None);
        assert_eq!(terminating_exit_code(9), Some(137));
        assert_eq!(terminating_exit_code(15), Some(143));
        assert_eq!(terminating_exit_code(2), Some(130));
        assert_eq!(terminating_exit_code(17), None, "CHLD is ignored");
        assert_eq!(terminating_exit_code(0), None);
    }
}
