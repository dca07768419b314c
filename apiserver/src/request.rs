//! Request parsing at the boundary: the URL into a typed [`Route`], the query into typed
//! options, the `Accept` header into what the client can read, and the body into JSON.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`
//! (`RequestInfoFactory.NewRequestInfo`: `/api/v1/namespaces/{ns}/{resource}/{name}/{sub}`,
//! with `status` and `finalize` as namespace subresources), `handlers/negotiation/` and the body
//! limits of `handlers/rest.go`. Trailing slashes are accepted everywhere (the Python client
//! sends `/api/`), unknown query parameters are ignored, and a missing request `Content-Type`
//! means JSON.

use crate::error::{ApiError, ErrorTarget, Result};
use crate::gvk::GroupVersion;
use crate::strategy::{FieldError, FieldErrorKind};
use apimachinery::fmt::go_quote;
use axum::http::HeaderMap;
use serde_json::Value;

/// Largest request body accepted (kube-apiserver's `--max-request-bytes` is 3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// A resource URL, already split: `/apis/{group}/{version}/namespaces/{ns}/{resource}/{name}/{sub}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    /// The group/version.
    pub gv: GroupVersion,
    /// The namespace segment, if any.
    pub namespace: Option<String>,
    /// The plural resource.
    pub resource: String,
    /// The object name, if any.
    pub name: Option<String>,
    /// The subresource, if any.
    pub subresource: Option<String>,
}

/// What a URL addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/version`
    Version,
    /// `/metrics`
    Metrics,
    /// `/healthz`, `/livez`, `/readyz`, and one check of it (`/readyz/ping`)
    Health(crate::healthz::Endpoint, Option<String>),
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/{group}`
    Group(String),
    /// `/api/v1`, `/apis/{group}/{version}`
    Resources(GroupVersion),
    /// `/openapi/v2` (an empty document, see [`crate::openapi::v2`])
    OpenApiV2,
    /// `/openapi/v3`
    OpenApiIndex,
    /// `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`
    OpenApiDocument(GroupVersion),
    /// A resource path.
    Resource(ResourcePath),
    /// A connect subresource (`pods/{name}/log|exec|attach|portforward`,
    /// `nodes/{name}/proxy[/{path}]`): the API server reaches the node's kubelet
    /// ([`crate::connect`]); the second field is the path after `proxy/`.
    Connect(ResourcePath, Option<String>),
    /// `/miniplane/v1/traces[/{traceId}]`: the trace collector (not a Kubernetes path).
    Traces(Option<String>),
    /// `/ui`, `/ui/{file}`: the web UI's embedded files (not a Kubernetes path).
    Ui(Option<String>),
    /// `/miniplane/v1/{faults,controllers,components,lab}`: the admin API (`docs/faults.md`).
    Admin(crate::admin::route::AdminRoute),
    /// Anything else.
    NotFound,
}

impl Route {
    /// Parses a URL path.
    pub fn parse(path: &str) -> Route {
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        match segs.as_slice() {
            ["version"] => Route::Version,
            ["metrics"] => Route::Metrics,
            [first @ ("healthz" | "livez" | "readyz"), rest @ ..] => {
                let check = (!rest.is_empty()).then(|| rest.join("/"));
                match crate::healthz::Endpoint::parse(first) {
                    Some(endpoint) => Route::Health(endpoint, check),
                    None => Route::NotFound,
                }
            }
            ["api"] => Route::CoreVersions,
            ["apis"] => Route::Groups,
            ["apis", group] => Route::Group(group.to_string()),
            ["openapi", "v2"] => Route::OpenApiV2,
            ["openapi", "v3"] => Route::OpenApiIndex,
            ["miniplane", "v1", "traces"] => Route::Traces(None),
            ["miniplane", "v1", "traces", id] => Route::Traces(Some(id.to_string())),
            ["ui"] => Route::Ui(None),
            ["ui", file] => Route::Ui(Some(file.to_string())),
            ["miniplane", "v1", rest @ ..] => match crate::admin::route::AdminRoute::parse(rest) {
                Some(admin) => Route::Admin(admin),
                None => Route::NotFound,
            },
            ["openapi", "v3", "api", v] => Route::OpenApiDocument(GroupVersion::new("", *v)),
            ["openapi", "v3", "apis", g, v] => Route::OpenApiDocument(GroupVersion::new(*g, *v)),
            ["api", v, rest @ ..] => Self::resource(GroupVersion::new("", *v), rest),
            ["apis", g, v, rest @ ..] => Self::resource(GroupVersion::new(*g, *v), rest),
            _ => Route::NotFound,
        }
    }

    fn resource(gv: GroupVersion, rest: &[&str]) -> Route {
        let mut parts = rest;
        let mut namespace = None;
        if parts.is_empty() {
            return Route::Resources(gv);
        }
        // `namespaces/{ns}/{resource}...`, unless the third segment is a namespace subresource.
        if parts[0] == "namespaces" && parts.len() > 2 && !matches!(parts[2], "status" | "finalize")
        {
            namespace = Some(parts[1].to_string());
            parts = &parts[2..];
        }
        let owned = |i: usize| parts.get(i).map(|s| s.to_string());
        if parts.len() >= 3 && crate::connect::is_connect(parts[0], parts[2]) {
            if parts.len() > 3 && parts[2] != "proxy" {
                return Route::NotFound;
            }
            let tail = (parts.len() > 3).then(|| parts[3..].join("/"));
            return Route::Connect(
                ResourcePath {
                    gv,
                    namespace,
                    resource: parts[0].to_string(),
                    name: owned(1),
                    subresource: owned(2),
                },
                tail,
            );
        }
        match parts.len() {
            1..=3 => Route::Resource(ResourcePath {
                gv,
                namespace,
                resource: parts[0].to_string(),
                name: owned(1),
                subresource: owned(2),
            }),
            _ => Route::NotFound,
        }
    }
}

/// The request target of a request whose URI is longer than `http::Uri` holds (65,534
/// bytes), as the connection layer read it (`crate::request_heads`): the request's own URI is
/// then a placeholder, and its path and query are read from here (see `path_and_query`).
#[derive(Debug, Clone)]
pub struct LongTarget(std::sync::Arc<str>);

impl LongTarget {
    /// An origin-form target (`/path?query`, without a fragment).
    pub fn new(target: String) -> LongTarget {
        LongTarget(target.into())
    }

    /// The path (before the first `?`).
    pub fn path(&self) -> &str {
        self.0.split_once('?').map_or(&self.0, |(p, _)| p)
    }

    /// The query (after the first `?`), as `http::Uri::query` gives it.
    pub fn query(&self) -> Option<&str> {
        self.0.split_once('?').map(|(_, q)| q)
    }
}

/// A request's path and raw query: from its [`LongTarget`] when it has one, else its URI.
pub fn path_and_query<'a>(
    uri: &'a axum::http::Uri,
    extensions: &'a axum::http::Extensions,
) -> (&'a str, Option<&'a str>) {
    match extensions.get::<LongTarget>() {
        Some(t) => (t.path(), t.query()),
        None => (uri.path(), uri.query()),
    }
}

/// The query string, decoded. Unknown parameters are kept but never looked at.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Decodes `a=b&c=d`.
    pub fn parse(raw: Option<&str>) -> Query {
        Query {
            pairs: form_urlencoded::parse(raw.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        }
    }

    /// The first value of a parameter.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of a parameter given several times (`?dryRun=All&dryRun=All`).
    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.pairs
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The query encoded again without the parameters named in `drop`, in its order.
    pub fn encoded_without(&self, drop: &[&str]) -> String {
        let mut out = form_urlencoded::Serializer::new(String::new());
        for (k, v) in self
            .pairs
            .iter()
            .filter(|(k, _)| !drop.contains(&k.as_str()))
        {
            out.append_pair(k, v);
        }
        out.finish()
    }

    /// A non-empty value of a parameter.
    pub fn non_empty(&self, key: &str) -> Option<&str> {
        self.get(key).filter(|v| !v.is_empty())
    }

    /// A boolean parameter (`true`, `1`; Go's `strconv.ParseBool`).
    pub fn flag(&self, key: &str) -> Result<bool> {
        match self.get(key) {
            None | Some("") => Ok(false),
            Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
            Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
            Some(other) => Err(ApiError::BadRequest(format!(
                "invalid boolean value for {key}: {other:?}"
            ))),
        }
    }

    /// An integer parameter.
    pub fn int(&self, key: &str) -> Result<Option<i64>> {
        self.non_empty(key)
            .map(|v| {
                v.parse::<i64>().map_err(|_| {
                    ApiError::BadRequest(format!("invalid integer value for {key}: {v:?}"))
                })
            })
            .transpose()
    }

    /// `dryRun=All` (the only accepted value; anything else is a 400 as in Kubernetes).
    pub fn dry_run(&self) -> Result<bool> {
        match self.get("dryRun") {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(ApiError::BadRequest(format!(
                "Invalid dry run value: \"{other}\": supported values are [All]"
            ))),
        }
    }

    /// `fieldValidation`, defaulting to `Warn` as the server does.
    pub fn field_validation(&self) -> Result<FieldValidation> {
        match self.get("fieldValidation") {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some(other) => Err(ApiError::BadRequest(format!(
                "invalid fieldValidation directive: {other}; must be one of Ignore, Warn, Strict"
            ))),
        }
    }
}

/// The longest `?fieldManager=` (`validation.FieldManagerMaxLength`).
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;

impl Query {
    /// Validates the options every write shares, as `ValidateCreateOptions`,
    /// `ValidateUpdateOptions`, `ValidatePatchOptions` and `ValidateDeleteOptions` do
    /// (apimachinery `pkg/apis/meta/v1/validation`): `fieldManager` (at most 128 bytes, printable),
    /// `dryRun` (only `All`), `fieldValidation` (`Ignore`, `Warn`, `Strict` or empty). `first`
    /// are the errors found before these (a patch's `force`); all of them make one 422 on
    /// `options` (`CreateOptions`, ...), worded `CreateOptions.meta.k8s.io "" is invalid: ...`.
    pub fn validate_options(&self, options: &str, mut errors: Vec<FieldError>) -> Result<()> {
        if let Some(manager) = self.get("fieldManager") {
            errors.extend(field_manager_errors(manager));
        }
        let dry_run: Vec<&str> = self.all("dryRun").collect();
        errors.extend(dry_run_errors(&dry_run));
        if let Some(v) = self.get("fieldValidation")
            && !matches!(v, "" | "Ignore" | "Warn" | "Strict")
        {
            errors.push(FieldError {
                kind: FieldErrorKind::NotSupported,
                field: "fieldValidation".into(),
                value: Some(go_quote(v)),
                detail: "supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"".into(),
            });
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(invalid_options(options, errors))
        }
    }
}

/// `ValidateFieldManager`: at most [`FIELD_MANAGER_MAX_LENGTH`] bytes, every character printable.
pub fn field_manager_errors(manager: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if manager.len() > FIELD_MANAGER_MAX_LENGTH {
        errors.push(FieldError {
            kind: FieldErrorKind::TooLong,
            field: "fieldManager".into(),
            value: None,
            detail: format!("may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes"),
        });
    }
    for (i, c) in manager.char_indices() {
        // Go's `unicode.IsPrint`: graphic characters and the ASCII space.
        if c != ' ' && (c.is_control() || c.is_whitespace()) {
            errors.push(FieldError {
                kind: FieldErrorKind::Invalid,
                field: "fieldManager".into(),
                value: Some(go_quote(manager)),
                detail: format!("invalid character U+{:04X} (at position {i})", c as u32),
            });
        }
    }
    errors
}

/// `ValidateDryRun`: every value must be `All` (the value printed as Go prints a `[]string`).
pub fn dry_run_errors(values: &[&str]) -> Vec<FieldError> {
    if values.iter().all(|v| *v == "All") {
        return Vec::new();
    }
    let shown: Vec<String> = values.iter().map(|v| go_quote(v)).collect();
    vec![FieldError {
        kind: FieldErrorKind::NotSupported,
        field: "dryRun".into(),
        value: Some(format!("[]string{{{}}}", shown.join(", "))),
        detail: "supported values: \"All\"".into(),
    }]
}

/// The 422 on a request's options object (`CreateOptions`, `ListOptions`, ...), as
/// `errors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: options}, "", errs)`.
pub fn invalid_options(options: &str, errors: Vec<FieldError>) -> ApiError {
    ApiError::Invalid {
        target: ErrorTarget {
            group: "meta.k8s.io".into(),
            resource: options.to_ascii_lowercase(),
            kind: options.to_string(),
            name: String::new(),
        },
        errors,
    }
}

/// What to do with fields the kind does not know (`?fieldValidation=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop them.
    Ignore,
    /// Drop them and say so in `Warning` headers.
    Warn,
    /// Refuse the request with 400.
    Strict,
}

/// The aggregated discovery versions a client accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggregatedDiscovery {
    /// `apidiscovery.k8s.io/v2`
    V2,
    /// `apidiscovery.k8s.io/v2beta1`
    V2Beta1,
}

impl AggregatedDiscovery {
    /// The `apiVersion` of the list.
    pub fn api_version(self) -> &'static str {
        match self {
            AggregatedDiscovery::V2 => "apidiscovery.k8s.io/v2",
            AggregatedDiscovery::V2Beta1 => "apidiscovery.k8s.io/v2beta1",
        }
    }

    /// The exact response `Content-Type` client-go keys on.
    pub fn content_type(self) -> &'static str {
        match self {
            AggregatedDiscovery::V2 => {
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
            }
            AggregatedDiscovery::V2Beta1 => {
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
            }
        }
    }
}

/// What the client can read, from its `Accept` header, in its order of preference.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Accept {
    /// A `meta.k8s.io` Table (v1 or v1beta1) comes before plain JSON.
    pub table: bool,
    /// Aggregated discovery, if asked for before plain JSON.
    pub aggregated: Option<AggregatedDiscovery>,
    /// `PartialObjectMetadata`/`PartialObjectMetadataList` (metadata-only clients such as
    /// kube-rs' `metadata_watcher` and client-go's metadata informers).
    pub partial_metadata: bool,
}

impl Accept {
    /// Parses the header. Media types other than JSON (protobuf, YAML) are skipped: the server
    /// answers JSON, which every client listed as a fallback.
    pub fn parse(headers: &HeaderMap) -> Accept {
        let raw = headers
            .get(axum::http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let mut out = Accept::default();
        for range in raw.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let essence = parts.next().unwrap_or("");
            let params: Vec<(&str, &str)> = parts.filter_map(|p| p.split_once('=')).collect();
            let param = |k: &str| params.iter().find(|(pk, _)| *pk == k).map(|(_, v)| *v);
            if essence != "application/json" {
                continue;
            }
            match (param("as"), param("g"), param("v")) {
                (Some("Table"), Some("meta.k8s.io"), Some("v1" | "v1beta1")) => {
                    out.table = true;
                    return out;
                }
                (
                    Some("PartialObjectMetadata" | "PartialObjectMetadataList"),
                    Some("meta.k8s.io"),
                    Some("v1" | "v1beta1"),
                ) => {
                    out.partial_metadata = true;
                    return out;
                }
                (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some(v)) => {
                    let version = match v {
                        "v2" => AggregatedDiscovery::V2,
                        "v2beta1" => AggregatedDiscovery::V2Beta1,
                        _ => continue,
                    };
                    out.aggregated = Some(version);
                    return out;
                }
                (None, _, _) => return out,
                _ => continue,
            }
        }
        out
    }
}

/// The field manager of a write: `?fieldManager=`, else the User-Agent's program name
/// (`kubectl/v1.33.1 (linux/amd64)` → `kubectl`), as `prefixFromUserAgent` does.
pub fn field_manager(query: &Query, headers: &HeaderMap) -> String {
    if let Some(m) = query.non_empty("fieldManager") {
        return m.to_string();
    }
    headers
        .get(axum::http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .and_then(|ua| ua.split('/').next())
        .filter(|s| !s.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

/// The essence of the request `Content-Type` (`application/json` when absent).
pub fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "application/json".to_string())
}

/// The 415 of a POST/PUT body in another format (`negotiation.NewUnsupportedMediaTypeError`
/// with the media types kube-apiserver decodes built-in kinds from).
pub const UNSUPPORTED_BODY: &str = "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// Decodes a POST/PUT body as JSON, YAML or (for built-in kinds) Kubernetes protobuf, by its
/// content type; 415 for anything else.
/// `expected` names the kind for the error message (`must be of type Deployment`).
pub fn decode_body(headers: &HeaderMap, body: &[u8], expected: &str) -> Result<Value> {
    decode_body_noting_duplicates(headers, body, expected).map(|(v, _)| v)
}

/// [`decode_body`], also returning the paths of the keys a JSON body gives twice (what strict
/// decoding reports as `duplicate field "<path>"`).
pub fn decode_body_noting_duplicates(
    headers: &HeaderMap,
    body: &[u8],
    expected: &str,
) -> Result<(Value, Vec<String>)> {
    let ct = content_type(headers);
    let no_dups = |v: Value| (v, Vec::new());
    match ct.as_str() {
        "application/json" | "*/*" => decode_json_noting_duplicates(body, expected),
        "application/yaml" => decode_yaml(body, expected).map(no_dups),
        crate::protobuf::CONTENT_TYPE => {
            crate::protobuf::decode(body)
                .map(no_dups)
                .map_err(|e| match e {
                    crate::protobuf::ProtobufError::Malformed(_) => {
                        unrecognized(expected, &e, body)
                    }
                    // `transformDecodeError` once the envelope named a kind.
                    crate::protobuf::ProtobufError::Object {
                        kind,
                        version,
                        message,
                    } => ApiError::BadRequest(format!(
                        "{kind} in version {version:?} cannot be handled as a {expected}: {message}"
                    )),
                    crate::protobuf::ProtobufError::Unsupported(_) => {
                        ApiError::UnsupportedMediaType(e.to_string())
                    }
                })
        }
        _ => Err(ApiError::UnsupportedMediaType(UNSUPPORTED_BODY.into())),
    }
}

/// `summarizeData(data, 30)` of `endpoints/handlers/rest.go`: an object's first 30 bytes as
/// text, anything else in hex.
fn summarize(body: &[u8]) -> String {
    let head = &body[..body.len().min(30)];
    let more = if body.len() > 30 { " ..." } else { "" };
    match body.first() {
        None => "<empty>".into(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(head)),
        Some(_) => {
            let hex: String = head.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}{more}")
        }
    }
}

fn unrecognized(expected: &str, err: impl std::fmt::Display, body: &[u8]) -> ApiError {
    ApiError::BadRequest(format!(
        "the object provided is unrecognized (must be of type {expected}): {err} ({})",
        summarize(body)
    ))
}

/// Decodes a JSON body into an object (400 when it is not a JSON object).
pub fn decode_json(body: &[u8], expected: &str) -> Result<Value> {
    decode_json_noting_duplicates(body, expected).map(|(v, _)| v)
}

/// [`decode_json`], also returning the paths of duplicated keys ([`crate::json_strict`]).
pub fn decode_json_noting_duplicates(body: &[u8], expected: &str) -> Result<(Value, Vec<String>)> {
    if let Err(reason) = crate::deep::check_depth(body) {
        return Err(unrecognized(
            expected,
            format!("couldn't get version/kind; json parse error: {reason}"),
            body,
        ));
    }
    let (v, dups) = crate::json_strict::from_slice(body).map_err(|e| {
        // Go's `encoding/json` wording where it is known; else `serde_json`'s.
        let reason = if e.is_eof() {
            "unexpected end of JSON input".to_string()
        } else {
            e.to_string()
        };
        unrecognized(
            expected,
            format!("couldn't get version/kind; json parse error: {reason}"),
            body,
        )
    })?;
    Ok((require_object(v, expected, body)?, dups))
}

/// The error `json.Unmarshal` gives when a body that is not an object is decoded into the
/// struct `SimpleMetaFactory.Interpret` reads apiVersion and kind with.
fn not_an_object(v: &Value) -> String {
    let what = match v {
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Null | Value::Object(_) => "object",
    };
    format!(
        "json: cannot unmarshal {what} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}"
    )
}

/// Decodes a YAML body into an object (400 when it is not a mapping).
pub fn decode_yaml(body: &[u8], expected: &str) -> Result<Value> {
    // The YAML parser takes time growing with the square of the nesting of flow collections
    // (`{a: {a: ...`: minutes for a 3 MiB body, on a server thread) before its recursion
    // limit (128) refuses the document: refuse bodies nested that deep without parsing them.
    if flow_depth(body) > MAX_YAML_FLOW_DEPTH {
        return Err(unrecognized(
            expected,
            format!("yaml: exceeded max depth of {MAX_YAML_FLOW_DEPTH}"),
            body,
        ));
    }
    let v: Value = serde_norway::from_slice(body)
        .map_err(|e| unrecognized(expected, format!("yaml: {e}"), body))?;
    require_object(v, expected, body)
}

/// Deepest nesting of YAML flow collections accepted before parsing (the parser refuses more
/// than 128 levels anyway; the margin is for brackets inside strings).
const MAX_YAML_FLOW_DEPTH: usize = 1000;

/// The deepest nesting of `[`/`{` in a body (brackets in strings counted too).
fn flow_depth(body: &[u8]) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for b in body {
        match b {
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

fn require_object(v: Value, expected: &str, body: &[u8]) -> Result<Value> {
    if v.is_object() {
        Ok(v)
    } else {
        Err(unrecognized(
            expected,
            format!(
                "couldn't get version/kind; json parse error: {}",
                not_an_object(&v)
            ),
            body,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn routes_split_like_request_info() {
        assert_eq!(Route::parse("/api/"), Route::CoreVersions);
        assert_eq!(
            Route::parse("/apis/apps/v1/"),
            Route::Resources(GroupVersion::new("apps", "v1"))
        );
        let Route::Resource(p) = Route::parse("/apis/apps/v1/namespaces/ns/deployments/d/scale")
        else {
            panic!("not a resource route");
        };
        assert_eq!(p.namespace.as_deref(), Some("ns"));
        assert_eq!(p.name.as_deref(), Some("d"));
        assert_eq!(p.subresource.as_deref(), Some("scale"));
        let Route::Resource(ns) = Route::parse("/api/v1/namespaces/foo/status") else {
            panic!("not a resource route");
        };
        assert_eq!(
            (
                ns.resource.as_str(),
                ns.name.as_deref(),
                ns.subresource.as_deref()
            ),
            ("namespaces", Some("foo"), Some("status"))
        );
        let Route::Resource(all) = Route::parse("/api/v1/pods") else {
            panic!("not a resource route");
        };
        assert_eq!(all.namespace, None);
        assert_eq!(Route::parse("/nope"), Route::NotFound);
    }

    #[test]
    fn accept_prefers_the_first_supported_entry() {
        let mut h = HeaderMap::new();
        h.insert(
            "accept",
            HeaderValue::from_static(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            ),
        );
        assert!(Accept::parse(&h).table);
        h.insert("accept", HeaderValue::from_static("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"));
        assert_eq!(Accept::parse(&h).aggregated, Some(AggregatedDiscovery::V2));
        h.insert("accept", HeaderValue::from_static("application/json, */*"));
        assert_eq!(Accept::parse(&h), Accept::default());
        h.insert(
            "accept",
            HeaderValue::from_static("application/vnd.kubernetes.protobuf,application/json"),
        );
        assert_eq!(Accept::parse(&h), Accept::default());
    }

    #[test]
    fn field_manager_falls_back_to_the_user_agent() {
        let mut h = HeaderMap::new();
        h.insert(
            "user-agent",
            HeaderValue::from_static("kubectl/v1.33.1 (linux/amd64) kubernetes/abc"),
        );
        assert_eq!(field_manager(&Query::parse(None), &h), "kubectl");
        assert_eq!(
            field_manager(&Query::parse(Some("fieldManager=me")), &h),
            "me"
        );
    }

    #[test]
    fn bodies_decode_as_json_or_yaml() {
        let mut h = HeaderMap::new();
        assert!(decode_body(&h, b"{\"a\":1}", "Pod").is_ok());
        assert!(matches!(
            decode_body(&h, b"{", "Pod"),
            Err(ApiError::BadRequest(_))
        ));
        h.insert("content-type", HeaderValue::from_static("application/yaml"));
        assert_eq!(
            decode_body(&h, b"a: 1\n", "Pod").ok(),
            Some(serde_json::json!({"a": 1}))
        );
        let deep = format!("{}1{}", "{a: ".repeat(1001), "}".repeat(1001));
        assert!(matches!(
            decode_body(&h, deep.as_bytes(), "Pod"),
            Err(ApiError::BadRequest(m)) if m.contains("yaml: exceeded max depth of 1000")
        ));
        h.insert("content-type", HeaderValue::from_static("text/plain"));
        assert!(matches!(
            decode_body(&h, b"x", "Pod"),
            Err(ApiError::UnsupportedMediaType(_))
        ));
    }
}
