//! `miniplane events`: kubectl events (`staging/src/k8s.io/kubectl/pkg/cmd/events/events.go`
//! and `event_printer.go`), and the event formatting `describe` shares with it.
//!
//! ```text
//!   LAST SEEN          TYPE     REASON              OBJECT             MESSAGE
//!   12s                Normal   ScalingReplicaSet   Deployment/web     Scaled up replica set web-5d4f to 3
//!   3s (x4 over 40s)   Warning  BackOff             Pod/web-5d4f-x2    Back-off restarting failed container
//! ```
//!
//! Events are printed oldest first (by last timestamp), unlike `get events`, whose rows come
//! in the server's order. `--for TYPE/NAME` keeps the events of one object, `--types` the
//! given types, `-w` keeps printing new ones.

use apimachinery::duration::since;
use apiserver::EventView;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, WatchParams};
use kube::core::WatchEvent;

use super::config_flags::{ConfigFlags, Session};
use super::error::{Error, KubeResultExt, Result};
use super::resource_args;
use super::tabwriter::TabWriter;
use super::watch::Watch;

/// Flags of `miniplane events`.
#[derive(Debug, clap::Args)]
pub struct EventsArgs {
    /// Events of all namespaces.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// Only the events of this object, e.g. deploy/web or pod/web-5d4f-x2.
    #[arg(long = "for", value_name = "TYPE/NAME")]
    for_object: Option<String>,
    /// Only events of these types (Normal, Warning), comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "TYPES")]
    types: Vec<String>,
    /// After listing, watch for new events.
    #[arg(short = 'w', long)]
    watch: bool,
    /// Leave out the table header.
    #[arg(long)]
    no_headers: bool,
    #[command(flatten)]
    config: ConfigFlags,
}

/// Runs `miniplane events`.
pub async fn run(args: EventsArgs) -> Result<()> {
    for t in &args.types {
        if t != "Normal" && t != "Warning" {
            return Err(Error::Usage(format!(
                "valid --types are Normal or Warning, not \"{t}\""
            )));
        }
    }
    let session = Session::connect(&args.config).await?;
    let field_selector = match &args.for_object {
        None => None,
        Some(arg) => {
            let (type_arg, name) = resource_args::parse_one(std::slice::from_ref(arg), "--for")?;
            let mapper = session.mapper().await?;
            let mapping = mapper.resource_for(&type_arg)?;
            Some(format!(
                "involvedObject.kind={},involvedObject.apiVersion={},involvedObject.name={name}",
                mapping.resource.kind, mapping.resource.api_version
            ))
        }
    };
    let api: Api<Event> = if args.all_namespaces {
        Api::all(session.client.clone())
    } else {
        Api::namespaced(session.client.clone(), &session.namespace)
    };
    let params = ListParams {
        field_selector: field_selector.clone(),
        ..ListParams::default()
    };
    let list = api.list(&params).await.at(&session.server)?;
    let mut events: Vec<Event> = list.items.into_iter().filter(|e| args.wanted(e)).collect();
    sort_events(&mut events);
    let mut writer = TabWriter::table();
    let mut header_due = !args.no_headers;
    if events.is_empty() {
        if args.all_namespaces {
            eprintln!("No events found.");
        } else {
            eprintln!("No events found in {} namespace.", session.namespace);
        }
    } else {
        super::print(&writer.format(&args.rows(&events, header_due, Timestamp::now())));
        header_due = false;
    }
    if !args.watch {
        return Ok(());
    }
    let watch_params = WatchParams {
        field_selector,
        bookmarks: true,
        ..WatchParams::default()
    };
    let mut watch = Watch::new(
        &session,
        api.resource_url(),
        watch_params,
        "application/json",
        list.metadata.resource_version.unwrap_or_default(),
    );
    loop {
        let (WatchEvent::Added(object) | WatchEvent::Modified(object)) = watch.next().await? else {
            continue;
        };
        let Ok(event) = serde_json::from_value::<Event>(object) else {
            continue;
        };
        if args.wanted(&event) {
            let rows = args.rows(std::slice::from_ref(&event), header_due, Timestamp::now());
            super::print(&writer.format(&rows));
            header_due = false;
        }
    }
}

impl EventsArgs {
    fn wanted(&self, e: &Event) -> bool {
        self.types.is_empty() || self.types.iter().any(|t| e.type_.as_deref() == Some(t))
    }

    /// kubectl events' header and rows, tab-separated.
    fn rows(&self, events: &[Event], header: bool, now: Timestamp) -> String {
        let mut out = String::new();
        if header {
            if self.all_namespaces {
                out.push_str("NAMESPACE\t");
            }
            out.push_str("LAST SEEN\tTYPE\tREASON\tOBJECT\tMESSAGE\n");
        }
        for e in events {
            let view = EventView::of_core(e);
            if self.all_namespaces {
                out.push_str(e.metadata.namespace.as_deref().unwrap_or_default());
                out.push('\t');
            }
            out.push_str(&format!(
                "{}\t{}\t{}\t{}/{}\t{}\n",
                interval(&view, now),
                view.type_,
                view.reason,
                view.regarding.kind.as_deref().unwrap_or_default(),
                view.regarding.name.as_deref().unwrap_or_default(),
                view.message.trim()
            ));
        }
        out
    }
}

/// kubectl's "when" of an event: `12s`, or `3s (x4 over 40s)` for a repeated one
/// (`getInterval` in event_printer.go, the Age of `describe`'s events).
pub fn interval(e: &EventView, now: Timestamp) -> String {
    let first = match e.event_time {
        Some(t) => since(Some(t), now),
        None => since(e.first_timestamp, now),
    };
    if let Some((count, last_observed)) = e.series {
        format!("{} (x{count} over {first})", since(last_observed, now))
    } else if e.count > 1 {
        format!(
            "{} (x{} over {first})",
            since(e.last_timestamp, now),
            e.count
        )
    } else {
        first
    }
}

/// Oldest first, by the time an event was last seen (`SortableEvents`).
pub fn sort_events(events: &mut [Event]) {
    events.sort_by_key(|e| {
        let view = EventView::of_core(e);
        match view.series {
            Some((_, Some(last_observed))) => Some(last_observed),
            _ => view.last_timestamp.or(view.event_time),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(name: &str, reason: &str, last: &str, count: i32) -> Event {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Deployment", "name": "web"},
            "type": "Normal", "reason": reason, "message": " Scaled up \n",
            "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": last, "count": count
        }))
        .unwrap()
    }

    #[test]
    fn rows_oldest_first_with_repeat_counts() {
        let now: Timestamp = "2024-01-01T00:01:00Z".parse().unwrap();
        let mut events = vec![
            event("b", "Later", "2024-01-01T00:00:50Z", 3),
            event("a", "Earlier", "2024-01-01T00:00:00Z", 1),
        ];
        sort_events(&mut events);
        let args = EventsArgs {
            all_namespaces: false,
            for_object: None,
            types: vec![],
            watch: false,
            no_headers: false,
            config: ConfigFlags::default(),
        };
        assert_eq!(
            TabWriter::table().format(&args.rows(&events, true, now)),
            "LAST SEEN           TYPE     REASON    OBJECT           MESSAGE\n\
             60s                 Normal   Earlier   Deployment/web   Scaled up\n\
             10s (x3 over 60s)   Normal   Later     Deployment/web   Scaled up\n"
        );
    }
}
