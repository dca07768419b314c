//! `labels.Parse`: the lexer and recursive-descent parser of apimachinery's
//! `pkg/labels/selector.go`, with its error messages word for word.
//!
//! ```text
//!   "env in (prod, staging),!canary"
//!     lex:   Identifier(env) In OpenPar Identifier(prod) Comma Identifier(staging) ClosedPar
//!            Comma DoesNotExist Identifier(canary) End
//!     parse: [env In {prod,staging}, canary DoesNotExist]
//! ```

use super::{Error, Operator, Requirement};
use crate::fmt::go_quote;
use crate::validation::is_qualified_name;

/// Parses a selector's string form into its requirements (unsorted).
pub(super) fn parse(s: &str) -> Result<Vec<Requirement>, Error> {
    Parser::new(s).parse().map_err(Error)
}

/// A token of `labels.Lexer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(s: &str) -> Option<Tok> {
    Some(match s {
        ")" => Tok::ClosedPar,
        "," => Tok::Comma,
        "!" => Tok::DoesNotExist,
        "==" => Tok::DoubleEquals,
        "=" => Tok::Equals,
        ">" => Tok::GreaterThan,
        "in" => Tok::In,
        "<" => Tok::LessThan,
        "!=" => Tok::NotEquals,
        "notin" => Tok::NotIn,
        "(" => Tok::OpenPar,
        _ => return None,
    })
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// `Lexer.Lex` over the whole input (a NUL byte ends it, as Go's lexer reads one as the end).
fn lex(s: &str) -> Vec<(Tok, String)> {
    let bytes = s.as_bytes();
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        while pos < end && is_space(bytes[pos]) {
            pos += 1;
        }
        if pos >= end {
            out.push((Tok::End, String::new()));
            return out;
        }
        let start = pos;
        if is_special(bytes[pos]) {
            // The longest run of symbols that is still a token.
            let mut best = None;
            while pos < end && is_special(bytes[pos]) {
                match keyword(&s[start..=pos]) {
                    Some(t) => best = Some((t, pos + 1)),
                    None if best.is_some() => break,
                    None => {}
                }
                pos += 1;
            }
            // Every single symbol is a token, so `best` is set.
            let (tok, next) = best.unwrap_or((Tok::Identifier, pos));
            out.push((tok, s[start..next].to_string()));
            pos = next;
        } else {
            while pos < end && !is_special(bytes[pos]) && !is_space(bytes[pos]) {
                pos += 1;
            }
            let lit = &s[start..pos];
            out.push((keyword(lit).unwrap_or(Tok::Identifier), lit.to_string()));
        }
    }
}

/// `labels.Parser`: a recursive-descent parser over the scanned tokens.
struct Parser {
    items: Vec<(Tok, String)>,
    pos: usize,
}

impl Parser {
    fn new(s: &str) -> Parser {
        Parser {
            items: lex(s),
            pos: 0,
        }
    }

    /// The current token; in a values context `in`/`notin` are identifiers.
    fn lookahead(&self, values: bool) -> (Tok, String) {
        let (tok, lit) = self.items[self.pos.min(self.items.len() - 1)].clone();
        (as_value(tok, values), lit)
    }

    fn consume(&mut self, values: bool) -> (Tok, String) {
        let item = self.lookahead(values);
        self.pos = (self.pos + 1).min(self.items.len() - 1);
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut out = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(true);
            match tok {
                Tok::Identifier | Tok::DoesNotExist => {
                    let r = self
                        .requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    out.push(r);
                    let (t, l) = self.consume(true);
                    match t {
                        Tok::End => return Ok(out),
                        Tok::Comma => {
                            let (t2, l2) = self.lookahead(true);
                            if t2 != Tok::Identifier && t2 != Tok::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Tok::End => return Ok(out),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let (key, op) = self.key_and_inferred_operator()?;
        if let Some(op @ (Operator::Exists | Operator::DoesNotExist)) = op {
            return new_requirement(key, op, Vec::new());
        }
        let op = self.operator()?;
        let values = match op {
            Operator::In | Operator::NotIn => self.values()?,
            _ => self.exact_value()?,
        };
        new_requirement(key, op, values)
    }

    fn key_and_inferred_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(true);
        if tok == Tok::DoesNotExist {
            op = Some(Operator::DoesNotExist);
            (tok, lit) = self.consume(true);
        }
        if tok != Tok::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let errs = is_qualified_name(&lit);
        if !errs.is_empty() {
            // The parser has no field path: Go prints the nil path as `<nil>`.
            return Err(format!(
                "<nil>: Invalid value: {}: {}",
                go_quote(&lit),
                errs.join("; ")
            ));
        }
        if matches!(self.lookahead(true).0, Tok::End | Tok::Comma) && op.is_none() {
            op = Some(Operator::Exists);
        }
        Ok((lit, op))
    }

    fn operator(&mut self) -> Result<Operator, String> {
        let (tok, lit) = self.consume(false);
        Ok(match tok {
            Tok::In => Operator::In,
            Tok::Equals => Operator::Equals,
            Tok::DoubleEquals => Operator::DoubleEquals,
            Tok::GreaterThan => Operator::GreaterThan,
            Tok::LessThan => Operator::LessThan,
            Tok::NotIn => Operator::NotIn,
            Tok::NotEquals => Operator::NotEquals,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        })
    }

    /// `(a,b,c)`, as a sorted set (the empty set `()` is `{""}`).
    fn values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(true);
        if tok != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(true);
        match tok {
            Tok::Identifier | Tok::Comma => {
                let set = self.identifiers()?;
                if self.consume(true).0 != Tok::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(set)
            }
            Tok::ClosedPar => {
                self.consume(true);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn identifiers(&mut self) -> Result<Vec<String>, String> {
        let mut set = std::collections::BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(true);
            match tok {
                Tok::Identifier => {
                    set.insert(lit);
                    let (t2, l2) = self.lookahead(true);
                    match t2 {
                        Tok::Comma => continue,
                        Tok::ClosedPar => return Ok(set.into_iter().collect()),
                        _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    // "(," ",)" and ",," stand for the empty value.
                    if set.is_empty() {
                        set.insert(String::new());
                    }
                    match self.lookahead(true).0 {
                        Tok::ClosedPar => {
                            set.insert(String::new());
                            return Ok(set.into_iter().collect());
                        }
                        Tok::Comma => {
                            set.insert(String::new());
                        }
                        _ => {}
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn exact_value(&mut self) -> Result<Vec<String>, String> {
        if matches!(self.lookahead(true).0, Tok::End | Tok::Comma) {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(true);
        if tok == Tok::Identifier {
            Ok(vec![lit])
        } else {
            Err(format!("found '{lit}', expected: identifier"))
        }
    }
}

fn as_value(tok: Tok, values: bool) -> Tok {
    match tok {
        Tok::In | Tok::NotIn if values => Tok::Identifier,
        t => t,
    }
}

/// `NewRequirement` on what was parsed.
fn new_requirement(key: String, op: Operator, values: Vec<String>) -> Result<Requirement, String> {
    Requirement::new(&key, op, values).map_err(|e| e.0)
}
