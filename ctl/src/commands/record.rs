//! `miniplane record FILE [--for DURATION]`: records every write a running cluster makes,
//! with who made it, when (on the cluster's clock) and the trace that carried it, until Ctrl-C
//! or `--for` has passed; `miniplane replay FILE` sends its clients' writes again. No
//! Kubernetes counterpart (kube-apiserver's audit log names requests, not the objects they
//! left; SimKube's tracer keeps objects without their writers).
//!
//! ```text
//!   discovery ─▶ every listable, watchable resource (preferred versions; Events once)
//!   list each ─▶ Initial lines ─▶ watch each from its list's resourceVersion
//!   each event ─▶ writer = the managedFields entry it made or moved (admin::history::writer)
//!               time = the cluster clock (kube-system/miniplane-clock, else the machine's)
//!   stop ─▶ the API server's trace collector names the component and user of the writes that
//!           need it (deletes, writes with no new managedFields entry, clients' writes)
//!        ─▶ external = written by anyone outside the control plane ─▶ FILE, written whole
//! ```
//!
//! Simplified: resources that appear while recording (a new CustomResourceDefinition's) are
//! not watched, and a watch that falls behind the API server's window (410 Gone) lists again
//! and goes on, with the writes in between missing from the file (the recorder says so).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;

use admin::history::{self, ChangeType};
use admin::recording::{self, End, Header, Initial, Recording, Write};
use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, WatchEvent, WatchParams};
use serde_json::Value;

use super::fault::ClusterArgs;
use crate::kubectl::restmapper::{Mapping, RestMapper};

/// `miniplane record`.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// The file to write (JSON lines; written whole when the recording stops).
    file: PathBuf,
    /// Stop after this long (a Go duration: 30s, 5m); without it, Ctrl-C stops.
    #[arg(long = "for", value_name = "DURATION", value_parser = apimachinery::duration::parse_duration)]
    duration: Option<Duration>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// Runs `miniplane record`.
pub fn main(args: RecordArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run(args))
}

async fn run(args: RecordArgs) -> anyhow::Result<()> {
    // Refuse a file that cannot be written before recording anything.
    super::check_writable(&args.file)?;
    let admin = args.cluster.admin().await?;
    let config = client::ClientConfig::new(args.cluster.source()).user_agent("miniplane-record");
    let client = client::build_client(&config)
        .await
        .context("reading the kubeconfig")?;
    let server = client::server_url(&config.source).await?;
    let (clock, watcher) = client::cluster_clock::discover(&client)
        .await
        .map_err(|e| anyhow::anyhow!("the cluster's clock: {e}"))?;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let virtual_clock = watcher.is_some();
    if let Some(w) = watcher {
        tokio::spawn(w.run(shutdown.clone()));
    }
    let now = || clock.wall().to_string();
    let mapper = RestMapper::discover(&client, &server).await?;
    let recorded: Vec<Mapping> = mapper
        .mappings()
        .iter()
        .filter(|m| recordable(m))
        .cloned()
        .collect();

    // The lists: the objects at the start, and where each watch begins.
    let mut initial = Vec::new();
    let mut objects: HashMap<(usize, String, String), Value> = HashMap::new();
    let mut starts = Vec::new();
    let start_time = now();
    for (i, m) in recorded.iter().enumerate() {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &m.resource);
        let list = api
            .list(&ListParams::default())
            .await
            .with_context(|| format!("listing {}", m.resource_group()))?;
        let rv = list.metadata.resource_version.clone().unwrap_or_default();
        starts.push(rv);
        for item in list.items {
            let object = to_value(item, &m.resource);
            if let Some(key) = key_of(i, &object) {
                objects.insert(key, object.clone());
            }
            initial.push(Initial {
                api_version: m.resource.api_version.clone(),
                resource: m.resource.plural.clone(),
                external: initially_external(&object),
                object,
            });
        }
    }
    let start_revision = starts
        .iter()
        .filter_map(|rv| rv.parse::<u64>().ok())
        .min()
        .unwrap_or_default();
    let nodes = initial
        .iter()
        .filter(|i| i.api_version == "v1" && i.resource == "nodes")
        .count();

    let (tx, mut rx) = tokio::sync::mpsc::channel::<Observed>(4096);
    for (i, m) in recorded.iter().enumerate() {
        tokio::spawn(watch(
            client.clone(),
            i,
            m.resource.clone(),
            starts[i].clone(),
            tx.clone(),
            shutdown.clone(),
        ));
    }
    drop(tx);
    eprintln!(
        "recording {server} from revision {start_revision} ({} resources, {} objects); {}",
        recorded.len(),
        initial.len(),
        match args.duration {
            Some(d) => format!("stops after {}", apimachinery::duration::go_duration(d)),
            None => "Ctrl-C stops".to_owned(),
        }
    );

    let mut writes = Vec::new();
    let mut gaps = 0;
    let deadline = async {
        match args.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        tokio::select! {
            _ = &mut ctrl_c => break,
            () = &mut deadline => break,
            observed = rx.recv() => match observed {
                Some(Observed::Event(i, change, object)) => {
                    let m = &recorded[i];
                    if let Some(w) = observe(&mut objects, i, m, change, object, now()) {
                        writes.push(w);
                    }
                }
                Some(Observed::Gap(i)) => {
                    gaps += 1;
                    eprintln!(
                        "warning: the watch of {} fell behind the API server's window (410 Gone): \
                         it listed again, and the writes in between are not recorded",
                        recorded[i].resource_group()
                    );
                }
                Some(Observed::Failed(i, e)) => {
                    anyhow::bail!("watching {}: {e}", recorded[i].resource_group());
                }
                None => break,
            }
        }
    }
    let end_time = now();
    shutdown.cancel();
    writes.sort_by_key(|w| w.revision);
    attribute(&admin, &mut writes).await;
    let end = End {
        revision: writes.last().map_or(start_revision, |w| w.revision),
        time: end_time,
        writes: writes.len(),
    };
    let external = writes.iter().filter(|w| w.external).count();
    let recording = Recording {
        header: Header {
            api_version: recording::API_VERSION.to_owned(),
            server,
            start_revision,
            start_time,
            clock: if virtual_clock {
                admin::ClockMode::Virtual
            } else {
                admin::ClockMode::Real
            },
            nodes,
            resources: recorded.iter().map(Mapping::resource_group).collect(),
        },
        initial,
        writes,
        end,
    };
    let text = recording.to_lines()?;
    super::write_whole(&args.file, text.as_bytes())?;
    eprintln!(
        "recorded {} writes ({external} by clients outside the control plane) up to revision {} in {}{}",
        recording.end.writes,
        recording.end.revision,
        args.file.display(),
        if gaps > 0 {
            format!(" ({gaps} watches fell behind: see the warnings)")
        } else {
            String::new()
        }
    );
    Ok(())
}

/// A resource worth recording: listable and watchable, in its group's preferred version,
/// and not `events.k8s.io` (the same Events as the core group's).
fn recordable(m: &Mapping) -> bool {
    let can = |verb: &str| m.verbs.iter().any(|v| v == verb);
    m.preferred
        && can("list")
        && can("watch")
        && !m.resource.plural.contains('/')
        && m.resource.group != "events.k8s.io"
}

/// What a watch task reports.
enum Observed {
    /// An object of resource `.0` was added, modified or deleted (`.1`).
    Event(usize, ChangeType, Value),
    /// The watch of resource `.0` had to list again.
    Gap(usize),
    /// The watch of resource `.0` failed for good.
    Failed(usize, String),
}

/// Watches one resource from `rv` on, again from the last resourceVersion seen whenever the
/// API server ends the watch, and from a new list after 410 Gone.
async fn watch(
    client: kube::Client,
    index: usize,
    resource: ApiResource,
    mut rv: String,
    tx: tokio::sync::mpsc::Sender<Observed>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let params = WatchParams::default().timeout(290);
    let mut failures = 0;
    loop {
        let stream = tokio::select! {
            () = shutdown.cancelled() => return,
            s = api.watch(&params, &rv) => s,
        };
        let mut stream = match stream {
            Ok(s) => s.boxed(),
            // Too old to watch from: list again, as an informer does.
            Err(kube::Error::Api(e)) if e.code == 410 => {
                match relist(&api, index, &tx).await {
                    Some(now) => rv = now,
                    None => return,
                }
                continue;
            }
            Err(e) => {
                failures += 1;
                if failures > 5 {
                    let _ = tx.send(Observed::Failed(index, e.to_string())).await;
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200 * failures)).await;
                continue;
            }
        };
        failures = 0;
        loop {
            let next = tokio::select! {
                () = shutdown.cancelled() => return,
                n = stream.try_next() => n,
            };
            let (change, obj) = match next {
                Ok(Some(WatchEvent::Added(o))) => (ChangeType::Created, o),
                Ok(Some(WatchEvent::Modified(o))) => (ChangeType::Updated, o),
                Ok(Some(WatchEvent::Deleted(o))) => (ChangeType::Deleted, o),
                Ok(Some(WatchEvent::Bookmark(b))) => {
                    rv = b.metadata.resource_version;
                    continue;
                }
                Ok(Some(WatchEvent::Error(e))) if e.code == 410 => {
                    match relist(&api, index, &tx).await {
                        Some(now) => rv = now,
                        None => return,
                    }
                    break;
                }
                Ok(Some(WatchEvent::Error(e))) => {
                    let _ = tx.send(Observed::Failed(index, e.message)).await;
                    return;
                }
                Ok(None) | Err(_) => break,
            };
            if let Some(v) = &obj.metadata.resource_version {
                rv.clone_from(v);
            }
            let value = to_value(obj, &resource);
            if tx
                .send(Observed::Event(index, change, value))
                .await
                .is_err()
            {
                return;
            }
        }
    }
}

/// Lists the resource again after 410 Gone and reports the gap; the list's resourceVersion,
/// or `None` (reported as a failure) when the list fails.
async fn relist(
    api: &Api<DynamicObject>,
    index: usize,
    tx: &tokio::sync::mpsc::Sender<Observed>,
) -> Option<String> {
    match api.list(&ListParams::default()).await {
        Ok(list) => {
            let _ = tx.send(Observed::Gap(index)).await;
            Some(list.metadata.resource_version.unwrap_or_default())
        }
        Err(e) => {
            let _ = tx.send(Observed::Failed(index, e.to_string())).await;
            None
        }
    }
}

/// An object as JSON with its `apiVersion` and `kind` (list items come without them).
pub(crate) fn to_value(mut obj: DynamicObject, resource: &ApiResource) -> Value {
    obj.types = Some(kube::api::TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    });
    serde_json::to_value(&obj).unwrap_or(Value::Null)
}

fn key_of(resource: usize, object: &Value) -> Option<(usize, String, String)> {
    let meta = object.get("metadata")?;
    let text = |k: &str| {
        meta.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Some((resource, text("namespace"), text("name")))
}

/// The write one watch event shows, with its writer from managedFields; `None` for an event
/// that repeats what the recorder already holds.
fn observe(
    objects: &mut HashMap<(usize, String, String), Value>,
    index: usize,
    m: &Mapping,
    change: ChangeType,
    object: Value,
    time: String,
) -> Option<Write> {
    let key = key_of(index, &object)?;
    let before = match change {
        ChangeType::Deleted => objects.remove(&key),
        _ => objects.insert(key.clone(), object.clone()),
    };
    let revision = object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|rv| rv.parse::<u64>().ok())?;
    if change != ChangeType::Deleted && before.as_ref() == Some(&object) {
        return None;
    }
    let writer = match change {
        // A delete stores nothing: the object is the last version, written by someone else.
        ChangeType::Deleted => history::Writer {
            traceparent: history::Writer::of(None, &object).0.traceparent,
            ..history::Writer::default()
        },
        _ => history::Writer::of(before.as_ref(), &object).0,
    };
    let has_deletion = |o: Option<&Value>| {
        o.and_then(|o| o.pointer("/metadata/deletionTimestamp"))
            .is_some()
    };
    let deleting = change == ChangeType::Updated
        && has_deletion(Some(&object))
        && !has_deletion(before.as_ref());
    // A delete after a delete request only lets the object go (finalizers, the kubelet).
    let finalized = change == ChangeType::Deleted && has_deletion(before.as_ref());
    let meta = object.get("metadata")?;
    let external = match (&writer.manager, change) {
        _ if finalized => false,
        (Some(m), ChangeType::Created | ChangeType::Updated) if !deleting => {
            !recording::is_control_plane(m)
        }
        // Decided from the trace at the end, else by ownership.
        _ if deleting || change == ChangeType::Deleted => !controlled(&object),
        _ => false,
    };
    Some(Write {
        revision,
        time,
        api_version: m.resource.api_version.clone(),
        resource: m.resource.plural.clone(),
        namespace: meta
            .get("namespace")
            .and_then(Value::as_str)
            .map(str::to_owned),
        name: meta.get("name")?.as_str()?.to_owned(),
        change,
        deleting,
        writer,
        external: external && !finalized,
        object,
    })
}

/// Whether a controller owns the object (a ReplicaSet's Pod, a Deployment's ReplicaSet).
fn controlled(object: &Value) -> bool {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|owners| {
            owners
                .iter()
                .any(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
        })
}

/// An object at the start that a client outside the control plane made: no controlling owner
/// and a field manager outside the control plane.
fn initially_external(object: &Value) -> bool {
    !controlled(object)
        && object
            .pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .is_some_and(|entries| {
                entries.iter().any(|e| {
                    e.get("manager")
                        .and_then(Value::as_str)
                        .is_some_and(|m| !recording::is_control_plane(m))
                })
            })
}

/// Names the component and user of the writes whose writer the object does not tell (deletes,
/// writes that made or moved no managedFields entry) or that clients made, from the API
/// server's trace collector: the API server's span of the request is the one the write's
/// `traceparent` names; its parent is the client's span, absent for a client that sent no
/// trace context (kubectl). Without one, the write's field manager tells, else the request's
/// user (a `system:` user is the control plane's).
/// A trace the collector no longer holds leaves the write as the object told it.
async fn attribute(admin: &miniplane::admin_client::AdminClient, writes: &mut [Write]) {
    let mut traces: BTreeMap<String, Option<Vec<trace::Span>>> = BTreeMap::new();
    for w in writes.iter_mut() {
        let needs = w.external || w.writer.manager.is_none();
        let Some(context) = w
            .writer
            .traceparent
            .as_deref()
            .filter(|_| needs)
            .and_then(|tp| trace::SpanContext::parse(tp).ok())
        else {
            continue;
        };
        let id = context.trace_id.to_string();
        if !traces.contains_key(&id) {
            let spans = admin.trace_spans(&id).await.ok();
            traces.insert(id.clone(), spans);
        }
        let Some(Some(spans)) = traces.get(&id) else {
            continue;
        };
        let Some((span, parent)) = trace::span_and_parent(spans, &context) else {
            continue;
        };
        // A delete's object carries the delete's context only on the watch event that
        // removed it or marked it (else its last write's); a write's, its own request's.
        let removal = w.deleting || w.change == ChangeType::Deleted;
        if removal && !span.name.starts_with("delete") {
            continue;
        }
        w.writer.user = span.attribute("user");
        w.writer.component = parent.map(|p| p.component.clone());
        let manager_told = w.writer.manager.is_some() && !removal;
        w.external = match (parent, &w.writer.user) {
            (Some(p), _) => !recording::is_control_plane(&p.component),
            // A write's own managedFields entry already told.
            (None, _) if manager_told => w.external,
            (None, Some(user)) => !recording::is_control_plane_user(user),
            (None, None) => true,
        };
    }
}
