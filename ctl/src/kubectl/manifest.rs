//! Reading manifests for `apply -f` and `delete -f`: kubectl's `FilenameParam` visitors
//! (`k8s.io/cli-runtime/pkg/resource/visitor.go`: `FileVisitorForSTDIN`, `ExpandPathsToFileVisitors`,
//! `StreamVisitor`).
//!
//! ```text
//!   -f -          standard input
//!   -f FILE       one file (any extension)
//!   -f DIR        its *.yaml, *.yml and *.json files in name order (-R: also subfolders)
//!        │
//!        ▼  YAML stream: documents split at `---`, empty ones skipped, JSON is YAML too
//!   [Manifest { source, object }]   a `kind: List` contributes its items
//! ```
//!
//! The parsing half ([`parse_documents`]) is plain text in, objects out.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::error::{Error, Result};
use super::restmapper::{Mapping, RestMapper};

/// One object from a manifest file.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// Where it came from: the path as given, or `STDIN`.
    pub source: String,
    /// The object (with `apiVersion`, `kind` and `metadata.name` checked).
    pub object: Value,
}

impl Manifest {
    /// `apiVersion`.
    pub fn api_version(&self) -> &str {
        self.object["apiVersion"].as_str().unwrap_or_default()
    }

    /// `kind`.
    pub fn kind(&self) -> &str {
        self.object["kind"].as_str().unwrap_or_default()
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap_or_default()
    }

    /// The resource of its `apiVersion` and `kind`, or kubectl's "no matches for kind" error.
    pub fn mapping<'m>(&self, mapper: &'m RestMapper) -> Result<&'m Mapping> {
        mapper
            .kind_for(self.api_version(), self.kind())
            .ok_or_else(|| Error::NoKindMatch {
                name: self.name().to_owned(),
                namespace: self.namespace().unwrap_or_default().to_owned(),
                source_name: self.source.clone(),
                kind: self.kind().to_owned(),
                api_version: self.api_version().to_owned(),
            })
    }

    /// `metadata.namespace`, if set.
    pub fn namespace(&self) -> Option<&str> {
        self.object["metadata"]["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
    }
}

/// Reads every `-f` argument, in order. Fails on the first missing path or bad document.
pub fn read_all(filenames: &[String], recursive: bool) -> Result<Vec<Manifest>> {
    let mut manifests = Vec::new();
    for name in filenames {
        if name == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| Error::Other(format!("reading standard input: {e}")))?;
            manifests.extend(parse_documents(&text, "STDIN")?);
            continue;
        }
        let path = Path::new(name);
        if !path.exists() {
            return Err(Error::PathNotFound(name.clone()));
        }
        for file in expand(path, recursive)? {
            let source = file.display().to_string();
            let text = std::fs::read_to_string(&file)
                .map_err(|e| Error::Other(format!("reading {source}: {e}")))?;
            manifests.extend(parse_documents(&text, &source)?);
        }
    }
    Ok(manifests)
}

/// A file as itself; a directory as its manifest files in name order (kubectl reads only
/// `.json`, `.yaml` and `.yml` files from directories).
fn expand(path: &Path, recursive: bool) -> Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let read = std::fs::read_dir(path)
        .map_err(|e| Error::Other(format!("reading {}: {e}", path.display())))?;
    let mut entries: Vec<PathBuf> = read.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    let mut files = Vec::new();
    for entry in entries {
        if entry.is_dir() {
            if recursive {
                files.extend(expand(&entry, true)?);
            }
        } else if matches!(
            entry.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            files.push(entry);
        }
    }
    Ok(files)
}

/// Splits a YAML (or JSON) stream into objects. `source` names the input in errors.
pub fn parse_documents(text: &str, source: &str) -> Result<Vec<Manifest>> {
    let parse_error = |message: String| Error::Parse {
        source_name: source.to_owned(),
        message,
    };
    let mut manifests = Vec::new();
    for (i, document) in serde_norway::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(document)
            .map_err(|e| parse_error(e.to_string().replace('\n', " ")))?;
        match value {
            Value::Null => continue,
            Value::Object(_) => {}
            other => {
                return Err(parse_error(format!(
                    "document {} is not an object but {}",
                    i + 1,
                    json_type(&other)
                )));
            }
        }
        let kind = value["kind"].as_str().unwrap_or_default();
        if kind.ends_with("List") && value["items"].is_array() {
            for item in value["items"].as_array().into_iter().flatten() {
                manifests.push(checked(item.clone(), source, i)?);
            }
        } else {
            manifests.push(checked(value, source, i)?);
        }
    }
    Ok(manifests)
}

/// Checks the fields every object needs, as kubectl's decoder and validation do.
fn checked(object: Value, source: &str, index: usize) -> Result<Manifest> {
    let missing: Vec<&str> = [
        ("apiVersion", &object["apiVersion"]),
        ("kind", &object["kind"]),
        ("metadata.name", &object["metadata"]["name"]),
    ]
    .into_iter()
    .filter(|(_, v)| v.as_str().is_none_or(str::is_empty))
    .map(|(field, _)| field)
    .collect();
    if !missing.is_empty() {
        return Err(Error::Parse {
            source_name: source.to_owned(),
            message: format!("document {}: {} not set", index + 1, missing.join(", ")),
        });
    }
    Ok(Manifest {
        source: source.to_owned(),
        object,
    })
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_yaml_and_lists() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\n\
                    apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n";
        let got = parse_documents(text, "x.yaml").unwrap();
        let names: Vec<&str> = got.iter().map(Manifest::name).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(got[1].kind(), "ConfigMap");
        assert_eq!(got[0].source, "x.yaml");
    }

    #[test]
    fn json_is_yaml() {
        let got = parse_documents(
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"ns"}}"#,
            "d.json",
        )
        .unwrap();
        assert_eq!(got[0].api_version(), "apps/v1");
        assert_eq!(got[0].namespace(), Some("ns"));
    }

    #[test]
    fn bad_input_is_one_line() {
        let err = parse_documents("kind: [unclosed\n", "bad.yaml").unwrap_err();
        let line = err.to_string();
        assert!(
            line.starts_with("error: error parsing bad.yaml: "),
            "{line}"
        );
        assert!(!line.contains('\n'), "{line}");

        let err = parse_documents("just a string\n", "s.yaml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "error: error parsing s.yaml: document 1 is not an object but a string"
        );
        let err = parse_documents("metadata: {name: x}\n", "k.yaml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "error: error parsing k.yaml: document 1: apiVersion, kind not set"
        );
    }
}
