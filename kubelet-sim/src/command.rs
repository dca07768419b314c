//! What a container's process would do, read from its `command` and `args`: how long it runs
//! and how it exits. There are no processes here, so the simulated kubelet recognises a few
//! well-known commands and treats everything else as a server that runs until stopped.
//!
//! No Kubernetes counterpart: a real kubelet starts the image's process and learns how it
//! ended from the container runtime (`kuberuntime_container.go` reads `exitCode` from CRI).
//!
//! The argv is `command ++ args` (the image's entrypoint is unknown, so a container with
//! neither runs forever). Program names are taken without their directory (`/bin/sleep` is
//! `sleep`).
//!
//! | argv | runs for | exits with |
//! | --- | --- | --- |
//! | `sleep N` (`N` in seconds, or `5s`, `2m`, `1h`, `0.5`) | `N` | 0 (`sleep infinity`: forever) |
//! | `true`, `echo ...`, `printf ...`, `date`, `hostname`, `env`, `printenv`, `pwd`, `whoami`, `uname ...`, `ls ...`, `cat FILE`, `touch FILE`, `mkdir ...` | nothing | 0 |
//! | `false` | nothing | 1 |
//! | `exit N` (in a shell script) | nothing | `N`, and the script stops |
//! | `perl ...` whose script calls `bpi(...)` (the Job example of the Kubernetes docs) | [`COMPUTE_TIME`] | 0 |
//! | `sh -c SCRIPT` (also `bash`, `ash`, `dash`, `-ec`, `-xc`, ...) | the script's commands in turn | the last command's code |
//!
//! A script is split into commands at `;`, newlines, `&&` and `||`, which chain as a shell
//! chains them (`a && b` runs `b` only if `a` exited 0; `a || b` only if it did not).
//! Quotes are honoured, variables (`$HOSTNAME`) are left as they are and redirections
//! (`> /tmp/out`, `2>&1`) are ignored. One command that is not in the table (`nginx`,
//! `while true; do ...`), a pipe, a subshell or a command substitution outside quotes makes the
//! whole container run forever, as the server it probably is.
//!
//! ```text
//!   sh -c "echo hi; sleep 5; exit 3"   →  runs 5 s, exits 3
//!   sleep 3 && false || exit 7         →  runs 3 s, exits 7
//!   perl -Mbignum=bpi -wle "print bpi(2000)"  →  runs COMPUTE_TIME, exits 0
//! ```

use std::time::Duration;

/// How long the Kubernetes docs' `perl ... bpi(2000)` Job example is taken to compute.
pub const COMPUTE_TIME: Duration = Duration::from_secs(5);

/// What a container's process does once started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// It exits by itself after `after`, with `exit_code`.
    Exits {
        /// How long it runs.
        after: Duration,
        /// Its exit code.
        exit_code: i32,
    },
    /// It runs until stopped.
    Forever,
}

/// What `command ++ args` does (see the module table).
pub fn run_of(command: Option<&[String]>, args: Option<&[String]>) -> Run {
    let argv: Vec<&str> = command
        .unwrap_or_default()
        .iter()
        .chain(args.unwrap_or_default())
        .map(String::as_str)
        .collect();
    if argv.is_empty() {
        return Run::Forever;
    }
    match simple(&argv) {
        Some(Outcome { took, code, .. }) => Run::Exits {
            after: took,
            exit_code: code,
        },
        None => Run::Forever,
    }
}

/// The result of one recognised command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Outcome {
    took: Duration,
    code: i32,
    /// `exit`: the script ends here.
    exits: bool,
}

fn done(code: i32) -> Option<Outcome> {
    Some(Outcome {
        took: Duration::ZERO,
        code,
        exits: false,
    })
}

fn program(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// One command with its arguments; none: not recognised as finite.
fn simple(argv: &[&str]) -> Option<Outcome> {
    let (&first, rest) = argv.split_first()?;
    match program(first) {
        "sleep" => {
            let mut total = Duration::ZERO;
            for arg in rest {
                total = total.checked_add(seconds(arg)?)?;
            }
            Some(Outcome {
                took: total,
                code: 0,
                exits: false,
            })
        }
        "true" | ":" | "echo" | "printf" | "date" | "hostname" | "env" | "printenv" | "pwd"
        | "whoami" | "uname" | "ls" | "cat" | "touch" | "mkdir" | "id" => {
            // `cat` with no file reads stdin, which a container without a TTY never closes.
            if program(first) == "cat" && rest.is_empty() {
                return None;
            }
            done(0)
        }
        "false" => done(1),
        "exit" => {
            let code = match rest.first() {
                Some(n) => n.parse::<i32>().ok()?,
                None => 0,
            };
            Some(Outcome {
                took: Duration::ZERO,
                code,
                exits: true,
            })
        }
        "perl" if rest.iter().any(|a| a.contains("bpi(")) => Some(Outcome {
            took: COMPUTE_TIME,
            code: 0,
            exits: false,
        }),
        "sh" | "bash" | "ash" | "dash" | "zsh" => {
            let (&flag, script) = rest.split_first()?;
            if !(flag.starts_with('-') && flag.ends_with('c')) {
                return None;
            }
            let outcome = script_outcome(script.first()?)?;
            Some(Outcome {
                exits: false,
                ..outcome
            })
        }
        _ => None,
    }
}

/// `sleep`'s operand: seconds (`5`, `0.5`) or with a unit (`5s`, `2m`, `1h`, `1d`).
fn seconds(arg: &str) -> Option<Duration> {
    let (number, unit) = match arg.char_indices().last()? {
        (i, 's') => (&arg[..i], 1.0),
        (i, 'm') => (&arg[..i], 60.0),
        (i, 'h') => (&arg[..i], 3600.0),
        (i, 'd') => (&arg[..i], 86_400.0),
        _ => (arg, 1.0),
    };
    let value: f64 = number.parse().ok()?;
    if !value.is_finite() || value < 0.0 {
        return None; // `infinity`, `inf` and garbage: not finite
    }
    Duration::try_from_secs_f64(value * unit).ok()
}

/// How a command in a script is joined to the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Join {
    Always,
    IfSucceeded,
    IfFailed,
}

/// Runs a shell script: its commands in turn, chained by `;`, `&&`, `||` and newlines.
fn script_outcome(script: &str) -> Option<Outcome> {
    let mut total = Duration::ZERO;
    let mut code = 0;
    for (join, words) in commands(script)? {
        let run = match join {
            Join::Always => true,
            Join::IfSucceeded => code == 0,
            Join::IfFailed => code != 0,
        };
        if !run || words.is_empty() {
            continue;
        }
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let outcome = simple(&words)?;
        total = total.checked_add(outcome.took)?;
        code = outcome.code;
        if outcome.exits {
            break;
        }
    }
    Some(Outcome {
        took: total,
        code,
        exits: true,
    })
}

/// Splits a script into words, respecting single and double quotes, and groups them into
/// commands with the operator before each. None: syntax this does not follow (pipes,
/// redirections, subshells, loops are all "not recognised").
fn commands(script: &str) -> Option<Vec<(Join, Vec<String>)>> {
    let mut out = vec![(Join::Always, Vec::new())];
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = script.chars().peekable();
    let end_word = |word: &mut String, in_word: &mut bool, out: &mut Vec<(Join, Vec<String>)>| {
        if *in_word {
            if let Some((_, words)) = out.last_mut() {
                words.push(std::mem::take(word));
            }
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        q => word.push(q),
                    }
                }
            }
            ' ' | '\t' => end_word(&mut word, &mut in_word, &mut out),
            ';' | '\n' => {
                end_word(&mut word, &mut in_word, &mut out);
                out.push((Join::Always, Vec::new()));
            }
            '&' if chars.peek() == Some(&'&') => {
                chars.next();
                end_word(&mut word, &mut in_word, &mut out);
                out.push((Join::IfSucceeded, Vec::new()));
            }
            '|' if chars.peek() == Some(&'|') => {
                chars.next();
                end_word(&mut word, &mut in_word, &mut out);
                out.push((Join::IfFailed, Vec::new()));
            }
            '>' | '<' => {
                // A redirection: its target is dropped, and so is a file descriptor before it
                // (`2>&1`); the command runs as it would without it.
                if in_word && word.bytes().all(|b| b.is_ascii_digit()) {
                    word.clear();
                    in_word = false;
                }
                end_word(&mut word, &mut in_word, &mut out);
                while chars.peek().is_some_and(|c| matches!(c, '>' | '&' | ' ')) {
                    chars.next();
                }
                while chars
                    .peek()
                    .is_some_and(|c| !matches!(c, ' ' | '\t' | ';' | '\n' | '&' | '|'))
                {
                    chars.next();
                }
            }
            '|' | '&' | '(' | ')' | '`' => return None,
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    end_word(&mut word, &mut in_word, &mut out);
    Some(out)
}

/// What `command ++ args` prints to stdout, each line with the time since the start at which
/// it is printed: the text of `echo` (alone or in a `sh -c` script, after the `sleep`s before
/// it). Commands after an unrecognised one print nothing here (the script is taken to block
/// there, as a server would).
pub fn output_of(command: Option<&[String]>, args: Option<&[String]>) -> Vec<(Duration, String)> {
    let argv: Vec<&str> = command
        .unwrap_or_default()
        .iter()
        .chain(args.unwrap_or_default())
        .map(String::as_str)
        .collect();
    let mut out = Vec::new();
    let Some((&first, rest)) = argv.split_first() else {
        return out;
    };
    match program(first) {
        "sh" | "bash" | "ash" | "dash" | "zsh" => {
            let Some((&flag, script)) = rest.split_first() else {
                return out;
            };
            let Some(script) = script.first() else {
                return out;
            };
            if !(flag.starts_with('-') && flag.ends_with('c')) {
                return out;
            }
            let Some(commands) = commands(script) else {
                return out;
            };
            let (mut total, mut code) = (Duration::ZERO, 0);
            for (join, words) in commands {
                let run = match join {
                    Join::Always => true,
                    Join::IfSucceeded => code == 0,
                    Join::IfFailed => code != 0,
                };
                if !run || words.is_empty() {
                    continue;
                }
                let words: Vec<&str> = words.iter().map(String::as_str).collect();
                out.extend(echo_text(&words).map(|text| (total, text)));
                let Some(outcome) = simple(&words) else {
                    break;
                };
                total = total.saturating_add(outcome.took);
                code = outcome.code;
                if outcome.exits {
                    break;
                }
            }
        }
        _ => out.extend(echo_text(&argv).map(|text| (Duration::ZERO, text))),
    }
    out
}

/// The line `echo ARGS` prints (`-n` and `-e` are dropped); none for other commands.
fn echo_text(argv: &[&str]) -> Option<String> {
    let (&first, rest) = argv.split_first()?;
    if program(first) != "echo" {
        return None;
    }
    let words: Vec<&str> = rest
        .iter()
        .copied()
        .skip_while(|w| matches!(*w, "-n" | "-e" | "-E" | "-ne" | "-en"))
        .collect();
    Some(words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(argv: &[&str]) -> Run {
        let argv: Vec<String> = argv.iter().map(|s| (*s).to_owned()).collect();
        run_of(Some(&argv), None)
    }

    fn exits(secs: f64, exit_code: i32) -> Run {
        Run::Exits {
            after: Duration::from_secs_f64(secs),
            exit_code,
        }
    }

    #[test]
    fn echo_prints_its_text_after_the_sleeps_before_it() {
        let argv: Vec<String> = ["sh", "-c", "echo hi; sleep 5; echo \"bye now\"; exit 3"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert_eq!(
            output_of(Some(&argv), None),
            [
                (Duration::ZERO, "hi".to_owned()),
                (Duration::from_secs(5), "bye now".to_owned())
            ]
        );
        let echo = ["echo".to_owned(), "hello".to_owned()];
        assert_eq!(
            output_of(Some(&echo), None),
            [(Duration::ZERO, "hello".to_owned())]
        );
        assert_eq!(output_of(None, None), []);
    }

    #[test]
    fn well_known_commands_finish() {
        assert_eq!(run(&["sleep", "30"]), exits(30.0, 0));
        assert_eq!(run(&["/bin/sleep", "1.5"]), exits(1.5, 0));
        assert_eq!(run(&["sleep", "2m"]), exits(120.0, 0));
        assert_eq!(run(&["true"]), exits(0.0, 0));
        assert_eq!(run(&["false"]), exits(0.0, 1));
        assert_eq!(run(&["echo", "hello", "world"]), exits(0.0, 0));
        assert_eq!(run(&["date"]), exits(0.0, 0));
        assert_eq!(
            run(&["perl", "-Mbignum=bpi", "-wle", "print bpi(2000)"]),
            exits(5.0, 0)
        );
    }

    #[test]
    fn servers_and_unknown_commands_run_forever() {
        assert_eq!(run_of(None, None), Run::Forever);
        assert_eq!(run(&["nginx", "-g", "daemon off;"]), Run::Forever);
        assert_eq!(run(&["sleep", "infinity"]), Run::Forever);
        assert_eq!(run(&["cat"]), Run::Forever);
        assert_eq!(run(&["perl", "-e", "while(1){}"]), Run::Forever);
        assert_eq!(
            run(&["sh", "-c", "while true; do sleep 1; done"]),
            Run::Forever
        );
        assert_eq!(run(&["sh", "-c", "echo hi | tee /x"]), Run::Forever);
        assert_eq!(run(&["sh", "-c", "echo $(hostname)"]), Run::Forever);
        assert_eq!(run(&["sh", "-c", "echo hi; my-server"]), Run::Forever);
    }

    #[test]
    fn shell_scripts_chain_and_exit() {
        assert_eq!(
            run(&["sh", "-c", "echo hi; sleep 5; exit 3"]),
            exits(5.0, 3)
        );
        assert_eq!(
            run(&["/bin/bash", "-ec", "sleep 1 && sleep 2 && echo 'done; ok'"]),
            exits(3.0, 0)
        );
        // `false` stops an `&&` chain; `||` recovers.
        assert_eq!(run(&["sh", "-c", "false && sleep 9"]), exits(0.0, 1));
        assert_eq!(
            run(&["sh", "-c", "sleep 3 && false || exit 7"]),
            exits(3.0, 7)
        );
        // `exit` ends the script; what follows never runs (even if not recognised).
        assert_eq!(run(&["sh", "-c", "exit 2; my-server"]), exits(0.0, 2));
        // Variables, substitutions inside quotes, and redirections.
        assert_eq!(
            run(&[
                "sh",
                "-c",
                "echo \"hello from $(hostname)\" $HOME > /tmp/x 2>&1; sleep 4"
            ]),
            exits(4.0, 0)
        );
        assert_eq!(run(&["sh", "-c", "sleep 1 2>/dev/null"]), exits(1.0, 0));
        // Newlines separate commands; the script can come from `args`.
        let command = vec!["sh".to_owned(), "-c".to_owned()];
        let args = vec!["sleep 2\necho \"a \\\"b\\\"\"\n".to_owned()];
        assert_eq!(run_of(Some(&command), Some(&args)), exits(2.0, 0));
    }
}
