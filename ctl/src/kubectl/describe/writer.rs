//! kubectl describe's `PrefixWriter` and the small formatters every describer uses
//! (`staging/src/k8s.io/kubectl/pkg/describe/describe.go`: `NewPrefixWriter`,
//! `printLabelsMultiline`, `printAnnotationsMultiline`, `DescribeEvents`).
//!
//! Lines are written with a nesting level (two spaces each) and tab-separated cells; the text
//! is aligned by the describe tab writer in blocks, exactly as kubectl's, so `Name:` values
//! line up with `Selector:` values but a nested `Labels:` lines up with its own neighbours.

use std::collections::BTreeMap;

use apiserver::EventView;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::super::events::{interval, sort_events};
use super::super::tabwriter::TabWriter;

/// Accumulates describe output; [`PrefixWriter::flush`] aligns what was written so far.
#[derive(Debug, Default)]
pub struct PrefixWriter {
    pending: String,
    done: String,
}

impl PrefixWriter {
    /// A new, empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes `text` (cells separated by `\t`, ending in `\n` when a line ends) at `level`.
    pub fn write(&mut self, level: usize, text: &str) {
        for _ in 0..level {
            self.pending.push_str("  ");
        }
        self.pending.push_str(text);
    }

    /// Writes the line `key:\tvalue` at `level`.
    pub fn field(&mut self, level: usize, key: &str, value: impl std::fmt::Display) {
        self.write(level, &format!("{key}:\t{value}\n"));
    }

    /// Aligns the pending text on its own (Go's `Flush`): what follows starts new blocks.
    pub fn flush(&mut self) {
        let text = std::mem::take(&mut self.pending);
        self.done.push_str(&TabWriter::describe().format(&text));
    }

    /// The aligned output.
    pub fn finish(mut self) -> String {
        self.flush();
        self.done
    }
}

/// The `Name:` and `Namespace:` lines every describer starts with.
pub fn name_and_namespace(w: &mut PrefixWriter, meta: &ObjectMeta) {
    w.field(0, "Name", meta.name.as_deref().unwrap_or_default());
    w.field(
        0,
        "Namespace",
        meta.namespace.as_deref().unwrap_or_default(),
    );
}

/// Annotations describe never shows (`skipAnnotations`).
const SKIP_ANNOTATIONS: [&str; 1] = ["kubectl.kubernetes.io/last-applied-configuration"];

/// Longest annotation shown on one line (`maxAnnotationLen`).
const MAX_ANNOTATION_LEN: usize = 140;

/// `Labels:  a=b` then one `k=v` per line, or `<none>` (`printLabelsMultiline`). A nested
/// title carries its indentation (`"  Labels"`); the continuation lines do not, as in kubectl.
pub fn labels(w: &mut PrefixWriter, title: &str, labels: Option<&BTreeMap<String, String>>) {
    w.write(0, &format!("{title}:\t"));
    let Some(labels) = labels.filter(|l| !l.is_empty()) else {
        w.write(0, "<none>\n");
        return;
    };
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            w.write(0, "\t");
        }
        w.write(0, &format!("{k}={v}\n"));
    }
}

/// `Annotations:  k: v` one per line, long or multi-line values wrapped below their key,
/// or `<none>` (`printAnnotationsMultiline`).
pub fn annotations(
    w: &mut PrefixWriter,
    title: &str,
    annotations: Option<&BTreeMap<String, String>>,
) {
    w.write(0, &format!("{title}:\t"));
    let shown: Vec<(&String, &String)> = annotations
        .into_iter()
        .flatten()
        .filter(|(k, _)| !SKIP_ANNOTATIONS.contains(&k.as_str()))
        .collect();
    if shown.is_empty() {
        w.write(0, "<none>\n");
        return;
    }
    for (i, (k, v)) in shown.into_iter().enumerate() {
        if i > 0 {
            w.write(0, "\t");
        }
        let value = v.trim_end_matches('\n');
        if value.len() + k.len() + 2 > MAX_ANNOTATION_LEN || value.contains('\n') {
            w.write(0, &format!("{k}:\n"));
            for line in value.split('\n') {
                w.write(
                    0,
                    &format!("\t  {}\n", shorten(line, MAX_ANNOTATION_LEN - 2)),
                );
            }
        } else {
            w.write(0, &format!("{k}: {value}\n"));
        }
    }
}

/// `s` cut to `max` characters with `...` (`shorten`).
fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let cut: String = s.chars().take(max.saturating_sub(3)).collect();
        format!("{cut}...")
    }
}

/// A timestamp as kubectl describe prints it: RFC 1123 with numeric zone, in local time
/// (`Mon, 02 Jan 2006 15:04:05 -0700`).
pub fn time(ts: Option<Timestamp>) -> String {
    match ts {
        Some(ts) => ts
            .to_zoned(jiff::tz::TimeZone::system())
            .strftime("%a, %d %b %Y %H:%M:%S %z")
            .to_string(),
        None => "<unset>".to_owned(),
    }
}

/// The `Events:` section, oldest first (`DescribeEvents`).
pub fn events(w: &mut PrefixWriter, events: &[Event], now: Timestamp) {
    if events.is_empty() {
        w.write(0, "Events:\t<none>\n");
        return;
    }
    w.flush();
    let mut events = events.to_vec();
    sort_events(&mut events);
    w.write(0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n");
    w.write(1, "----\t------\t----\t----\t-------\n");
    for e in &events {
        let view = EventView::of_core(e);
        let from = e
            .source
            .as_ref()
            .and_then(|s| s.component.clone())
            .filter(|c| !c.is_empty())
            .or_else(|| e.reporting_component.clone())
            .unwrap_or_default();
        w.write(
            1,
            &format!(
                "{}\t{}\t{}\t{from}\t{}\n",
                view.type_,
                view.reason,
                interval(&view, now),
                view.message.trim()
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_annotations_align_in_one_block() {
        let mut w = PrefixWriter::new();
        w.write(0, "Name:\tweb\n");
        let l: BTreeMap<String, String> =
            [("app".into(), "web".into()), ("tier".into(), "fe".into())].into();
        labels(&mut w, "Labels", Some(&l));
        let a: BTreeMap<String, String> = [
            (
                "kubectl.kubernetes.io/last-applied-configuration".into(),
                "{}".into(),
            ),
            ("note".into(), "line1\nline2".into()),
        ]
        .into();
        annotations(&mut w, "Annotations", Some(&a));
        annotations(&mut w, "Empty", None);
        assert_eq!(
            w.finish(),
            "Name:         web\n\
             Labels:       app=web\n              \
             tier=fe\n\
             Annotations:  note:\n                \
             line1\n                \
             line2\n\
             Empty:        <none>\n"
        );
    }

    #[test]
    fn times_are_rfc1123z() {
        let ts: Timestamp = "2024-03-04T05:06:07Z".parse().unwrap();
        let shown = time(Some(ts));
        assert!(shown.starts_with("Mon, 04 Mar 2024"), "{shown}");
        assert_eq!(time(None), "<unset>");
    }

    #[test]
    fn events_section() {
        let e: Event = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "e"}, "involvedObject": {},
            "type": "Normal", "reason": "ScalingReplicaSet",
            "message": "Scaled up replica set web-1 to 3",
            "source": {"component": "deployment-controller"},
            "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:00:00Z",
            "count": 1
        }))
        .unwrap();
        let now: Timestamp = "2024-01-01T00:00:05Z".parse().unwrap();
        let mut w = PrefixWriter::new();
        w.write(0, "Name:\tweb\n");
        events(&mut w, &[e], now);
        assert_eq!(
            w.finish(),
            "Name:  web\n\
             Events:\n  \
             Type    Reason             Age   From                   Message\n  \
             ----    ------             ----  ----                   -------\n  \
             Normal  ScalingReplicaSet  5s    deployment-controller  Scaled up replica set web-1 to 3\n"
        );
        let mut w = PrefixWriter::new();
        w.write(0, "Name:\tweb\n");
        events(&mut w, &[], now);
        assert_eq!(w.finish(), "Name:    web\nEvents:  <none>\n");
    }
}
