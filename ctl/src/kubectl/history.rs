//! `miniplane history TYPE/NAME`: every kept version of one object, who wrote each and what
//! it changed. No kubectl counterpart (`kubectl rollout history` lists a Deployment's
//! ReplicaSets, not the object's own versions); it reads the admin API's
//! `GET /miniplane/v1/history/<API path>` ([`admin::ObjectHistory`]).
//!
//! ```text
//! $ miniplane history deploy/web
//! deployment.apps/web in default: 3 versions kept, store at revision 912
//! REVISION   CHANGE    WRITER                                   USER                             COMPONENT                 TRACE
//! 804        created   kubectl-client-side-apply (Update)       kubernetes-admin                 kubectl                   4bf92f35…/00f067aa…
//! 831        updated   kube-controller-manager (Update status)  system:kube-controller-manager   kube-controller-manager   4bf92f35…/b7ad6b71…
//!              status.replicas: 0 → 3
//! ```
//!
//! `--at REV` prints the object as it was at revision REV, `--field PATH` follows one field
//! through the versions, `-o yaml|json` prints the whole history.

use admin::history::{self, AtError, ObjectHistory, Segment};
use serde_json::Value;

use super::config_flags::{ConfigFlags, Session};
use super::error::{Error, KubeResultExt, Result};
use super::printers;
use super::resource_args;
use super::restmapper::Mapping;
use super::tabwriter::TabWriter;

/// How long a value may print in a diff line before it is cut.
const VALUE_WIDTH: usize = 60;

/// Flags of `miniplane history`.
#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    /// TYPE NAME or TYPE/NAME, e.g. deploy/web (deleted objects too, while their versions are
    /// kept).
    #[arg(value_name = "TYPE[/NAME]", required = true)]
    args: Vec<String>,
    /// Print the object as it was at this revision (a resourceVersion).
    #[arg(long, value_name = "REV")]
    at: Option<u64>,
    /// Follow one field through the versions, e.g. spec.replicas,
    /// spec.template.spec.containers[0].image, metadata.labels[app.kubernetes.io/name].
    #[arg(long, value_name = "PATH", conflicts_with = "at")]
    field: Option<String>,
    /// Output format: the whole history (or with --at the object) as YAML or JSON.
    #[arg(short = 'o', long, value_name = "FORMAT")]
    output: Option<HistoryFormat>,
    #[command(flatten)]
    config: ConfigFlags,
}

/// `-o` values of `miniplane history` (it has no table or name form).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum HistoryFormat {
    /// As YAML.
    Yaml,
    /// As JSON.
    Json,
}

/// The admin API path of the history of `name` (`history/apis/apps/v1/namespaces/default/
/// deployments/web`).
fn history_path(mapping: &Mapping, namespace: &str, name: &str) -> String {
    let r = &mapping.resource;
    let mut path = if r.group.is_empty() {
        format!("{}/history/api/{}", admin::PREFIX, r.version)
    } else {
        format!("{}/history/apis/{}/{}", admin::PREFIX, r.group, r.version)
    };
    if mapping.namespaced {
        path.push_str(&format!("/namespaces/{namespace}"));
    }
    path.push_str(&format!("/{}/{name}", r.plural));
    path
}

/// Runs `miniplane history`.
pub async fn run(args: HistoryArgs) -> Result<()> {
    let field = args
        .field
        .as_deref()
        .map(history::parse_path)
        .transpose()
        .map_err(Error::Usage)?;
    let (type_arg, name) = resource_args::parse_one(&args.args, "history")?;
    let session = Session::connect(&args.config).await?;
    let mapper = session.mapper().await?;
    let mapping = mapper.resource_for(&type_arg)?;
    let request = http::Request::get(history_path(mapping, &session.namespace, &name))
        .body(Vec::new())
        .map_err(|e| Error::Other(e.to_string()))?;
    let text = session
        .client
        .request_text(request)
        .await
        .at(&session.server)?;
    let found: ObjectHistory = serde_json::from_str(&text)
        .map_err(|e| Error::Other(format!("the server's history is not readable: {e}")))?;
    let object_name = mapping.object_name(&name);
    if let Some(rev) = args.at {
        let object = found.at(rev).map_err(|e| match e {
            AtError::Absent => {
                Error::Other(format!("{object_name} did not exist at revision {rev}"))
            }
            other => Error::Other(format!("revision {rev} {other}")),
        })?;
        let object = printers::without_managed_fields(object.clone());
        super::print(&match args.output {
            Some(HistoryFormat::Json) => printers::to_json(&object),
            _ => printers::to_yaml(&object),
        });
        return Ok(());
    }
    let text = match (args.output, field) {
        (Some(HistoryFormat::Json), _) => {
            printers::to_json(&serde_json::to_value(&found).unwrap_or_default())
        }
        (Some(_), _) => printers::to_yaml(&serde_json::to_value(&found).unwrap_or_default()),
        (None, Some(path)) => field_table(&found, &object_name, &path),
        (None, None) => table(&found, &object_name),
    };
    super::print(&text);
    Ok(())
}

/// The heading line: the object, how many versions are kept, where history was cut.
fn heading(h: &ObjectHistory, object_name: &str) -> String {
    let place = h
        .namespace
        .as_deref()
        .map(|ns| format!(" in {ns}"))
        .unwrap_or_default();
    let versions = h.revisions.len();
    let plural = if versions == 1 { "" } else { "s" };
    let mut line = format!(
        "{object_name}{place}: {versions} version{plural} kept, store at revision {}",
        h.current_revision
    );
    if h.cut() {
        line.push_str(&format!(
            "; older changes were compacted (the store keeps revisions from {} on)",
            h.compacted_revision
        ));
    }
    line.push('\n');
    line
}

/// `manager (Operation subresource)`; `<owned fields>` when the change left every
/// managedFields entry as it was: its manager changed only fields it owned already, and
/// Kubernetes moves an entry's time only when its set of fields changes
/// (`managedfields/internal/managedfieldsupdater.go`). USER and COMPONENT still say who.
fn writer(e: &history::HistoryEntry) -> String {
    let Some(manager) = &e.writer.manager else {
        // The oldest kept version has no version before it to compare with.
        return if e.before_compaction {
            "<unknown>".into()
        } else {
            "<owned fields>".into()
        };
    };
    let detail: Vec<&str> = [
        e.writer.operation.as_deref(),
        e.writer.subresource.as_deref(),
    ]
    .into_iter()
    .flatten()
    .collect();
    if detail.is_empty() {
        manager.clone()
    } else {
        format!("{manager} ({})", detail.join(" "))
    }
}

/// `trace/span`, each shortened to its first 8 hex digits.
fn trace(e: &history::HistoryEntry) -> String {
    let Some(tp) = &e.writer.traceparent else {
        return "<none>".into();
    };
    let parts: Vec<&str> = tp.split('-').collect();
    match parts.as_slice() {
        [_, trace, span, _] => format!("{}…/{}…", short(trace), short(span)),
        _ => tp.clone(),
    }
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

/// A value as one line of JSON, cut at [`VALUE_WIDTH`] characters.
fn one_line(v: Option<&Value>) -> String {
    let Some(v) = v else {
        return "<none>".into();
    };
    let text = v.to_string();
    if text.chars().count() <= VALUE_WIDTH {
        return text;
    }
    let cut: String = text.chars().take(VALUE_WIDTH - 1).collect();
    format!("{cut}…")
}

/// The versions as a table, each followed by the fields its change touched.
fn table(h: &ObjectHistory, object_name: &str) -> String {
    let mut out = heading(h, object_name);
    let mut rows = String::from("REVISION\tCHANGE\tWRITER\tUSER\tCOMPONENT\tTRACE\n");
    let mut diffs: Vec<Vec<String>> = Vec::new();
    for e in &h.revisions {
        let change = if e.before_compaction {
            format!("{} (before the cut)", e.change.as_str())
        } else {
            e.change.as_str().to_owned()
        };
        rows.push_str(&format!(
            "{}\t{change}\t{}\t{}\t{}\t{}\n",
            e.revision,
            if e.change == admin::ChangeType::Deleted {
                "<not recorded>".to_owned()
            } else {
                writer(e)
            },
            e.writer.user.as_deref().unwrap_or("<unknown>"),
            e.writer.component.as_deref().unwrap_or("<unknown>"),
            trace(e)
        ));
        diffs.push(
            e.diff
                .iter()
                .map(|c| {
                    format!(
                        "             {}: {} → {}\n",
                        c.path,
                        one_line(c.old.as_ref()),
                        one_line(c.new.as_ref())
                    )
                })
                .collect(),
        );
    }
    // Align the rows as one table, then put each version's diff lines under its row.
    let aligned = TabWriter::table().format(&rows);
    let mut lines = aligned.lines();
    if let Some(header) = lines.next() {
        out.push_str(header);
        out.push('\n');
    }
    for (line, diff) in lines.zip(diffs) {
        out.push_str(line);
        out.push('\n');
        for d in diff {
            out.push_str(&d);
        }
    }
    out
}

/// One field through the versions: a row per version where its value changed.
fn field_table(h: &ObjectHistory, object_name: &str, path: &[Segment]) -> String {
    let mut out = heading(h, object_name);
    let mut rows = format!("REVISION\t{}\tWRITER\n", history::render(path));
    let mut last: Option<Option<Value>> = None;
    for e in &h.revisions {
        let value = e
            .object
            .as_ref()
            .and_then(|o| history::lookup(o, path))
            .cloned();
        if last.as_ref() == Some(&value) {
            continue;
        }
        let shown = match (&e.object, &value) {
            (None, _) => "<deleted>".to_owned(),
            (Some(_), v) => one_line(v.as_ref()),
        };
        rows.push_str(&format!("{}\t{shown}\t{}\n", e.revision, writer(e)));
        last = Some(value);
    }
    out.push_str(&TabWriter::table().format(&rows));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use admin::{ChangeType, FieldChange, HistoryEntry};
    use serde_json::json;

    fn entry(revision: u64, change: ChangeType, object: Option<Value>) -> HistoryEntry {
        HistoryEntry {
            change,
            object,
            writer: admin::history::Writer {
                manager: Some("kube-controller-manager".into()),
                operation: Some("Update".into()),
                subresource: Some("status".into()),
                component: Some("kube-controller-manager".into()),
                user: Some("system:kube-controller-manager".into()),
                traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
            },
            ..HistoryEntry::deleted(revision)
        }
    }

    fn sample() -> ObjectHistory {
        let mut updated = entry(
            20,
            ChangeType::Updated,
            Some(json!({"spec": {"replicas": 3}})),
        );
        updated.diff = vec![FieldChange {
            path: "spec.replicas".into(),
            old: Some(json!(1)),
            new: Some(json!(3)),
        }];
        let mut first = entry(
            10,
            ChangeType::Created,
            Some(json!({"spec": {"replicas": 1}})),
        );
        first.before_compaction = true;
        ObjectHistory {
            resource: "deployments.apps".into(),
            namespace: Some("default".into()),
            name: "web".into(),
            compacted_revision: 15,
            current_revision: 40,
            revisions: vec![
                first,
                updated,
                entry(
                    25,
                    ChangeType::Updated,
                    Some(json!({"spec": {"replicas": 3}, "status": {}})),
                ),
                entry(30, ChangeType::Deleted, None),
            ],
        }
    }

    #[test]
    fn the_table_lists_versions_with_their_diffs_and_says_where_history_was_cut() {
        let text = table(&sample(), "deployment.apps/web");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "deployment.apps/web in default: 4 versions kept, store at revision 40; older \
             changes were compacted (the store keeps revisions from 15 on)"
        );
        assert!(lines[1].starts_with("REVISION"), "{text}");
        assert!(lines[2].starts_with("10 ") && lines[2].contains("created (before the cut)"));
        assert!(
            lines[3].contains("kube-controller-manager (Update status)"),
            "{text}"
        );
        assert!(lines[3].contains("4bf92f35…/00f067aa…"), "{text}");
        assert_eq!(lines[4].trim(), "spec.replicas: 1 → 3");
        assert!(lines[6].contains("deleted") && lines[6].contains("<not recorded>"));
    }

    #[test]
    fn a_field_is_shown_where_it_changed() {
        let path = history::parse_path("spec.replicas").unwrap();
        let text = field_table(&sample(), "deployment.apps/web", &path);
        let rows: Vec<Vec<&str>> = text
            .lines()
            .skip(2)
            .map(|l| l.split_whitespace().take(2).collect())
            .collect();
        assert_eq!(
            rows,
            vec![vec!["10", "1"], vec!["20", "3"], vec!["30", "<deleted>"]]
        );
    }

    #[test]
    fn long_values_are_cut() {
        let long = json!("x".repeat(200));
        let shown = one_line(Some(&long));
        assert_eq!(shown.chars().count(), VALUE_WIDTH);
        assert!(shown.ends_with('…'));
        assert_eq!(one_line(None), "<none>");
    }
}
