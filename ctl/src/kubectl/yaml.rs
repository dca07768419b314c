//! YAML exactly as `kubectl -o yaml` writes it: kubectl turns the object into JSON and the
//! JSON into YAML with `sigs.k8s.io/yaml`, whose emitter is go-yaml v2 (a port of libyaml:
//! `encode.go` `stringv`, `resolve.go`, `emitterc.go` `yaml_emitter_analyze_scalar`,
//! `yaml_emitter_select_scalar_style`, `yaml_emitter_write_*_scalar`).
//!
//! What makes its output recognisable, and what this module reproduces:
//!
//! ```text
//!   metadata:
//!     creationTimestamp: "2024-01-01T00:00:00Z"   a string that would read as another type
//!     resourceVersion: "42"                      (number, bool, null, timestamp) is quoted ""
//!     name: web                                   plain when it can be
//!     annotations:
//!       note: 'a: b'                              '' when plain would be misread
//!       script: |                                 a literal block for multi-line strings
//!         echo hi
//!   spec:
//!     containers:                                 a list sits under its key, not indented
//!     - name: web
//!       args: []
//! ```
//!
//! Long strings fold at spaces past column 80, continuing two spaces deeper, as libyaml's
//! default width does.

use serde_json::{Map, Value};

/// libyaml's default `best_width`.
const BEST_WIDTH: usize = 80;

/// The YAML document for `value` (a trailing newline included).
pub fn to_yaml(value: &Value) -> String {
    let mut w = Writer::default();
    match value {
        Value::Object(map) if !map.is_empty() => w.map(map, 0, false),
        Value::Array(items) if !items.is_empty() => w.seq(items, 0, false),
        scalar => {
            w.scalar(scalar, 0, false);
            w.newline();
        }
    }
    w.out
}

#[derive(Default)]
struct Writer {
    out: String,
    /// Characters on the current line (libyaml's `column`).
    column: usize,
}

impl Writer {
    fn push(&mut self, s: &str) {
        match s.rfind('\n') {
            Some(i) => self.column = s[i + 1..].chars().count(),
            None => self.column += s.chars().count(),
        }
        self.out.push_str(s);
    }

    fn newline(&mut self) {
        self.push("\n");
    }

    fn indent(&mut self, n: usize) {
        self.push(&" ".repeat(n));
    }

    /// A block mapping at `indent`; `inline` when its first key follows a `- ` already written.
    fn map(&mut self, map: &Map<String, Value>, indent: usize, inline: bool) {
        for (i, (key, value)) in map.iter().enumerate() {
            if i > 0 || !inline {
                self.indent(indent);
            }
            self.string(key, indent, true);
            self.push(":");
            self.value(value, indent);
        }
    }

    /// What follows `key:` (a mapping value at `indent`).
    fn value(&mut self, value: &Value, indent: usize) {
        match value {
            Value::Object(m) if !m.is_empty() => {
                self.newline();
                self.map(m, indent + 2, false);
            }
            // go-yaml v2 does not indent a sequence under its mapping key.
            Value::Array(items) if !items.is_empty() => {
                self.newline();
                self.seq(items, indent, false);
            }
            scalar => {
                self.push(" ");
                self.scalar(scalar, indent + 2, false);
                self.newline();
            }
        }
    }

    /// A block sequence at `indent`; `inline` when its first `- ` follows another `- `.
    fn seq(&mut self, items: &[Value], indent: usize, inline: bool) {
        for (i, item) in items.iter().enumerate() {
            if i > 0 || !inline {
                self.indent(indent);
            }
            self.push("- ");
            match item {
                Value::Object(m) if !m.is_empty() => self.map(m, indent + 2, true),
                Value::Array(inner) if !inner.is_empty() => self.seq(inner, indent + 2, true),
                scalar => {
                    self.scalar(scalar, indent + 2, false);
                    self.newline();
                }
            }
        }
    }

    fn scalar(&mut self, value: &Value, indent: usize, key: bool) {
        match value {
            Value::Null => self.push("null"),
            Value::Bool(b) => self.push(if *b { "true" } else { "false" }),
            Value::Number(n) => self.push(&n.to_string()),
            Value::String(s) => self.string(s, indent, key),
            Value::Object(_) => self.push("{}"),
            Value::Array(_) => self.push("[]"),
        }
    }

    /// A string in the style go-yaml picks; `indent` is where folded or literal lines go.
    fn string(&mut self, s: &str, indent: usize, key: bool) {
        let a = analyze(s);
        let wanted = if s.contains('\n') {
            Style::Literal
        } else if resolves_to_string(s) {
            Style::Plain
        } else {
            Style::Double
        };
        let style = match wanted {
            Style::Plain if !a.block_plain || (key && a.multiline) => {
                if a.single_quoted {
                    Style::Single
                } else {
                    Style::Double
                }
            }
            Style::Literal if !a.block || key => Style::Double,
            other => other,
        };
        let allow_breaks = !key;
        match style {
            Style::Plain => self.folded(s, indent, allow_breaks, false),
            Style::Single => {
                self.push("'");
                self.folded(&s.replace('\'', "''"), indent, allow_breaks, true);
                self.push("'");
            }
            Style::Double => {
                self.push("\"");
                self.folded(&double_escaped(s), indent, allow_breaks, true);
                self.push("\"");
            }
            Style::Literal => self.literal(s, indent),
        }
    }

    /// Writes `s`, turning a single space into a line break (then `indent`) once past the
    /// best width, as libyaml's plain and quoted writers do (quoted: never the first or
    /// last character).
    fn folded(&mut self, s: &str, indent: usize, allow_breaks: bool, quoted: bool) {
        let chars: Vec<char> = s.chars().collect();
        let mut previous_space = false;
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                let next_is_space = chars.get(i + 1) == Some(&' ');
                let edge = quoted && (i == 0 || i + 1 == chars.len());
                if allow_breaks
                    && !previous_space
                    && self.column > BEST_WIDTH
                    && !next_is_space
                    && !edge
                {
                    self.newline();
                    self.indent(indent);
                } else {
                    self.push(" ");
                }
                previous_space = true;
            } else {
                let mut buf = [0; 4];
                self.push(c.encode_utf8(&mut buf));
                previous_space = false;
            }
        }
    }

    /// `|` block: chomping `-` without a final newline, `+` with several; an indentation
    /// indicator when the text starts with a space.
    fn literal(&mut self, s: &str, indent: usize) {
        self.push("|");
        if s.starts_with(' ') {
            self.push("2");
        }
        let body = if let Some(stripped) = s.strip_suffix('\n') {
            if stripped.ends_with('\n') {
                self.push("+");
                stripped
            } else {
                stripped
            }
        } else {
            self.push("-");
            s
        };
        self.newline();
        for line in body.split('\n') {
            if !line.is_empty() {
                self.indent(indent);
                self.push(line);
            }
            self.newline();
        }
        // The newline after the value is written by the caller: undo the last one.
        self.out.pop();
    }
}

#[derive(Clone, Copy)]
enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

/// What `yaml_emitter_analyze_scalar` finds out about a string (block context).
struct Analysis {
    block_plain: bool,
    single_quoted: bool,
    block: bool,
    multiline: bool,
}

fn analyze(s: &str) -> Analysis {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        return Analysis {
            block_plain: false,
            single_quoted: true,
            block: false,
            multiline: false,
        };
    }
    let mut block_indicators = s.starts_with("---") || s.starts_with("...");
    let mut special = false;
    let mut line_breaks = false;
    let (mut leading_space, mut leading_break, mut trailing_space, mut trailing_break) =
        (false, false, false, false);
    let (mut break_space, mut space_break) = (false, false);
    let (mut previous_space, mut previous_break) = (false, false);
    let blank_or_end = |i: usize| chars.get(i).is_none_or(|c| *c == ' ' || *c == '\n');
    for (i, &c) in chars.iter().enumerate() {
        let followed_by_blank = blank_or_end(i + 1);
        if i == 0 {
            if "#,[]{}&*!|>'\"%@`".contains(c)
                || (matches!(c, '?' | ':' | '-') && followed_by_blank)
            {
                block_indicators = true;
            }
        } else if (c == ':' && followed_by_blank) || (c == '#' && chars[i - 1] == ' ') {
            block_indicators = true;
        }
        if !printable(c) {
            special = true;
        }
        if c == '\n' {
            line_breaks = true;
        }
        if c == ' ' {
            if i == 0 {
                leading_space = true;
            }
            if i + 1 == chars.len() {
                trailing_space = true;
            }
            if previous_break {
                break_space = true;
            }
            previous_space = true;
            previous_break = false;
        } else if c == '\n' {
            if i == 0 {
                leading_break = true;
            }
            if i + 1 == chars.len() {
                trailing_break = true;
            }
            if previous_space {
                space_break = true;
            }
            previous_break = true;
            previous_space = false;
        } else {
            previous_space = false;
            previous_break = false;
        }
    }
    let mut block_plain = !(leading_space || leading_break || trailing_space || trailing_break);
    let mut single_quoted = true;
    let mut block = !trailing_space;
    if break_space {
        block_plain = false;
        single_quoted = false;
    }
    if space_break || special {
        block_plain = false;
        single_quoted = false;
        block = false;
    }
    if line_breaks || block_indicators {
        block_plain = false;
    }
    Analysis {
        block_plain,
        single_quoted,
        block,
        multiline: line_breaks,
    }
}

/// libyaml's `IS_PRINTABLE` (with unicode output on).
fn printable(c: char) -> bool {
    matches!(c, '\n' | '\u{20}'..='\u{7e}' | '\u{85}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
        && c != '\u{feff}'
}

/// go-yaml v2's `resolve` for an unquoted scalar: whether `s` would read back as a string
/// (and not as null, a bool, a number, a timestamp or a base-60 float).
fn resolves_to_string(s: &str) -> bool {
    const NOT_STRINGS: [&str; 36] = [
        "", "~", "null", "Null", "NULL", "y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "n", "N",
        "no", "No", "NO", "off", "Off", "OFF", "true", "True", "TRUE", "false", "False", "FALSE",
        ".inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN", "<<", "-.inf", "+.inf",
    ];
    if NOT_STRINGS.contains(&s) || matches!(s, "+.Inf" | "+.INF" | "-.Inf" | "-.INF") {
        return false;
    }
    let Some(first) = s.chars().next() else {
        return false;
    };
    if !(first.is_ascii_digit() || matches!(first, '+' | '-' | '.')) {
        return true;
    }
    let plain = s.replace('_', "");
    !(is_int(&plain) || is_float(&plain) || is_base60_float(s) || is_timestamp(s))
}

/// Go's `strconv.ParseInt(s, 0, 64)` (or ParseUint) accepting it: decimal, `0x`, `0o`,
/// `0b` or a leading-`0` octal, with a sign.
fn is_int(s: &str) -> bool {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (radix, body) = if let Some(b) = digits.strip_prefix("0x").or(digits.strip_prefix("0X")) {
        (16, b)
    } else if let Some(b) = digits.strip_prefix("0b").or(digits.strip_prefix("0B")) {
        (2, b)
    } else if let Some(b) = digits.strip_prefix("0o").or(digits.strip_prefix("0O")) {
        (8, b)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    !body.is_empty() && body.chars().all(|c| c.is_digit(radix))
}

/// go-yaml's `yamlStyleFloat`: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_float(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => digits(frac),
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
        None => digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)));
    mantissa_ok && exponent_ok
}

/// YAML 1.1 sexagesimal floats (`1:20`), which go-yaml quotes.
fn is_base60_float(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (whole, _) = s.split_once('.').unwrap_or((s, ""));
    let mut parts = whole.split(':');
    let first_ok = parts.next().is_some_and(|p| {
        p.starts_with(|c: char| c.is_ascii_digit())
            && p.chars().all(|c| c.is_ascii_digit() || c == '_')
    });
    let rest: Vec<&str> = parts.collect();
    first_ok
        && !rest.is_empty()
        && rest.iter().all(|p| {
            (1..=2).contains(&p.len())
                && p.chars().all(|c| c.is_ascii_digit())
                && p.parse::<u8>().is_ok_and(|n| n < 60)
        })
}

/// go-yaml's timestamp formats: `2006-1-2`, optionally with `T`/`t`/` ` and a time.
fn is_timestamp(s: &str) -> bool {
    let (date, time) = match s.find(['T', 't', ' ']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let fields: Vec<&str> = date.split('-').collect();
    let date_ok = fields.len() == 3
        && fields[0].len() == 4
        && fields
            .iter()
            .all(|f| !f.is_empty() && f.len() <= 4 && f.chars().all(|c| c.is_ascii_digit()));
    date_ok
        && time.is_none_or(|t| {
            t.split(':').count() == 3
                && t.starts_with(|c: char| c.is_ascii_digit())
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-+:.".contains(c))
        })
}

/// libyaml's double-quoted escapes.
fn double_escaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\x0b' => out.push_str("\\v"),
            '\x0c' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            '\x1b' => out.push_str("\\e"),
            '\u{85}' => out.push_str("\\N"),
            '\u{a0}' => out.push_str("\\_"),
            '\u{2028}' => out.push_str("\\L"),
            '\u{2029}' => out.push_str("\\P"),
            c if printable(c) => out.push(c),
            c if (c as u32) <= 0xff => out.push_str(&format!("\\x{:02X}", c as u32)),
            c if (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push_str(&format!("\\U{:08X}", c as u32)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quoting_as_go_yaml() {
        let v = json!({
            "a": "1", "b": "", "c": "true", "d": "2024-01-01T00:00:00Z", "e": "nginx:1.25",
            "f": "a: b", "g": "*", "h": "-", "i": " lead", "j": "it's", "k": "0x1F", "l": "1.5",
            "m": "app=web", "n": "yes", "o": "tab\there", "p": "1:20", "q": "- x", "r": "#x",
            "s": "x #y", "t": "v1", "u": "10.244.0.5", "w": ".5", "x": "1e3", "y": "-"
        });
        assert_eq!(
            to_yaml(&v),
            "a: \"1\"\nb: \"\"\nc: \"true\"\nd: \"2024-01-01T00:00:00Z\"\ne: nginx:1.25\n\
             f: 'a: b'\ng: '*'\nh: '-'\ni: ' lead'\nj: it's\nk: \"0x1F\"\nl: \"1.5\"\n\
             m: app=web\n\"n\": \"yes\"\no: \"tab\\there\"\np: \"1:20\"\nq: '- x'\nr: '#x'\n\
             s: 'x #y'\nt: v1\nu: 10.244.0.5\nw: \".5\"\nx: \"1e3\"\n\"y\": '-'\n"
        );
    }

    #[test]
    fn structure_as_kubectl() {
        let v = json!({
            "kind": "List", "items": [{"metadata": {"name": "p", "labels": {}},
                "spec": {"containers": [{"args": [], "name": "c", "ports": [{"containerPort": 80}]}]}}],
            "nested": [["a", "b"], "c"], "none": null, "n": 3, "ok": false
        });
        assert_eq!(
            to_yaml(&v),
            "items:\n\
             - metadata:\n    labels: {}\n    name: p\n  spec:\n    containers:\n    - args: []\n      name: c\n      ports:\n      - containerPort: 80\n\
             kind: List\n\"n\": 3\nnested:\n- - a\n  - b\n- c\nnone: null\nok: false\n"
        );
    }

    #[test]
    fn literal_blocks_and_folding() {
        let v = json!({"m": {"script": "echo hi\nexit 0\n", "two": "a\nb", "keep": "a\n\n"}});
        assert_eq!(
            to_yaml(&v),
            "m:\n  keep: |+\n    a\n\n  script: |\n    echo hi\n    exit 0\n  two: |-\n    a\n    b\n"
        );
        // Past column 80, the next space becomes a line break (keys like `n`, `y` read as
        // YAML 1.1 booleans and are quoted too).
        let long = "word ".repeat(20).trim_end().to_owned();
        let out = to_yaml(&json!({"message": long}));
        assert_eq!(
            out,
            format!(
                "message: {}\n  {}\n",
                "word ".repeat(15).trim_end(),
                "word ".repeat(5).trim_end()
            )
        );
    }
}
