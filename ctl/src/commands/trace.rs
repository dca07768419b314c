//! `miniplane trace`: show what a write set in motion, as one causal, timed tree.
//!
//! No kubectl counterpart (kubectl talks to the API server only; Jaeger would show
//! kube-apiserver's own spans, one request at a time). It reads the API server's trace
//! collector (`/miniplane/v1/traces`, the API server's trace collector):
//!
//! ```text
//!   miniplane trace deploy/web            the trace on the object's miniplane.dev/traceparent
//!                                         annotation: the one that last changed it
//!   miniplane trace deploy/web --last     the latest trace with a request on the object
//!   miniplane trace --last                the latest trace of more than one span
//!   miniplane trace --id 4bf9…4736        one trace by id
//!   miniplane trace deploy/web --follow   wait for the next trace touching it, show it as it grows
//!   miniplane trace list [--all]          recent traces: root, spans, duration
//!   --output tree | waterfall | chrome | otlp | json
//!   --no-fold (--all)                     every span: the tree and waterfall fold retries
//! ```
//!
//! The views and exports are the `trace` crate's (`trace::render`, `trace::chrome`,
//! `trace::otlp`); this file only fetches and picks.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;
use trace::render::{TreeOptions, format_duration};
use trace::{
    COLLECTOR_PATH, ObjectRef, Span, SpanContext, TRACEPARENT_ANNOTATION, TraceId, TraceSummary,
};

/// Flags of `miniplane trace`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct TraceArgs {
    #[command(subcommand)]
    command: Option<TraceCommand>,
    /// The object whose trace to show: `deploy/web`, `pod/web-abc12`, `node/node-1`,
    /// `deployments.apps/web` (short names and kinds as kubectl's).
    object: Option<String>,
    /// Namespace of the object.
    #[arg(short, long, default_value = "default")]
    namespace: String,
    /// The latest trace (with a request on the object, if one is named).
    #[arg(long, conflicts_with = "id")]
    last: bool,
    /// One trace by id (32 hex digits).
    #[arg(long, value_name = "TRACE_ID")]
    id: Option<String>,
    /// Keep reading while the trace grows: with an object, wait for its next trace first.
    /// Stops after --quiet of no new spans (or Ctrl-C).
    #[arg(long, short = 'f')]
    follow: bool,
    /// How long --follow waits without new spans before it stops.
    #[arg(long, value_parser = apimachinery::duration::parse_duration, default_value = "3s")]
    quiet: Duration,
    /// What to print.
    #[arg(long, short, value_enum, default_value_t = Output::Tree)]
    output: Output,
    /// Width of the waterfall's time axis, in columns.
    #[arg(long, default_value_t = 60)]
    width: usize,
    /// Show every span: runs of retries (a status update answered 409 Conflict, then
    /// retried) are folded into one line by default.
    #[arg(long, visible_alias = "all")]
    no_fold: bool,
    #[command(flatten)]
    cluster: Cluster,
}

#[derive(Debug, clap::Subcommand)]
enum TraceCommand {
    /// Recent traces, most recently active first.
    List(ListArgs),
}

#[derive(Debug, clap::Args)]
struct ListArgs {
    /// Include one-request traces (node status heartbeats, writes nothing reacted to).
    #[arg(long)]
    all: bool,
    /// How many traces.
    #[arg(long, default_value_t = 20)]
    limit: usize,
    #[command(flatten)]
    cluster: Cluster,
}

/// Where the API server is.
#[derive(Debug, clap::Args)]
struct Cluster {
    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE", global = true)]
    kubeconfig: Option<PathBuf>,
    /// The API server's URL (overrides the kubeconfig).
    #[arg(long, value_name = "URL", global = true)]
    master: Option<String>,
}

/// What `miniplane trace` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// The causal tree with offsets, durations, components and what and why.
    Tree,
    /// Bars on a shared time axis.
    Waterfall,
    /// Chrome/Perfetto trace-event JSON (open in ui.perfetto.dev).
    Chrome,
    /// OTLP JSON (Jaeger, Tempo, the OpenTelemetry Collector).
    Otlp,
    /// The spans as the collector keeps them.
    Json,
}

/// Runs `miniplane trace`.
pub fn main(args: TraceArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        match args.command {
            Some(TraceCommand::List(list)) => {
                let api = Api::connect(&list.cluster).await?;
                print!(
                    "{}",
                    render_list(&api.list(list.limit, list.all, None).await?)
                );
                Ok(())
            }
            None => show(args).await,
        }
    })
}

/// The collector, through the API server.
struct Api {
    client: kube::Client,
}

impl Api {
    async fn connect(cluster: &Cluster) -> anyhow::Result<Api> {
        let source = match (&cluster.master, &cluster.kubeconfig) {
            (Some(url), _) => client::ClusterSource::Url(url.clone()),
            (None, Some(path)) => client::ClusterSource::Kubeconfig(path.clone()),
            (None, None) => client::ClusterSource::Infer,
        };
        let client = client::build_client(&client::ClientConfig::new(source))
            .await
            .context("connecting to the API server")?;
        Ok(Api { client })
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let request = http::Request::get(path).body(Vec::new())?;
        let text = self
            .client
            .request_text(request)
            .await
            .with_context(|| format!("GET {path}"))?;
        Ok(serde_json::from_str(&text)?)
    }

    async fn list(
        &self,
        limit: usize,
        all: bool,
        object: Option<&ObjectRef>,
    ) -> anyhow::Result<Vec<TraceSummary>> {
        let min_spans = if all { 1 } else { 2 };
        let mut path = format!("{COLLECTOR_PATH}?limit={limit}&minSpans={min_spans}");
        if let Some(o) = object {
            path.push_str(&format!("&object={o}"));
        }
        let body = self.get(&path).await?;
        Ok(serde_json::from_value(body["traces"].clone())?)
    }

    /// The spans of trace `id`, and whether it was cut at the collector's span budget.
    async fn trace(&self, id: TraceId) -> anyhow::Result<(Vec<Span>, bool)> {
        let body = self.get(&format!("{COLLECTOR_PATH}/{id}")).await?;
        let cut = body["cut"].as_bool().unwrap_or(false);
        Ok((serde_json::from_value(body["spans"].clone())?, cut))
    }

    /// The trace context on the object's annotation, if the object exists and has one.
    async fn annotated(&self, object: &Resolved) -> Option<SpanContext> {
        let path = object.path.as_ref()?;
        let body = self.get(path).await.ok()?;
        let value = body["metadata"]["annotations"][TRACEPARENT_ANNOTATION].as_str()?;
        SpanContext::parse(value).ok()
    }
}

/// An object named on the command line.
struct Resolved {
    object: ObjectRef,
    /// Its URL, when the resource is a well-known one.
    path: Option<String>,
}

/// kubectl's short names and kinds of the built-in resources: `(names, plural, API prefix,
/// namespaced)`.
const RESOURCES: &[(&[&str], &str, &str, bool)] = &[
    (
        &["deploy", "deployment"],
        "deployments",
        "/apis/apps/v1",
        true,
    ),
    (&["rs", "replicaset"], "replicasets", "/apis/apps/v1", true),
    (&["ds", "daemonset"], "daemonsets", "/apis/apps/v1", true),
    (
        &["sts", "statefulset"],
        "statefulsets",
        "/apis/apps/v1",
        true,
    ),
    (&["po", "pod"], "pods", "/api/v1", true),
    (&["svc", "service"], "services", "/api/v1", true),
    (&["cm", "configmap"], "configmaps", "/api/v1", true),
    (&["secret"], "secrets", "/api/v1", true),
    (
        &["sa", "serviceaccount"],
        "serviceaccounts",
        "/api/v1",
        true,
    ),
    (&["ep", "endpoint"], "endpoints", "/api/v1", true),
    (&["ev", "event"], "events", "/api/v1", true),
    (&["job"], "jobs", "/apis/batch/v1", true),
    (&["cj", "cronjob"], "cronjobs", "/apis/batch/v1", true),
    (
        &["rc", "replicationcontroller"],
        "replicationcontrollers",
        "/api/v1",
        true,
    ),
    (
        &["pdb", "poddisruptionbudget"],
        "poddisruptionbudgets",
        "/apis/policy/v1",
        true,
    ),
    (
        &["hpa", "horizontalpodautoscaler"],
        "horizontalpodautoscalers",
        "/apis/autoscaling/v2",
        true,
    ),
    (&["lease"], "leases", "/apis/coordination.k8s.io/v1", true),
    (
        &["endpointslice"],
        "endpointslices",
        "/apis/discovery.k8s.io/v1",
        true,
    ),
    (
        &["pvc", "persistentvolumeclaim"],
        "persistentvolumeclaims",
        "/api/v1",
        true,
    ),
    (
        &["pv", "persistentvolume"],
        "persistentvolumes",
        "/api/v1",
        false,
    ),
    (
        &["sc", "storageclass"],
        "storageclasses",
        "/apis/storage.k8s.io/v1",
        false,
    ),
    (
        &["pc", "priorityclass"],
        "priorityclasses",
        "/apis/scheduling.k8s.io/v1",
        false,
    ),
    (&["no", "node"], "nodes", "/api/v1", false),
    (&["ns", "namespace"], "namespaces", "/api/v1", false),
];

/// Resolves `kind/name` (kubectl style) in `namespace`.
fn resolve(arg: &str, namespace: &str) -> anyhow::Result<Resolved> {
    let Some((kind, name)) = arg.split_once('/') else {
        bail!("name the object as kind/name, e.g. deploy/web (got {arg:?})");
    };
    if name.is_empty() || name.contains('/') {
        bail!("name the object as kind/name, e.g. deploy/web (got {arg:?})");
    }
    let kind = kind.to_lowercase();
    let base = kind.split('.').next().unwrap_or_default();
    let known = RESOURCES
        .iter()
        .find(|(names, plural, _, _)| *plural == base || names.contains(&base));
    Ok(match known {
        Some((_, plural, prefix, namespaced)) => {
            let ns = namespaced.then(|| namespace.to_owned());
            let path = match &ns {
                Some(ns) => format!("{prefix}/namespaces/{ns}/{plural}/{name}"),
                None => format!("{prefix}/{plural}/{name}"),
            };
            Resolved {
                object: ObjectRef {
                    resource: (*plural).to_owned(),
                    namespace: ns,
                    name: name.to_owned(),
                },
                path: Some(path),
            }
        }
        // Another resource (a CRD): found through the collector's index only.
        None => Resolved {
            object: ObjectRef {
                resource: base.to_owned(),
                namespace: Some(namespace.to_owned()),
                name: name.to_owned(),
            },
            path: None,
        },
    })
}

async fn show(args: TraceArgs) -> anyhow::Result<()> {
    let api = Api::connect(&args.cluster).await?;
    let object = args
        .object
        .as_deref()
        .map(|o| resolve(o, &args.namespace))
        .transpose()?;
    let id = if let Some(id) = &args.id {
        id.parse::<TraceId>()
            .map_err(|e| anyhow::anyhow!("--id: {e}"))?
    } else if args.follow {
        wait_for_next_trace(&api, object.as_ref()).await?
    } else {
        pick(&api, object.as_ref(), args.last).await?
    };
    let (spans, cut) = if args.follow {
        follow(&api, id, &args).await?
    } else {
        api.trace(id).await?
    };
    println!(
        "{}",
        render(&spans, args.output, args.width, args.no_fold)?.trim_end()
    );
    if cut {
        eprintln!(
            "trace {id} was cut: it reached the API server's span budget per trace \
             (--trace-max-spans-per-trace), and its later steps were not recorded"
        );
    }
    Ok(())
}

/// The trace to show when no id is given.
async fn pick(api: &Api, object: Option<&Resolved>, last: bool) -> anyhow::Result<TraceId> {
    if let Some(o) = object
        && !last
        && let Some(ctx) = api.annotated(o).await
    {
        if !ctx.sampled {
            eprintln!(
                "{}'s last write was not recorded (its trace had reached its span budget); \
                 showing what trace {} recorded",
                o.object, ctx.trace_id
            );
        }
        return Ok(ctx.trace_id);
    }
    let found = api
        .list(1, object.is_some(), object.map(|o| &o.object))
        .await?;
    match (found.first(), object) {
        (Some(t), _) => Ok(t.trace_id),
        (None, Some(o)) => bail!(
            "no trace of {} is kept (tracing off, or its spans were evicted)",
            o.object
        ),
        (None, None) => bail!("no trace is kept yet"),
    }
}

/// Waits for a trace that is not the current latest one (of the object, if named).
async fn wait_for_next_trace(api: &Api, object: Option<&Resolved>) -> anyhow::Result<TraceId> {
    let latest = |list: Vec<TraceSummary>| list.first().map(|t| t.trace_id);
    let before = latest(api.list(1, true, object.map(|o| &o.object)).await?);
    eprintln!(
        "waiting for a new trace{} (Ctrl-C to stop)...",
        match object {
            Some(o) => format!(" of {}", o.object),
            None => String::new(),
        }
    );
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = latest(
            api.list(1, object.is_some(), object.map(|o| &o.object))
                .await?,
        );
        if let Some(id) = now
            && Some(id) != before
        {
            return Ok(id);
        }
    }
}

/// Re-reads the trace until it has not grown for `--quiet`; on a terminal the tree is
/// redrawn as it grows.
async fn follow(api: &Api, id: TraceId, args: &TraceArgs) -> anyhow::Result<(Vec<Span>, bool)> {
    let live = std::io::stdout().is_terminal() && args.output == Output::Tree;
    let mut spans = Vec::new();
    let mut last_change = Instant::now();
    loop {
        let (now, cut) = api.trace(id).await.unwrap_or_default();
        if now.len() != spans.len() {
            spans = now;
            last_change = Instant::now();
            if live {
                let mut out = std::io::stdout().lock();
                write!(
                    out,
                    "\x1b[H\x1b[2J{}",
                    render(&spans, Output::Tree, args.width, args.no_fold)?
                )?;
                out.flush()?;
            }
        } else if last_change.elapsed() >= args.quiet {
            if live {
                print!("\x1b[H\x1b[2J");
            }
            return Ok((spans, cut));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The spans in the chosen output; the tree and the waterfall fold retries unless `all`.
pub fn render(spans: &[Span], output: Output, width: usize, all: bool) -> anyhow::Result<String> {
    Ok(match output {
        Output::Tree => trace::render::tree(
            spans,
            TreeOptions {
                all,
                ..TreeOptions::default()
            },
        ),
        Output::Waterfall => trace::render::waterfall(spans, width, all),
        Output::Chrome => serde_json::to_string_pretty(&trace::chrome::to_chrome(spans))?,
        Output::Otlp => serde_json::to_string_pretty(&trace::otlp::to_otlp(spans))?,
        Output::Json => serde_json::to_string_pretty(spans)?,
    })
}

/// The `trace list` table.
fn render_list(traces: &[TraceSummary]) -> String {
    let now = trace::span::unix_nanos(std::time::SystemTime::now());
    let mut out = format!(
        "{:<32}  {:>6}  {:>9}  {:>8}  {}\n",
        "TRACE ID", "SPANS", "DURATION", "AGE", "ROOT"
    );
    for t in traces {
        let age = now.saturating_sub(t.start_unix_nanos + t.duration_nanos);
        let root = if t.root_summary.is_empty() {
            t.root.clone()
        } else {
            format!("{}: {}", t.root, t.root_summary)
        };
        // A trace cut at its span budget had more steps than it shows.
        let spans = format!("{}{}", t.spans, if t.cut { "+" } else { "" });
        out.push_str(&format!(
            "{:<32}  {:>6}  {:>9}  {:>8}  {root} [{}]\n",
            t.trace_id.to_string(),
            spans,
            format_duration(t.duration_nanos),
            format_age(age),
            t.components.join(", ")
        ));
    }
    out
}

fn format_age(nanos: u64) -> String {
    let secs = nanos / 1_000_000_000;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        _ => format!("{}h", secs / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_resolve_like_kubectl_names() {
        let d = resolve("deploy/web", "default").unwrap();
        assert_eq!(d.object.to_string(), "deployments/default/web");
        assert_eq!(
            d.path.as_deref(),
            Some("/apis/apps/v1/namespaces/default/deployments/web")
        );
        let n = resolve("Node/node-1", "default").unwrap();
        assert_eq!(n.object.to_string(), "nodes/node-1");
        assert_eq!(n.path.as_deref(), Some("/api/v1/nodes/node-1"));
        let slice = resolve("endpointslices.discovery.k8s.io/web-abcde", "default").unwrap();
        assert_eq!(
            slice.path.as_deref(),
            Some("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/web-abcde")
        );
        let crd = resolve("widgets.example.com/w1", "team").unwrap();
        assert_eq!(crd.object.to_string(), "widgets/team/w1");
        assert!(crd.path.is_none());
        assert!(resolve("web", "default").is_err());
        assert!(resolve("deploy/", "default").is_err());
    }

    #[test]
    fn ages_read_well() {
        assert_eq!(format_age(5_000_000_000), "5s");
        assert_eq!(format_age(125_000_000_000), "2m");
        assert_eq!(format_age(7_200_000_000_000), "2h");
    }
}
