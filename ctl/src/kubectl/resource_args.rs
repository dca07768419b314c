//! The `TYPE[,TYPE...] [NAME...]` and `TYPE/NAME...` arguments of `get`, `describe`, `delete`,
//! `scale` and `rollout`: kubectl's `ResourceTypeOrNameArgs`
//! (`k8s.io/cli-runtime/pkg/resource/builder.go`).
//!
//! ```text
//!   get deploy                 → [deploy: all]
//!   get deploy,po              → [deploy: all] [po: all]
//!   get deploy web api         → [deploy: web, api]
//!   get deploy/web po/p1       → [deploy: web] [po: p1]
//!   get deploy deploy/web      → error (kubectl: no need to specify a resource type ...)
//! ```

use super::error::{Error, Result};
use super::restmapper::{Mapping, RestMapper};

/// One resource type and the names asked for (none: every object of the type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeRequest {
    /// The `TYPE` as typed (`deploy`, `deployments.apps`...), resolved later by the RESTMapper.
    pub type_arg: String,
    /// The names; empty means "list them all".
    pub names: Vec<String>,
}

/// Parses the positional arguments into requests, grouping `TYPE/NAME` pairs by type in the
/// order types first appear.
pub fn parse(args: &[String]) -> Result<Vec<TypeRequest>> {
    let Some(first) = args.first() else {
        return Ok(Vec::new());
    };
    if args.iter().any(|a| a.contains('/')) {
        let mut requests: Vec<TypeRequest> = Vec::new();
        for arg in args {
            let Some((type_arg, name)) = arg.split_once('/') else {
                return Err(Error::Usage(format!(
                    "there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'miniplane get resource/<resource_name>' instead of 'miniplane get resource resource/<resource_name>'): {arg}"
                )));
            };
            if type_arg.is_empty() || name.is_empty() || name.contains('/') {
                return Err(Error::Usage(format!(
                    "arguments in resource/name form must have a single resource and name: {arg}"
                )));
            }
            match requests.iter_mut().find(|r| r.type_arg == type_arg) {
                Some(r) => r.names.push(name.to_owned()),
                None => requests.push(TypeRequest {
                    type_arg: type_arg.to_owned(),
                    names: vec![name.to_owned()],
                }),
            }
        }
        return Ok(requests);
    }
    let names: Vec<String> = args[1..].to_vec();
    let types: Vec<&str> = first.split(',').filter(|t| !t.is_empty()).collect();
    if types.is_empty() {
        return Err(Error::Usage(format!("invalid resource type \"{first}\"")));
    }
    Ok(types
        .into_iter()
        .map(|t| TypeRequest {
            type_arg: t.to_owned(),
            names: names.clone(),
        })
        .collect())
}

/// Exactly one `TYPE NAME` or `TYPE/NAME` (for `scale`, `rollout`), or a usage error
/// mentioning `verb`.
pub fn parse_one(args: &[String], verb: &str) -> Result<(String, String)> {
    let requests = parse(args)?;
    match requests.as_slice() {
        [TypeRequest { type_arg, names }] if names.len() == 1 => {
            Ok((type_arg.clone(), names[0].clone()))
        }
        _ => Err(Error::Usage(format!(
            "{verb} needs exactly one resource: TYPE NAME or TYPE/NAME"
        ))),
    }
}

/// A [`TypeRequest`] whose type the RESTMapper resolved.
#[derive(Debug, Clone)]
pub struct Resolved<'m> {
    /// The resource.
    pub mapping: &'m Mapping,
    /// The names; empty means "list them all".
    pub names: Vec<String>,
}

/// Resolves every type; a category (`all`) that is not a resource name expands to its
/// resources. The flag says whether the output must name kinds (`deployment.apps/web`):
/// several types, or a category.
pub fn resolve<'m>(
    mapper: &'m RestMapper,
    requests: &[TypeRequest],
) -> Result<(Vec<Resolved<'m>>, bool)> {
    let mut resolved = Vec::new();
    let mut expanded = false;
    for request in requests {
        match mapper.resource_for(&request.type_arg) {
            Ok(mapping) => resolved.push(Resolved {
                mapping,
                names: request.names.clone(),
            }),
            Err(e) => {
                let members = mapper.category(&request.type_arg);
                if members.is_empty() {
                    return Err(e);
                }
                expanded = true;
                resolved.extend(members.into_iter().map(|mapping| Resolved {
                    mapping,
                    names: request.names.clone(),
                }));
            }
        }
    }
    let with_kind = expanded || resolved.len() > 1;
    Ok((resolved, with_kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    fn req(t: &str, names: &[&str]) -> TypeRequest {
        TypeRequest {
            type_arg: t.to_owned(),
            names: names.iter().map(|n| (*n).to_owned()).collect(),
        }
    }

    #[test]
    fn types_then_names() {
        assert_eq!(parse(&args("deploy")).unwrap(), [req("deploy", &[])]);
        assert_eq!(
            parse(&args("deploy,po")).unwrap(),
            [req("deploy", &[]), req("po", &[])]
        );
        assert_eq!(
            parse(&args("deploy web api")).unwrap(),
            [req("deploy", &["web", "api"])]
        );
        assert!(parse(&[]).unwrap().is_empty());
    }

    #[test]
    fn type_slash_name_pairs_group_by_type() {
        assert_eq!(
            parse(&args("deploy/web po/p1 deploy/api")).unwrap(),
            [req("deploy", &["web", "api"]), req("po", &["p1"])]
        );
        assert!(parse(&args("deploy deploy/web")).is_err());
        assert!(parse(&args("deploy/")).is_err());
        assert!(parse(&args("a/b/c")).is_err());
    }

    #[test]
    fn exactly_one() {
        assert_eq!(
            parse_one(&args("deploy/web"), "scale").unwrap(),
            ("deploy".to_owned(), "web".to_owned())
        );
        assert_eq!(
            parse_one(&args("deploy web"), "scale").unwrap(),
            ("deploy".to_owned(), "web".to_owned())
        );
        assert!(parse_one(&args("deploy"), "scale").is_err());
        assert!(parse_one(&args("deploy a b"), "scale").is_err());
    }
}
