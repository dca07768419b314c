//! Tests of the label selectors: `labels.Parse`'s grammar and messages, matching, and
//! `LabelSelectorAsSelector`.

use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
use serde_json::json;

fn m(sel: &str, labels: &[(&str, &str)]) -> bool {
    Selector::parse(sel).expect("parses").matches(labels)
}

#[test]
fn equality_and_inequality() {
    assert!(m("app=nginx", &[("app", "nginx")]));
    assert!(m("app==nginx", &[("app", "nginx")]));
    assert!(!m("app=nginx", &[("app", "web")]));
    assert!(m("app!=nginx", &[("app", "web")]));
    assert!(m("app!=nginx", &[]));
    assert!(m("", &[]));
}

#[test]
fn set_based_requirements() {
    let l = [("env", "prod"), ("tier", "web")];
    assert!(m("env in (prod, staging)", &l));
    assert!(!m("env notin (prod,staging)", &l));
    assert!(m("tier,!canary", &l));
    assert!(!m("!tier", &l));
    assert!(m("env in (prod),tier=web", &l));
    assert!(!m("env in (dev),tier=web", &l));
}

#[test]
fn malformed_selectors_are_refused() {
    assert!(Selector::parse("app in prod").is_err());
    assert!(Selector::parse("a b=c").is_err());
    assert!(Selector::parse("x>abc").is_err());
}

#[test]
fn errors_are_worded_as_labels_parse() {
    let err = |s: &str| Selector::parse(s).expect_err(s).0;
    assert_eq!(err("a=b,"), "found '', expected: identifier after ','");
    assert_eq!(
        err(","),
        "found ',', expected: !, identifier, or 'end of string'"
    );
    assert_eq!(
        err("a b"),
        "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
    );
    assert_eq!(
        err(&format!("{}=b", "k".repeat(64))),
        format!(
            "unable to parse requirement: <nil>: Invalid value: \"{}\": name part must be no more than 63 characters",
            "k".repeat(64)
        )
    );
    assert_eq!(
        err("x<y"),
        "unable to parse requirement: values[0]: Invalid value: \"y\": for 'Gt', 'Lt' operators, the value must be an integer"
    );
    assert_eq!(
        err("a in (b c)"),
        "unable to parse requirement: found 'c', expected: ',' or ')'"
    );
}

#[test]
fn kubernetes_accepts_these_and_so_do_we() {
    // `selector_test.go`'s valid strings: `()` and empty members are the empty value.
    for ok in [
        "",
        "a in ()",
        "x in (a,,b)",
        "x=",
        "x==a",
        "!x",
        "x,y",
        "x in (in)",
        " a = b ",
    ] {
        assert!(Selector::parse(ok).is_ok(), "{ok}");
    }
    assert!(m("a in ()", &[("a", "")]));
    assert!(m("x in (a,,b)", &[("x", "")]));
    assert!(m("x>1", &[("x", "2")]));
    let s = Selector::parse("z=1,a=2").expect("parses");
    assert_eq!(s.to_string(), "a=2,z=1", "sorted by key");
}

#[test]
fn label_selector_objects_render_as_strings() {
    let sel: LabelSelector = serde_json::from_value(json!({
        "matchLabels": {"app": "nginx"},
        "matchExpressions": [{"key": "env", "operator": "In", "values": ["b", "a"]}]
    }))
    .expect("a LabelSelector");
    let s = Selector::from_label_selector(Some(&sel)).expect("well-formed");
    assert_eq!(s.to_string(), "app=nginx,env in (a,b)");
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn parses_and_matches_equality_and_set_based_terms() {
    let s = Selector::parse(
        "app=web, tier!=db, env in (prod, staging), release notin (canary), gpu, !legacy",
    )
    .unwrap();
    assert_eq!(s.requirements().len(), 6);
    assert!(s.matches(&labels(&[("app", "web"), ("env", "prod"), ("gpu", "")])));
    assert!(
        !s.matches(&labels(&[("app", "web"), ("env", "prod")])),
        "gpu missing"
    );
    assert!(
        !s.matches(&labels(&[("app", "web"), ("env", "dev"), ("gpu", "")])),
        "env not in set"
    );
    assert!(!s.matches(&labels(&[
        ("app", "web"),
        ("env", "prod"),
        ("gpu", ""),
        ("tier", "db")
    ])));
    assert!(!s.matches(&labels(&[
        ("app", "web"),
        ("env", "prod"),
        ("gpu", ""),
        ("legacy", "y")
    ])));
    assert!(!s.matches(&labels(&[
        ("app", "web"),
        ("env", "prod"),
        ("gpu", ""),
        ("release", "canary")
    ])));
    assert_eq!(
        s.to_string(),
        "app=web,env in (prod,staging),gpu,!legacy,release notin (canary),tier!=db",
        "printed sorted by key, as Selector.String does"
    );
    assert!(Selector::parse("env in prod").is_err());
    assert!(Selector::parse("").unwrap().is_everything());
}

#[test]
fn converts_label_selectors() {
    let selector = LabelSelector {
        match_labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "track".into(),
            operator: "NotIn".into(),
            values: Some(vec!["canary".into()]),
        }]),
    };
    let s = Selector::from_label_selector(Some(&selector)).unwrap();
    assert!(s.matches(&labels(&[("app", "web")])));
    assert!(s.matches(&labels(&[("app", "web"), ("track", "stable")])));
    assert!(!s.matches(&labels(&[("app", "web"), ("track", "canary")])));
    assert!(!s.matches(&labels(&[("app", "db")])));

    assert!(
        Selector::from_label_selector(Some(&LabelSelector::default()))
            .unwrap()
            .matches(&labels(&[]))
    );
    assert!(
        !Selector::from_label_selector(None)
            .unwrap()
            .matches(&labels(&[]))
    );
    let bad = LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "k".into(),
            operator: "In".into(),
            values: None,
        }]),
        ..Default::default()
    };
    assert!(
        Selector::from_label_selector(Some(&bad)).is_err(),
        "In needs values"
    );
}

fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
    }
}

#[test]
fn match_labels_and_every_expression_operator_are_anded() {
    let selector = LabelSelector {
        match_labels: Some(labels(&[("app", "nginx")])),
        match_expressions: Some(vec![
            expr("tier", "In", &["web", "api"]),
            expr("track", "NotIn", &["canary"]),
            expr("team", "Exists", &[]),
            expr("legacy", "DoesNotExist", &[]),
        ]),
    };
    let s = Selector::from_label_selector(Some(&selector)).unwrap();
    let cases: [(&[(&str, &str)], bool); 7] = [
        (&[("app", "nginx"), ("tier", "web"), ("team", "a")], true),
        (
            &[
                ("app", "nginx"),
                ("tier", "api"),
                ("team", "a"),
                ("track", "stable"),
            ],
            true,
        ),
        (&[("app", "nginx"), ("tier", "db"), ("team", "a")], false),
        (
            &[
                ("app", "nginx"),
                ("tier", "web"),
                ("team", "a"),
                ("track", "canary"),
            ],
            false,
        ),
        (&[("app", "nginx"), ("tier", "web")], false),
        (
            &[
                ("app", "nginx"),
                ("tier", "web"),
                ("team", "a"),
                ("legacy", "1"),
            ],
            false,
        ),
        (&[("app", "apache"), ("tier", "web"), ("team", "a")], false),
    ];
    for (pairs, want) in cases {
        assert_eq!(s.matches(&labels(pairs)), want, "{pairs:?}");
    }
}

#[test]
fn invalid_operators_and_values_are_refused_with_kubernetes_messages() {
    for (bad, message) in [
        (
            expr("a", "Like", &["x"]),
            "\"Like\" is not a valid label selector operator",
        ),
        (
            expr("a", "In", &[]),
            "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            expr("a", "Exists", &["x"]),
            "values: Invalid value: []string{\"x\"}: values set must be empty for exists and does not exist",
        ),
        (
            expr("", "Exists", &[]),
            "key: Invalid value: \"\": name part must be non-empty; name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
        (
            expr("a", "In", &["b c", "d"]),
            "values[0][a]: Invalid value: \"b c\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
        (
            expr("a b", "NotIn", &[]),
            "[key: Invalid value: \"a b\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty]",
        ),
    ] {
        let selector = LabelSelector {
            match_expressions: Some(vec![bad]),
            ..Default::default()
        };
        match Selector::from_label_selector(Some(&selector)) {
            Err(Error(m)) => assert_eq!(m, message),
            other => panic!("{selector:?}: {other:?}"),
        }
    }
}

#[test]
fn greater_and_less_than_compare_integers() {
    let s = Selector::parse("rank>3,size<10").unwrap();
    assert!(s.matches(&[("rank", "4"), ("size", "9")]));
    assert!(!s.matches(&[("rank", "3"), ("size", "9")]));
    assert!(
        !s.matches(&[("rank", "x"), ("size", "9")]),
        "not an integer"
    );
    assert!(!s.matches(&[("size", "9")]), "label missing");
    assert_eq!(s.to_string(), "rank>3,size<10");
    assert_eq!(
        Requirement::new(
            "rank",
            Operator::GreaterThan,
            ["1".to_owned(), "2".to_owned()]
        )
        .unwrap_err()
        .0,
        "values: Invalid value: []string{\"1\", \"2\"}: for 'Gt', 'Lt' operators, exactly one value is required"
    );
}

#[test]
fn double_equals_prints_as_written_and_matches_as_equals() {
    let s = Selector::parse("a==b").unwrap();
    assert_eq!(s.requirements()[0].operator, Operator::DoubleEquals);
    assert_eq!(s.to_string(), "a==b");
    assert!(s.matches(&[("a", "b")]));
}

#[test]
fn formatting_label_selectors_and_labels() {
    let sel = LabelSelector {
        match_labels: Some(labels(&[("app", "nginx")])),
        match_expressions: Some(vec![
            expr("tier", "In", &["web", "api"]),
            expr("canary", "DoesNotExist", &[]),
        ]),
    };
    assert_eq!(
        format_label_selector(Some(&sel)),
        "app=nginx,!canary,tier in (api,web)"
    );
    assert_eq!(format_label_selector(None), "<none>");
    assert_eq!(
        format_label_selector(Some(&LabelSelector::default())),
        "<none>"
    );
    let bad = LabelSelector {
        match_expressions: Some(vec![expr("a", "Equals", &["x"])]),
        ..Default::default()
    };
    assert_eq!(format_label_selector(Some(&bad)), "<error>");
    assert_eq!(
        format_labels(Some(&labels(&[("b", "2"), ("a", "1")]))),
        "a=1,b=2"
    );
    assert_eq!(format_labels(None), "<none>");
    assert!(is_superset(
        &labels(&[("a", "1"), ("b", "2")]),
        &labels(&[("a", "1")])
    ));
    assert!(!is_superset(&labels(&[("a", "2")]), &labels(&[("a", "1")])));
}

#[test]
fn label_selector_objects_match_labels_that_may_be_missing() {
    let sel = LabelSelector {
        match_labels: Some(labels(&[("app", "nginx")])),
        match_expressions: Some(vec![
            expr("tier", "In", &["web", "api"]),
            expr("canary", "DoesNotExist", &[]),
        ]),
    };
    let s = Selector::from_label_selector(Some(&sel)).unwrap();
    let pod = labels(&[("app", "nginx"), ("tier", "web")]);
    assert!(s.matches(&Some(&pod)));
    let mut canary = pod.clone();
    canary.insert("canary".into(), "1".into());
    assert!(!s.matches(&Some(&canary)));
    assert!(!s.matches(&None::<&BTreeMap<String, String>>));
    assert!(Selector::everything().matches(&None::<&BTreeMap<String, String>>));
}
