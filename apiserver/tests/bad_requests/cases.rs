//! The rows of the table: what kube-apiserver answers to each bad request, generated per
//! resource where the refusal is the same for every kind.

use super::{Case, case};
use crate::common::{collection, resources, sample};
use axum::http::Method;
use serde_json::json;

pub const CMS: &str = "/api/v1/namespaces/default/configmaps";
const CM1: &str = "/api/v1/namespaces/default/configmaps/cm1";
const DEPLOY: &str = "/apis/apps/v1/namespaces/default/deployments/web";
const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const SMP: &str = "application/strategic-merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

/// `PatchOptions.meta.k8s.io "" is invalid: ...` and its kin.
fn options_invalid(kind: &str, rest: &str) -> String {
    format!("{kind}.meta.k8s.io \"\" is invalid: {rest}")
}

const TOO_LONG_MANAGER: &str = "fieldManager: Too long: may not be more than 128 bytes";
const BAD_DRY_RUN: &str =
    "dryRun: Unsupported value: []string{\"Bogus\"}: supported values: \"All\"";
const BAD_FIELD_VALIDATION: &str = "fieldValidation: Unsupported value: \"Bogus\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"";
const NOT_ACCEPTABLE: &str = "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf";
const NS_MISMATCH: &str =
    "the namespace of the provided object does not match the namespace sent on the request";

fn renamed(url_name: &str) -> String {
    format!("the name of the object (other) does not match the name on the URL ({url_name})")
}

/// Bodies every namespaced built-in kind refuses on create.
fn create_cases(out: &mut Vec<Case>) {
    for info in resources().into_iter().filter(|r| r.namespaced) {
        let url = collection(&info);
        let kind = info.kind.clone();
        let res = info.gvr.resource.clone();
        let good = sample(&info, "fresh");
        let unrecognized =
            format!("the object provided is unrecognized (must be of type {kind}): ");
        let interpret = "into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }";
        out.push(
            case(format!("{res}: truncated JSON"), Method::POST, &url)
                .raw("application/json", "{")
                .is(400, "BadRequest", format!("{unrecognized}couldn't get version/kind; json parse error: unexpected end of JSON input ({{)")),
        );
        out.push(
            case(format!("{res}: JSON array"), Method::POST, &url)
                .raw("application/json", "[]")
                .is(400, "BadRequest", format!("{unrecognized}couldn't get version/kind; json parse error: json: cannot unmarshal array {interpret} (5b5d)")),
        );
        out.push(
            case(format!("{res}: JSON string"), Method::POST, &url)
                .raw("application/json", "\"x\"")
                .is(400, "BadRequest", format!("{unrecognized}couldn't get version/kind; json parse error: json: cannot unmarshal string {interpret} (227822)")),
        );
        let too_deep = format!("{}{}", "[".repeat(10_001), "]".repeat(10_001));
        out.push(
            case(format!("{res}: JSON nested 10,001 levels"), Method::POST, &url)
                .raw("application/json", &too_deep)
                .is(400, "BadRequest", format!("{unrecognized}couldn't get version/kind; json parse error: invalid character '[' exceeded max depth ({} ...)", "5b".repeat(30))),
        );
        let mut wrong_kind = good.clone();
        wrong_kind["kind"] = json!("Bogus");
        out.push(
            case(format!("{res}: wrong kind"), Method::POST, &url)
                .json(&wrong_kind)
                .has(400, "BadRequest", "Bogus"),
        );
        let mut wrong_version = good.clone();
        wrong_version["apiVersion"] = json!("bogus.example/v9");
        out.push(
            case(format!("{res}: wrong apiVersion"), Method::POST, &url)
                .json(&wrong_version)
                .has(400, "BadRequest", "bogus.example/v9"),
        );
        let mut other_ns = good.clone();
        other_ns["metadata"]["namespace"] = json!("kube-system");
        out.push(
            case(format!("{res}: namespace mismatch"), Method::POST, &url)
                .json(&other_ns)
                .is(400, "BadRequest", NS_MISMATCH),
        );
        // Events' and the RBAC kinds' names need only be path segments.
        if !matches!(kind.as_str(), "Event" | "Role" | "RoleBinding") {
            let mut bad_name = good.clone();
            bad_name["metadata"]["name"] = json!("Bad_Name");
            out.push(
                case(format!("{res}: invalid name"), Method::POST, &url)
                    .json(&bad_name)
                    .has(422, "Invalid", "metadata.name: Invalid value: \"Bad_Name\""),
            );
        }
        let mut no_name = good.clone();
        no_name["metadata"] = json!({});
        out.push(
            case(format!("{res}: no name"), Method::POST, &url)
                .json(&no_name)
                .has(
                    422,
                    "Invalid",
                    "metadata.name: Required value: name or generateName is required",
                ),
        );
        let mut unknown = good.clone();
        unknown["bogusField"] = json!(1);
        out.push(
            case(format!("{res}: unknown field, Strict"), Method::POST, format!("{url}?fieldValidation=Strict"))
                .json(&unknown)
                .is(400, "BadRequest", format!("{kind} in version \"{}\" cannot be handled as a {kind}: strict decoding error: unknown field \"bogusField\"", info.gvr.version)),
        );
        let dup = format!(
            "{{\"metadata\":{{\"name\":\"dup\"}},\"apiVersion\":\"{}\",\"kind\":\"{kind}\",\"metadata\":{{\"name\":\"dup\"}}}}",
            info.api_version()
        );
        out.push(
            case(format!("{res}: duplicate key, Strict"), Method::POST, format!("{url}?fieldValidation=Strict"))
                .raw("application/json", &dup)
                .is(400, "BadRequest", format!("{kind} in version \"{}\" cannot be handled as a {kind}: strict decoding error: duplicate field \"metadata\"", info.gvr.version)),
        );
        for (query, rest) in [
            ("fieldValidation=Bogus", BAD_FIELD_VALIDATION.to_string()),
            ("dryRun=Bogus", BAD_DRY_RUN.to_string()),
            (
                &*format!("fieldManager={}", "m".repeat(129)),
                TOO_LONG_MANAGER.to_string(),
            ),
        ] {
            out.push(
                case(
                    format!("{res}: create ?{}", &query[..query.len().min(20)]),
                    Method::POST,
                    format!("{url}?{query}"),
                )
                .json(&good)
                .is(422, "Invalid", options_invalid("CreateOptions", &rest)),
            );
        }
        out.push(
            case(
                format!("{res}: get missing"),
                Method::GET,
                format!("{url}/nope"),
            )
            .is(
                404,
                "NotFound",
                format!("{} \"nope\" not found", info.gvr.group_resource()),
            ),
        );
        out.push(
            case(format!("{res}: Accept XML"), Method::GET, &url)
                .header("accept", "application/xml")
                .is(406, "NotAcceptable", NOT_ACCEPTABLE),
        );
        out.push(
            case(
                format!("{res}: PUT name mismatch"),
                Method::PUT,
                format!("{url}/other-url"),
            )
            .json(&sample(&info, "other"))
            .is(
                400,
                "BadRequest",
                "the name of the object (other) does not match the name on the URL (other-url)",
            ),
        );
        out.push(
            case(
                format!("{res}: PUT ?dryRun=Bogus"),
                Method::PUT,
                format!("{url}/fresh?dryRun=Bogus"),
            )
            .json(&good)
            .is(
                422,
                "Invalid",
                options_invalid("UpdateOptions", BAD_DRY_RUN),
            ),
        );
        out.push(
            case(
                format!("{res}: merge patch missing"),
                Method::PATCH,
                format!("{url}/nope"),
            )
            .patch(MERGE, &json!({"metadata": {"labels": {"a": "b"}}}))
            .is(
                404,
                "NotFound",
                format!("{} \"nope\" not found", info.gvr.group_resource()),
            ),
        );
        out.push(
            case(
                format!("{res}: delete missing"),
                Method::DELETE,
                format!("{url}/nope"),
            )
            .is(
                404,
                "NotFound",
                format!("{} \"nope\" not found", info.gvr.group_resource()),
            ),
        );
    }
}

/// Label selectors `labels.Parse` refuses, with its words.
fn label_selector_cases() -> Vec<(String, String)> {
    let key64 = "k".repeat(64);
    let val64 = "v".repeat(64);
    let qualified = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    vec![
        ("a=b,".into(), "found '', expected: identifier after ','".into()),
        (",".into(), "found ',', expected: !, identifier, or 'end of string'".into()),
        ("=b".into(), "found '=', expected: !, identifier, or 'end of string'".into()),
        (
            format!("{key64}=b"),
            format!("unable to parse requirement: <nil>: Invalid value: \"{key64}\": name part must be no more than 63 characters"),
        ),
        (
            format!("a={val64}"),
            format!("unable to parse requirement: values[0][a]: Invalid value: \"{val64}\": must be no more than 63 characters"),
        ),
        (
            "-a=b".into(),
            format!("unable to parse requirement: <nil>: Invalid value: \"-a\": name part {qualified}"),
        ),
        (
            "a/b/c=d".into(),
            format!("unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a qualified name {qualified} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"),
        ),
        (
            "a b".into(),
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt".into(),
        ),
        (
            "x>abc".into(),
            "unable to parse requirement: values[0]: Invalid value: \"abc\": for 'Gt', 'Lt' operators, the value must be an integer".into(),
        ),
        ("a=(b)".into(), "unable to parse requirement: found '(', expected: identifier".into()),
        ("!a=b".into(), "found '=', expected: ',' or 'end of string'".into()),
        ("a=b=c".into(), "found '=', expected: ',' or 'end of string'".into()),
        ("a in (b c)".into(), "unable to parse requirement: found 'c', expected: ',' or ')'".into()),
        ("a in (".into(), "unable to parse requirement: found '', expected: ',', ')' or identifier".into()),
        ("a in b".into(), "unable to parse requirement: found 'b' expected: '('".into()),
        (
            "a=b c".into(),
            "found 'c', expected: ',' or 'end of string'".into(),
        ),
    ]
}

/// Field selectors `fields.ParseSelector` refuses.
fn field_selector_cases() -> Vec<(String, String)> {
    vec![
        (
            "metadata.name=a=b".into(),
            "invalid field selector: unescaped character in value: 61".into(),
        ),
        (
            "metadata.name=a,b".into(),
            "invalid selector: 'metadata.name=a,b'; can't understand 'b'".into(),
        ),
        (
            "metadata.name".into(),
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'".into(),
        ),
        (
            "metadata.name=a\\x".into(),
            "invalid field selector: invalid escape sequence: \\x".into(),
        ),
        (
            "metadata.name=a\\".into(),
            "invalid field selector: invalid escape sequence: \\".into(),
        ),
        (
            "bogus.field=x".into(),
            "field label not supported: bogus.field".into(),
        ),
    ]
}

fn query_cases(out: &mut Vec<Case>) {
    let lists = [
        CMS,
        "/api/v1/pods",
        "/api/v1/namespaces/default/pods",
        "/apis/apps/v1/namespaces/default/deployments",
        "/api/v1/namespaces",
        "/api/v1/nodes",
    ];
    for list in lists {
        for (sel, msg) in label_selector_cases() {
            let q: String = form_urlencoded::Serializer::new(String::new())
                .append_pair("labelSelector", &sel)
                .finish();
            out.push(
                case(
                    format!("{list} labelSelector {sel:.20}"),
                    Method::GET,
                    format!("{list}?{q}"),
                )
                .is(400, "BadRequest", msg),
            );
        }
        for (sel, msg) in field_selector_cases() {
            let q: String = form_urlencoded::Serializer::new(String::new())
                .append_pair("fieldSelector", &sel)
                .finish();
            out.push(
                case(
                    format!("{list} fieldSelector {sel}"),
                    Method::GET,
                    format!("{list}?{q}"),
                )
                .is(400, "BadRequest", msg),
            );
        }
        out.push(
            case(
                format!("{list} limit=abc"),
                Method::GET,
                format!("{list}?limit=abc"),
            )
            .has(400, "BadRequest", "abc"),
        );
        out.push(
            case(
                format!("{list} resourceVersion=abc"),
                Method::GET,
                format!("{list}?resourceVersion=abc"),
            )
            .has(400, "BadRequest", "abc"),
        );
        out.push(
            case(
                format!("{list} watch=maybe"),
                Method::GET,
                format!("{list}?watch=maybe"),
            )
            .has(400, "BadRequest", "maybe"),
        );
        out.push(
            case(
                format!("{list} continue garbage"),
                Method::GET,
                format!("{list}?continue=!!!"),
            )
            .has(400, "BadRequest", "invalid continue token"),
        );
        out.push(
            case(format!("{list} resourceVersionMatch without resourceVersion"), Method::GET, format!("{list}?resourceVersionMatch=Exact"))
                .is(422, "Invalid", options_invalid("ListOptions", "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided")),
        );
        out.push(
            case(format!("{list} resourceVersionMatch=Bogus"), Method::GET, format!("{list}?resourceVersion=1&resourceVersionMatch=Bogus"))
                .is(422, "Invalid", options_invalid("ListOptions", "resourceVersionMatch: Unsupported value: \"Bogus\": supported values: \"Exact\", \"NotOlderThan\", \"\"")),
        );
        out.push(
            case(format!("{list} Accept XML"), Method::GET, list)
                .header("accept", "application/xml, text/xml")
                .is(406, "NotAcceptable", NOT_ACCEPTABLE),
        );
    }
}

fn patch_cases(out: &mut Vec<Case>) {
    let rename = json!({"metadata": {"name": "other"}});
    let cm_apply = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v2"}});
    let apply_url = format!("{CM1}?fieldManager=tester");
    let rows = vec![
        case("merge patch renames", Method::PATCH, CM1).patch(MERGE, &rename).is(400, "BadRequest", renamed("cm1")),
        case("strategic patch renames", Method::PATCH, CM1).patch(SMP, &rename).is(400, "BadRequest", renamed("cm1")),
        case("JSON patch renames", Method::PATCH, CM1)
            .patch(JSON_PATCH, &json!([{"op": "replace", "path": "/metadata/name", "value": "other"}]))
            .is(400, "BadRequest", renamed("cm1")),
        case("deployment merge patch renames", Method::PATCH, DEPLOY).patch(MERGE, &rename).is(400, "BadRequest", renamed("web")),
        case("deployment JSON patch renames", Method::PATCH, DEPLOY)
            .patch(JSON_PATCH, &json!([{"op": "replace", "path": "/metadata/name", "value": "other"}]))
            .is(400, "BadRequest", renamed("web")),
        case("merge patch moves namespace", Method::PATCH, CM1)
            .patch(MERGE, &json!({"metadata": {"namespace": "kube-system"}}))
            .is(400, "BadRequest", NS_MISMATCH),
        case("JSON patch moves namespace", Method::PATCH, CM1)
            .patch(JSON_PATCH, &json!([{"op": "replace", "path": "/metadata/namespace", "value": "kube-system"}]))
            .is(400, "BadRequest", NS_MISMATCH),
        case("apply renames", Method::PATCH, &apply_url)
            .patch(APPLY, &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}}))
            .is(400, "BadRequest", renamed("cm1")),
        case("apply renames on create", Method::PATCH, format!("{CMS}/newcm?fieldManager=tester"))
            .patch(APPLY, &cm_apply("other"))
            .is(400, "BadRequest", renamed("newcm")),
        case("apply without apiVersion", Method::PATCH, &apply_url)
            .patch(APPLY, &json!({"kind": "ConfigMap", "metadata": {"name": "cm1"}}))
            .is(400, "BadRequest", "invalid object type: /, Kind=ConfigMap"),
        case("apply without kind", Method::PATCH, &apply_url)
            .patch(APPLY, &json!({"apiVersion": "v1", "metadata": {"name": "cm1"}}))
            .is(400, "BadRequest", "invalid object type: /v1, Kind="),
        case("apply without either", Method::PATCH, &apply_url)
            .patch(APPLY, &json!({"metadata": {"name": "cm1"}}))
            .is(400, "BadRequest", "invalid object type: /, Kind="),
        case("apply of another kind", Method::PATCH, &apply_url)
            .patch(APPLY, &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cm1"}}))
            .is(400, "BadRequest", "invalid object type: /v1, Kind=Secret"),
        case("apply of another version", Method::PATCH, format!("{DEPLOY}?fieldManager=tester"))
            .patch(APPLY, &json!({"apiVersion": "apps/v1beta2", "kind": "Deployment", "metadata": {"name": "web"}}))
            .is(400, "BadRequest", "invalid object type: apps/v1beta2, Kind=Deployment"),
        case("apply without kind on create", Method::PATCH, format!("{CMS}/newcm?fieldManager=tester"))
            .patch(APPLY, &json!({"apiVersion": "v1", "metadata": {"name": "newcm"}}))
            .is(400, "BadRequest", "invalid object type: /v1, Kind="),
        case("apply with managedFields", Method::PATCH, &apply_url)
            .patch(APPLY, &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1", "managedFields": [{"manager": "x"}]}}))
            .is(400, "BadRequest", "metadata.managedFields must be nil"),
        case("apply of bad YAML", Method::PATCH, &apply_url).raw(APPLY, "a: [").has(400, "BadRequest", "error decoding YAML"),
        case("apply without fieldManager", Method::PATCH, CM1)
            .patch(APPLY, &cm_apply("cm1"))
            .is(422, "Invalid", options_invalid("PatchOptions", "fieldManager: Required value: is required for apply patch")),
        case("apply with a long fieldManager", Method::PATCH, format!("{CM1}?fieldManager={}", "m".repeat(129)))
            .patch(APPLY, &cm_apply("cm1"))
            .is(422, "Invalid", options_invalid("PatchOptions", TOO_LONG_MANAGER)),
        case("merge patch with a long fieldManager", Method::PATCH, format!("{CM1}?fieldManager={}", "m".repeat(200)))
            .patch(MERGE, &json!({"data": {"k": "v3"}}))
            .is(422, "Invalid", options_invalid("PatchOptions", TOO_LONG_MANAGER)),
        case("merge patch with force", Method::PATCH, format!("{CM1}?force=true"))
            .patch(MERGE, &json!({"data": {"k": "v3"}}))
            .is(422, "Invalid", options_invalid("PatchOptions", "force: Forbidden: may not be specified for non-apply patch")),
        case("patch ?dryRun=Bogus", Method::PATCH, format!("{CM1}?dryRun=Bogus"))
            .patch(MERGE, &json!({"data": {"k": "v3"}}))
            .is(422, "Invalid", options_invalid("PatchOptions", BAD_DRY_RUN)),
        case("patch ?fieldValidation=Bogus", Method::PATCH, format!("{CM1}?fieldValidation=Bogus"))
            .patch(MERGE, &json!({"data": {"k": "v3"}}))
            .is(422, "Invalid", options_invalid("PatchOptions", BAD_FIELD_VALIDATION)),
        case("$deleteFromPrimitiveList on a map", Method::PATCH, CM1)
            .patch(SMP, &json!({"metadata": {"$deleteFromPrimitiveList/labels": ["a"]}}))
            .has(422, "Invalid", "patch: Invalid value"),
        case("merge patch duplicate key, Strict", Method::PATCH, format!("{CM1}?fieldValidation=Strict"))
            .raw(MERGE, r#"{"data":{"k":"v4"},"data":{"k":"v5"}}"#)
            .has(422, "Invalid", "strict decoding error: duplicate field \"data\""),
        case("strategic patch duplicate key, Strict", Method::PATCH, format!("{CM1}?fieldValidation=Strict"))
            .raw(SMP, r#"{"data":{"k":"v4","k":"v5"}}"#)
            .is(422, "Invalid", " \"\" is invalid: patch: Invalid value: \"map[data:map[k:v5]]\": strict decoding error: duplicate field \"data.k\""),
        case("$retainKeys not a list", Method::PATCH, CM1)
            .patch(SMP, &json!({"data": {"$retainKeys": "k"}}))
            .is(400, "BadRequest", "invalid patch format of retainKeys"),
        case("merge patch truncated", Method::PATCH, CM1).raw(MERGE, "{").has(400, "BadRequest", ""),
        case("strategic patch truncated", Method::PATCH, CM1).raw(SMP, "{").has(400, "BadRequest", ""),
        case("JSON patch truncated", Method::PATCH, CM1).raw(JSON_PATCH, "[").has(400, "BadRequest", ""),
        case("JSON patch not a list", Method::PATCH, CM1).patch(JSON_PATCH, &json!({"op": "add"})).has(400, "BadRequest", ""),
        case("JSON patch removes a missing path", Method::PATCH, CM1)
            .patch(JSON_PATCH, &json!([{"op": "remove", "path": "/data/missing"}]))
            .has(422, "Invalid", ""),
        case("JSON patch test fails", Method::PATCH, CM1)
            .patch(JSON_PATCH, &json!([{"op": "test", "path": "/data/k", "value": "nope"}]))
            .has(422, "Invalid", ""),
        case("JSON patch unknown op", Method::PATCH, CM1)
            .patch(JSON_PATCH, &json!([{"op": "bogus", "path": "/data/k"}]))
            .has(422, "Invalid", ""),
        case("unknown patch type", Method::PATCH, CM1).raw("application/bogus-patch+json", "{}").has(415, "UnsupportedMediaType", "application/merge-patch+json"),
        case("patch Accept XML", Method::PATCH, CM1)
            .patch(MERGE, &json!({"data": {"k": "v3"}}))
            .header("accept", "application/xml")
            .is(406, "NotAcceptable", NOT_ACCEPTABLE),
    ];
    out.extend(rows);
}

fn delete_cases(out: &mut Vec<Case>) {
    let sideways = options_invalid(
        "DeleteOptions",
        "propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
    );
    out.extend([
        case("delete propagationPolicy Sideways", Method::DELETE, CM1)
            .json(&json!({"propagationPolicy": "Sideways"}))
            .is(422, "Invalid", sideways.clone()),
        case("delete ?propagationPolicy=Sideways", Method::DELETE, format!("{CM1}?propagationPolicy=Sideways")).is(422, "Invalid", sideways.clone()),
        case("deletecollection propagationPolicy Sideways", Method::DELETE, CMS)
            .json(&json!({"propagationPolicy": "Sideways"}))
            .is(422, "Invalid", sideways),
        case("delete orphanDependents and propagationPolicy", Method::DELETE, CM1)
            .json(&json!({"propagationPolicy": "Background", "orphanDependents": true}))
            .is(422, "Invalid", options_invalid("DeleteOptions", "propagationPolicy: Invalid value: \"Background\": orphanDependents and deletionPropagation cannot be both set")),
        case("delete dryRun Bogus", Method::DELETE, CM1)
            .json(&json!({"dryRun": ["Bogus"]}))
            .is(422, "Invalid", options_invalid("DeleteOptions", BAD_DRY_RUN)),
        case("delete ?dryRun=Bogus", Method::DELETE, format!("{CM1}?dryRun=Bogus")).is(422, "Invalid", options_invalid("DeleteOptions", BAD_DRY_RUN)),
        case("delete uid precondition", Method::DELETE, CM1)
            .json(&json!({"preconditions": {"uid": "not-the-uid"}}))
            .has(409, "Conflict", "Precondition failed: UID in precondition: not-the-uid"),
        case("delete Accept XML", Method::DELETE, CM1).header("accept", "application/xml").is(406, "NotAcceptable", NOT_ACCEPTABLE),
    ]);
}

fn path_cases(out: &mut Vec<Case>) {
    let not_found = "the server could not find the requested resource";
    // Targets longer than `http::Uri` holds (kube-apiserver reads up to 1 MiB of them):
    // answered as short ones are.
    let long_name = "a".repeat(100 * 1024);
    let values: Vec<String> = (0..12_000).map(|i| format!("x{i}")).collect();
    let long_selector = format!("a in ({}),x>abc", values.join(","));
    let q: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("labelSelector", &long_selector)
        .finish();
    out.extend([
        case("GET a 100 KiB name", Method::GET, format!("{CMS}/{long_name}")).is(
            404,
            "NotFound",
            format!("configmaps \"{long_name}\" not found"),
        ),
        case("a 70 KiB labelSelector, malformed", Method::GET, format!("{CMS}?{q}")).is(
            400,
            "BadRequest",
            "unable to parse requirement: values[0]: Invalid value: \"abc\": for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        case("a 100 KiB path", Method::GET, format!("/api/v1/{long_name}")).is(404, "NotFound", not_found),
    ]);
    for path in [
        "/api/v1/namespaces/default/bogus",
        "/apis/bogus.example/v1/things",
        "/api/v2/pods",
        "/apis/apps/v9/deployments",
        "/api/v1/namespaces/default/nodes",
        "/apis/apps/v1/namespaces/default/bogus/x",
    ] {
        out.push(case(format!("GET {path}"), Method::GET, path).is(404, "NotFound", not_found));
        out.push(
            case(format!("POST {path}"), Method::POST, path)
                .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}))
                .is(404, "NotFound", not_found),
        );
    }
    let bogus_dry_run = |kind: &str| options_invalid(kind, BAD_DRY_RUN);
    out.extend([
        case("scale PUT ?dryRun=Bogus", Method::PUT, format!("{DEPLOY}/scale?dryRun=Bogus"))
            .json(&json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"}, "spec": {"replicas": 2}}))
            .is(422, "Invalid", bogus_dry_run("UpdateOptions")),
        case("scale PATCH ?dryRun=Bogus", Method::PATCH, format!("{DEPLOY}/scale?dryRun=Bogus"))
            .patch(MERGE, &json!({"spec": {"replicas": 2}}))
            .is(422, "Invalid", bogus_dry_run("PatchOptions")),
        case("binding ?dryRun=Bogus", Method::POST, "/api/v1/namespaces/default/pods/p/binding?dryRun=Bogus")
            .json(&json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n"}}))
            .is(422, "Invalid", bogus_dry_run("CreateOptions")),
        case("eviction ?dryRun=Bogus", Method::POST, "/api/v1/namespaces/default/pods/p/eviction?dryRun=Bogus")
            .json(&json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}}))
            .is(422, "Invalid", bogus_dry_run("CreateOptions")),
        case("finalize ?dryRun=Bogus", Method::PUT, "/api/v1/namespaces/default/finalize?dryRun=Bogus")
            .json(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}))
            .is(422, "Invalid", bogus_dry_run("UpdateOptions")),
        case("status patch renames", Method::PATCH, format!("{DEPLOY}/status"))
            .patch(MERGE, &json!({"metadata": {"name": "other"}}))
            .is(400, "BadRequest", renamed("web")),
        case("status PUT ?fieldValidation=Bogus", Method::PUT, format!("{DEPLOY}/status?fieldValidation=Bogus"))
            .json(&json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}))
            .is(422, "Invalid", options_invalid("UpdateOptions", BAD_FIELD_VALIDATION)),
        case("create in a missing namespace", Method::POST, "/api/v1/namespaces/nope/configmaps")
            .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}))
            .is(404, "NotFound", "namespaces \"nope\" not found"),
        case("create of an existing name", Method::POST, CMS)
            .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1"}}))
            .is(409, "AlreadyExists", "configmaps \"cm1\" already exists"),
        case("create of an existing deployment", Method::POST, "/apis/apps/v1/namespaces/default/deployments")
            .json(&json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}))
            .is(409, "AlreadyExists", "deployments.apps \"web\" already exists"),
    ]);
}

/// Every case of the table.
pub fn table() -> Vec<Case> {
    let mut cases = Vec::new();
    create_cases(&mut cases);
    query_cases(&mut cases);
    patch_cases(&mut cases);
    delete_cases(&mut cases);
    path_cases(&mut cases);
    cases
}
