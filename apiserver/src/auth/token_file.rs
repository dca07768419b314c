//! The static token file (`--token-auth-file`): bearer tokens listed in a CSV file, one user
//! per line.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/authentication/token/tokenfile/tokenfile.go`:
//!
//! ```text
//!   token,user,uid,"group1,group2"
//!   31ada4fd-adec-460c-809a-9e56ceb75269,alice,1001,"dev,ops"
//! ```
//!
//! At least three columns; the fourth, optional, lists groups. A line with an empty token is
//! skipped; a token given twice keeps its last line (both with a warning in the log, as
//! Kubernetes does).

use super::user::UserInfo;
use std::collections::HashMap;
use std::path::Path;

/// Errors of reading a token file.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file could not be read.
    #[error("cannot read token file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A line has fewer than three columns, or broken quoting.
    #[error("token file '{path}' line {line}: {reason}")]
    Malformed {
        /// The file.
        path: String,
        /// The 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// The users of a token file, by token.
#[derive(Debug, Default, Clone)]
pub struct TokenFile {
    users: HashMap<String, UserInfo>,
}

impl TokenFile {
    /// Reads and parses `path`.
    pub fn read(path: &Path) -> Result<TokenFile, TokenFileError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Read {
            path: shown.clone(),
            source,
        })?;
        TokenFile::parse(&text, &shown)
    }

    /// Parses the file's text (`path` only names it in errors).
    pub fn parse(text: &str, path: &str) -> Result<TokenFile, TokenFileError> {
        let mut users = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line_no = i + 1;
            if line.trim().is_empty() {
                continue;
            }
            let malformed = |reason: String| TokenFileError::Malformed {
                path: path.to_string(),
                line: line_no,
                reason,
            };
            let record = split_csv(line).map_err(malformed)?;
            if record.len() < 3 {
                return Err(malformed(format!(
                    "must have at least 3 columns (token, user name, user uid), found {}",
                    record.len()
                )));
            }
            let token = record[0].clone();
            if token.is_empty() {
                tracing::warn!(
                    path,
                    line = line_no,
                    "skipping a token-file line with an empty token"
                );
                continue;
            }
            let mut user = UserInfo {
                name: record[1].clone(),
                uid: record[2].clone(),
                ..UserInfo::default()
            };
            if let Some(groups) = record.get(3).filter(|g| !g.is_empty()) {
                user.groups = groups.split(',').map(str::to_string).collect();
            }
            if users.insert(token, user).is_some() {
                tracing::warn!(
                    path,
                    line = line_no,
                    "a token appears twice in the token file; the later line wins"
                );
            }
        }
        Ok(TokenFile { users })
    }

    /// The user of `token`, if listed.
    pub fn user(&self, token: &str) -> Option<&UserInfo> {
        self.users.get(token)
    }

    /// How many tokens the file lists.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether the file lists no token.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

/// One CSV record as Go's `encoding/csv` reads it with `TrimLeadingSpace`: fields separated by
/// commas, a field in double quotes may hold commas, `""` is a quote inside one.
fn split_csv(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut chars = line.trim_end_matches('\r').chars().peekable();
    loop {
        while chars.next_if(|c| *c == ' ' || *c == '\t').is_some() {}
        let mut field = String::new();
        if chars.next_if_eq(&'"').is_some() {
            loop {
                match chars.next() {
                    Some('"') if chars.next_if_eq(&'"').is_some() => field.push('"'),
                    Some('"') => break,
                    Some(c) => field.push(c),
                    None => return Err("extraneous or missing \" in quoted-field".into()),
                }
            }
            match chars.next() {
                None => {
                    fields.push(field);
                    return Ok(fields);
                }
                Some(',') => fields.push(field),
                Some(_) => return Err("extraneous or missing \" in quoted-field".into()),
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        fields.push(field);
                        return Ok(fields);
                    }
                    Some(',') => {
                        fields.push(field);
                        break;
                    }
                    Some('"') => return Err("bare \" in non-quoted-field".into()),
                    Some(c) => field.push(c),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_give_users_with_uids_and_groups() {
        let file = TokenFile::parse(
            "t1,alice,1001,\"dev,ops\"\n\nt2, bob, 1002\n,skipped,3\nt3,carol,1003,\n",
            "tokens.csv",
        )
        .unwrap();
        assert_eq!(file.len(), 3);
        let alice = file.user("t1").unwrap();
        assert_eq!((alice.name.as_str(), alice.uid.as_str()), ("alice", "1001"));
        assert_eq!(alice.groups, ["dev", "ops"]);
        assert_eq!(file.user("t2").unwrap().name, "bob");
        assert!(file.user("t3").unwrap().groups.is_empty());
        assert!(file.user("").is_none());
        assert!(file.user("t4").is_none());
    }

    #[test]
    fn short_lines_and_broken_quotes_are_refused_with_their_line() {
        let err = TokenFile::parse("t1,alice,1\nt2,bob\n", "tokens.csv").unwrap_err();
        assert_eq!(
            err.to_string(),
            "token file 'tokens.csv' line 2: must have at least 3 columns (token, user name, user uid), found 2"
        );
        let err = TokenFile::parse("t1,alice,1,\"dev\n", "f").unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
        let err = TokenFile::parse("t\"1,alice,1\n", "f").unwrap_err();
        assert!(err.to_string().contains("bare \""), "{err}");
    }
}
