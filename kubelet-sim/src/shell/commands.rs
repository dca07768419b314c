//! The builtins of the simulated shell and its script language: commands split at `;`,
//! newlines, `&&` and `||`; words split at blanks with `'...'`, `"..."` and `\` quoting;
//! `$VAR`, `${VAR}` and `$?` expanded outside single quotes. No pipes, redirections,
//! subshells or loops: a line using them runs only its plain commands.
//!
//! The wording of errors follows the image's shell ([`Flavor`]): busybox's
//! (`coreutils/cat.c`, `ash.c`) or GNU coreutils/bash. No Kubernetes counterpart: a real
//! container runs the image's own programs.

use std::time::Duration;

use super::files::{self, is_dir, list_dir, normalize};
use super::{Flavor, Outcome, Session, env};

/// Runs an exec argv: the program is its first word, taken without its directory.
pub fn run_argv(s: &mut Session, argv: &[String], stdin: &[u8], out: &mut Outcome) {
    let Some(first) = argv.first() else {
        return;
    };
    let name = first.rsplit('/').next().unwrap_or(first).to_string();
    let mut words = vec![name];
    words.extend(argv[1..].iter().cloned());
    let code = builtin(s, &words, stdin, out);
    out.exit_code = code;
    s.last_code = code;
}

/// Runs a script (`a; b && c || d`), stopping at `exit`.
pub fn run_script(s: &mut Session, script: &str, stdin: &[u8], out: &mut Outcome) {
    // A skipped command leaves `$?` as it was, so `a && b || c` runs `c` when `a` failed.
    for (cmd, op_before) in split_commands(script) {
        let run = match op_before {
            Op::Seq => true,
            Op::And => s.last_code == 0,
            Op::Or => s.last_code != 0,
        };
        if !run {
            continue;
        }
        let words = words(&cmd, s);
        if words.is_empty() {
            continue;
        }
        let code = builtin(s, &words, stdin, out);
        out.exit_code = code;
        s.last_code = code;
        if out.exited {
            return;
        }
    }
}

/// How a command is joined to the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Seq,
    And,
    Or,
}

/// Splits a script into commands at unquoted `;`, newlines, `&&` and `||`.
fn split_commands(script: &str) -> Vec<(String, Op)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut op = Op::Seq;
    let mut quote: Option<char> = None;
    let mut chars = script.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                cur.push(c);
            }
            (Some(_), '\\') => {
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                cur.push(c);
            }
            (None, '\\') => {
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            (None, ';' | '\n') => {
                out.push((std::mem::take(&mut cur), op));
                op = Op::Seq;
            }
            (None, '&') if chars.peek() == Some(&'&') => {
                chars.next();
                out.push((std::mem::take(&mut cur), op));
                op = Op::And;
            }
            (None, '|') if chars.peek() == Some(&'|') => {
                chars.next();
                out.push((std::mem::take(&mut cur), op));
                op = Op::Or;
            }
            (None, c) => cur.push(c),
        }
    }
    out.push((cur, op));
    out.into_iter()
        .filter(|(c, _)| !c.trim().is_empty())
        .collect()
}

/// Splits one command into words, expanding variables outside single quotes.
fn words(cmd: &str, s: &Session) -> Vec<String> {
    let vars = env::environment(&s.ctx);
    let lookup = |name: &str| -> String {
        if name == "?" {
            return s.last_code.to_string();
        }
        if name == "PWD" {
            return s.cwd.clone();
        }
        vars.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut has = false;
    let mut quote: Option<char> = None;
    let chars: Vec<char> = cmd.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('\''), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                has = true;
            }
            (_, '\\') if i < chars.len() => {
                cur.push(chars[i]);
                i += 1;
                has = true;
            }
            (_, '$') if i < chars.len() => {
                let (name, next) = if chars[i] == '{' {
                    let end = chars[i..].iter().position(|&c| c == '}').map(|p| i + p);
                    match end {
                        Some(e) => (chars[i + 1..e].iter().collect::<String>(), e + 1),
                        None => (String::new(), i),
                    }
                } else if chars[i] == '?' {
                    ("?".to_string(), i + 1)
                } else {
                    let len = chars[i..]
                        .iter()
                        .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
                        .count();
                    (chars[i..i + len].iter().collect(), i + len)
                };
                if name.is_empty() {
                    cur.push('$');
                } else {
                    cur.push_str(&lookup(&name));
                    has = true;
                    i = next;
                }
            }
            (None, c) if c.is_whitespace() => {
                if has || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                has = false;
            }
            (_, c) => cur.push(c),
        }
    }
    if has || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Writes `text` to stderr with the shell's name (`sh: ...` / `bash: ...`).
fn shell_err(s: &Session, out: &mut Outcome, text: &str) {
    let sh = match s.flavor {
        Flavor::Busybox => "sh",
        Flavor::Bash => "bash",
    };
    out.stderr.extend(format!("{sh}: {text}\n").into_bytes());
}

/// Runs one command; returns its exit code.
fn builtin(s: &mut Session, w: &[String], stdin: &[u8], out: &mut Outcome) -> i32 {
    let args = &w[1..];
    match w[0].as_str() {
        "true" | ":" => 0,
        "false" => 1,
        "pwd" => {
            out.stdout.extend(format!("{}\n", s.cwd).into_bytes());
            0
        }
        "whoami" => {
            out.stdout.extend_from_slice(b"root\n");
            0
        }
        "id" => {
            out.stdout
                .extend_from_slice(b"uid=0(root) gid=0(root) groups=0(root)\n");
            0
        }
        "hostname" => {
            out.stdout
                .extend(format!("{}\n", files::hostname(&s.ctx.pod)).into_bytes());
            0
        }
        "echo" => {
            let (newline, rest) = match args.first().map(String::as_str) {
                Some("-n") => (false, &args[1..]),
                _ => (true, args),
            };
            out.stdout.extend(rest.join(" ").into_bytes());
            if newline {
                out.stdout.push(b'\n');
            }
            0
        }
        "env" | "printenv" => {
            let vars = env::environment(&s.ctx);
            if args.is_empty() {
                for (k, v) in vars {
                    out.stdout.extend(format!("{k}={v}\n").into_bytes());
                }
                return 0;
            }
            let mut code = 0;
            for a in args {
                match vars.iter().find(|(k, _)| k == a) {
                    Some((_, v)) => out.stdout.extend(format!("{v}\n").into_bytes()),
                    None => code = 1,
                }
            }
            code
        }
        "cd" => {
            let target = normalize(&s.cwd, args.first().map(String::as_str).unwrap_or("/root"));
            let view = files::view(&s.ctx);
            if is_dir(&view, &target) || target == "/root" || target == "/tmp" {
                s.cwd = target;
                0
            } else {
                let a = args.first().cloned().unwrap_or_default();
                match s.flavor {
                    Flavor::Busybox => shell_err(
                        s,
                        out,
                        &format!("cd: can't cd to {a}: No such file or directory"),
                    ),
                    Flavor::Bash => {
                        shell_err(s, out, &format!("cd: {a}: No such file or directory"))
                    }
                }
                1
            }
        }
        "sleep" => {
            let secs = args.first().and_then(|a| parse_duration(a));
            match secs {
                Some(d) => {
                    out.slept += d;
                    0
                }
                None => {
                    let a = args.first().cloned().unwrap_or_default();
                    out.stderr
                        .extend(format!("sleep: invalid number '{a}'\n").into_bytes());
                    1
                }
            }
        }
        "exit" => {
            out.exited = true;
            args.first()
                .and_then(|a| a.parse::<i32>().ok())
                .map(|c| c & 0xff)
                .unwrap_or(s.last_code)
        }
        "kill" => super::signals::kill(s, args, out),
        "cat" => cat(s, args, stdin, out),
        "ls" => ls(s, args, out),
        "tar" => super::tar::run(s, args, stdin, out),
        "sh" | "bash" | "ash" | "dash" => {
            let script = args
                .iter()
                .position(|a| a.starts_with('-') && a.contains('c'))
                .and_then(|i| args.get(i + 1));
            match script {
                Some(sc) => run_script(s, &sc.clone(), stdin, out),
                None => {
                    let text = String::from_utf8_lossy(stdin).into_owned();
                    run_script(s, &text, &[], out);
                }
            }
            out.exited = false;
            s.last_code
        }
        other => {
            match s.flavor {
                Flavor::Busybox => shell_err(s, out, &format!("{other}: not found")),
                Flavor::Bash => shell_err(s, out, &format!("{other}: command not found")),
            }
            127
        }
    }
}

/// `sleep`'s argument: seconds, or with `s`/`m`/`h`/`d`; `infinity` is a long time.
fn parse_duration(a: &str) -> Option<Duration> {
    if a == "infinity" {
        return Some(Duration::from_secs(u64::from(u32::MAX)));
    }
    let (n, mult) = match a.chars().last()? {
        's' => (&a[..a.len() - 1], 1.0),
        'm' => (&a[..a.len() - 1], 60.0),
        'h' => (&a[..a.len() - 1], 3600.0),
        'd' => (&a[..a.len() - 1], 86400.0),
        _ => (a, 1.0),
    };
    let v: f64 = n.parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| Duration::from_secs_f64(v * mult))
}

/// `cat FILE...` (`-` or none: stdin).
fn cat(s: &Session, args: &[String], stdin: &[u8], out: &mut Outcome) -> i32 {
    let view = files::view(&s.ctx);
    if args.is_empty() {
        out.stdout.extend_from_slice(stdin);
        return 0;
    }
    let mut code = 0;
    for a in args {
        if a == "-" {
            out.stdout.extend_from_slice(stdin);
            continue;
        }
        let p = normalize(&s.cwd, a);
        if let Some(data) = view.get(&p) {
            out.stdout.extend_from_slice(data);
            continue;
        }
        code = 1;
        let msg = match (s.flavor, is_dir(&view, &p)) {
            (Flavor::Busybox, true) => "cat: read error: Is a directory\n".to_string(),
            (Flavor::Bash, true) => format!("cat: {a}: Is a directory\n"),
            (Flavor::Busybox, false) => {
                format!("cat: can't open '{a}': No such file or directory\n")
            }
            (Flavor::Bash, false) => format!("cat: {a}: No such file or directory\n"),
        };
        out.stderr.extend(msg.into_bytes());
    }
    code
}

/// One `ls -l` line.
fn long_line(name: &str, dir: bool, size: usize) -> String {
    let (mode, links) = if dir {
        ("drwxr-xr-x", 2)
    } else {
        ("-rw-r--r--", 1)
    };
    let size = if dir { 4096 } else { size };
    format!("{mode} {links:>4} root     root     {size:>9} Jan  1 00:00 {name}\n")
}

/// `ls [-l] [-a] [PATH...]` on the file view.
fn ls(s: &Session, args: &[String], out: &mut Outcome) -> i32 {
    let view = files::view(&s.ctx);
    let mut long = false;
    let mut all = false;
    let mut paths = Vec::new();
    for a in args {
        if let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) {
            long |= flags.contains('l');
            all |= flags.contains('a') || flags.contains('A');
        } else {
            paths.push(a.clone());
        }
    }
    if paths.is_empty() {
        paths.push(s.cwd.clone());
    }
    let many = paths.len() > 1;
    let mut code = 0;
    for (n, a) in paths.iter().enumerate() {
        let p = normalize(&s.cwd, a);
        if let Some(data) = view.get(&p) {
            if long {
                out.stdout
                    .extend(long_line(a, false, data.len()).into_bytes());
            } else {
                out.stdout.extend(format!("{a}\n").into_bytes());
            }
            continue;
        }
        if !is_dir(&view, &p) {
            code = match s.flavor {
                Flavor::Busybox => 1,
                Flavor::Bash => 2,
            };
            let msg = match s.flavor {
                Flavor::Busybox => format!("ls: {a}: No such file or directory\n"),
                Flavor::Bash => format!("ls: cannot access '{a}': No such file or directory\n"),
            };
            out.stderr.extend(msg.into_bytes());
            continue;
        }
        if many {
            if n > 0 {
                out.stdout.push(b'\n');
            }
            out.stdout.extend(format!("{a}:\n").into_bytes());
        }
        let entries = list_dir(&view, &p);
        if long {
            out.stdout
                .extend(format!("total {}\n", entries.len() * 4).into_bytes());
        }
        let mut names: Vec<(String, bool, usize)> = Vec::new();
        if all {
            names.push((".".into(), true, 0));
            names.push(("..".into(), true, 0));
        }
        for (name, dir) in entries {
            if name.starts_with('.') && !all {
                continue;
            }
            let full = if p == "/" {
                format!("/{name}")
            } else {
                format!("{p}/{name}")
            };
            let size = view.get(&full).map(Vec::len).unwrap_or(0);
            names.push((name, dir, size));
        }
        for (name, dir, size) in names {
            if long {
                out.stdout.extend(long_line(&name, dir, size).into_bytes());
            } else {
                out.stdout.extend(format!("{name}\n").into_bytes());
            }
        }
    }
    code
}
