//! `miniplane replay FILE [--speed N]`: starts a fresh cluster, sends it the writes that
//! clients outside the control plane made in a recording (`miniplane record`), at the
//! recording's pace on a virtual clock, lets the controllers, the scheduler and the kubelets
//! do the rest, then reports object by object where the outcome differs from the recording.
//! No Kubernetes counterpart; SimKube replays traces in real time on a real cluster.
//!
//! ```text
//!   FILE ─▶ read whole (a cut or damaged file starts nothing)
//!        ─▶ cluster: as many nodes, a virtual clock started at the recording's start and
//!           running at --speed, --seed if given
//!        ─▶ the clients' objects at the start ─▶ each client write when the clock reaches its
//!           time: create (a generated name gets a new one, mapped) · merge patch of what it
//!           changed (its field manager, its subresource) · delete
//!        ─▶ the clock reaches the recording's end ─▶ compare until the same or --settle
//!           (admin::replay::compare) ─▶ report; exit 1 if anything differs, 2 on an error
//!   trace:  replay FILE ─▶ replay create deployments (recordedBy, reason) ─▶ the API server's
//!           request ─▶ the controllers' work, as for any write (component miniplane-replay)
//! ```
//!
//! The clock is the cluster's time, not the machine's: at `--speed 5` the controllers have a
//! fifth of the machine time they had between two writes. One that had caught up between
//! them in the recording may not have in the replay, and the report shows where that changed
//! the outcome (a ReplicaSet created with 3 replicas instead of scaled from 2 shows as a
//! `metadata.generation` of 1 instead of 2). `--speed 1` replays at the recording's pace.
//!
//! Simplified: a server-side apply is sent as the merge patch of what it changed (its field
//! manager's fields are the same; its operation shows as `Update`), and a delete with its
//! default propagation.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use admin::history::ChangeType;
use admin::recording::{ObjectId, Recording, Write};
use admin::replay::{Outcome, Report};
use anyhow::Context;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use miniplane::Cluster;
use miniplane::admin_client::AdminClient;
use serde_json::Value;

/// `miniplane replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The recording (`miniplane record FILE`).
    file: PathBuf,
    /// Cluster seconds per machine second (1: the recording's pace; 10: ten times faster).
    #[arg(long, value_name = "N", default_value_t = 1.0)]
    speed: f64,
    /// How long to wait, after the recording's end, for the cluster to come out as recorded
    /// before reporting what differs.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = apimachinery::duration::parse_duration)]
    settle: Duration,
    /// Nodes of the replay's cluster (default: as many as the recorded cluster had).
    #[arg(long, value_name = "N")]
    nodes: Option<usize>,
    /// Draw generated names, UIDs and the scheduler's tie-breaks from this seed
    /// (`up --seed`): a recording of a seeded cluster replays to the same names.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Pod stage timing of the simulated kubelets, as `up --kubelet-profile`: the recorded
    /// cluster's, for its pods to start at the same pace.
    #[arg(long, value_name = "PROFILE", default_value = "realistic", value_parser = super::up::parse_profile)]
    kubelet_profile: miniplane::KubeletProfile,
    /// Keep the replay's cluster running after the report (Ctrl-C stops it).
    #[arg(long)]
    keep: bool,
    /// Replay into the running cluster of --kubeconfig/--master (or `$KUBECONFIG`) instead of
    /// a new one: its clock is moved as a new cluster's would be (a virtual one advanced, a
    /// real one waited for), and the report compares all its objects.
    #[arg(long)]
    into: bool,
    #[command(flatten)]
    cluster: super::fault::ClusterArgs,
    /// `json`: print the report as JSON.
    #[arg(short = 'o', long, value_name = "FORMAT")]
    output: Option<Format>,
}

/// Output formats of the report besides text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// The report as JSON (`admin::replay::Report`).
    Json,
}

/// Runs `miniplane replay`: exit status 0 when the outcome is the recording's, 1 when it
/// differs (`main` makes an error 2, as diff(1) does).
pub fn main(args: ReplayArgs) -> anyhow::Result<std::process::ExitCode> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let recording =
        Recording::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;
    if !(args.speed.is_finite() && args.speed > 0.0) {
        anyhow::bail!("--speed must be a positive number, not {}", args.speed);
    }
    let start: jiff::Timestamp = recording
        .header
        .start_time
        .parse()
        .map_err(|e| anyhow::anyhow!("{}: startTime: {e}", args.file.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let report = if args.into {
        runtime.block_on(async {
            let config =
                client::ClientConfig::new(args.cluster.source()).user_agent("miniplane-replay");
            let client = client::build_client(&config)
                .await
                .context("reading the kubeconfig")?;
            let server = client::server_url(&config.source).await?;
            eprintln!(
                "replaying {} ({} writes by clients of {} recorded) into the cluster at {server}",
                args.file.display(),
                recording.external_writes().count(),
                recording.writes.len(),
            );
            replay(client, &recording, &args).await
        })?
    } else {
        let cluster = new_cluster(&recording, &args, start)?;
        let report = runtime.block_on(replay(cluster.client(), &recording, &args));
        if report.is_ok() && args.keep {
            eprintln!(
                "the replay's cluster runs at {}: export KUBECONFIG={} (Ctrl-C stops it)",
                cluster.url(),
                cluster.kubeconfig_path().display()
            );
            runtime.block_on(async {
                let _ = tokio::signal::ctrl_c().await;
            });
        }
        cluster.stop()?;
        report?
    };
    match args.output {
        Some(Format::Json) => println!("{}", serde_json::to_string_pretty(&report)?),
        None => print!("{}", render(&report)),
    }
    Ok(if report.same() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}

/// A cluster as `miniplane up` starts one, with the recorded cluster's nodes, on a clock that
/// stands at the recording's start until the replay moves it.
fn new_cluster(
    recording: &Recording,
    args: &ReplayArgs,
    start: jiff::Timestamp,
) -> anyhow::Result<Cluster> {
    let nodes = args.nodes.unwrap_or(recording.header.nodes);
    let builder = |port: u16| {
        let mut builder = Cluster::builder()
            .nodes(nodes)
            .port(port)
            .kubelet_profile(args.kubelet_profile)
            .leader_elect(true)
            .cloud(true)
            .secure(true)
            .metrics_server(Some(Duration::from_secs(15)))
            .virtual_clock(0.0)
            .clock_start(start);
        if let Some(seed) = args.seed {
            builder = builder.seed(seed);
        }
        builder
    };
    // The recorded server's port when it is free (the `kubernetes` Service names it).
    let port = recording
        .header
        .server
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse::<u16>().ok())
        .unwrap_or(0);
    let cluster = match builder(port).start() {
        Err(miniplane::Error::PortInUse { .. }) => builder(0).start(),
        started => started,
    }
    .context("starting the replay's cluster")?;
    eprintln!(
        "replaying {} ({} writes by clients of {} recorded) on a new cluster at {} ({nodes} nodes, \
         its clock from {start} at {}x)",
        args.file.display(),
        recording.external_writes().count(),
        recording.writes.len(),
        cluster.url(),
        args.speed
    );
    Ok(cluster)
}

async fn replay(
    client: kube::Client,
    recording: &Recording,
    args: &ReplayArgs,
) -> anyhow::Result<Report> {
    let admin = AdminClient::new(client.clone());
    let start: jiff::Timestamp = recording.header.start_time.parse()?;
    let mut clock = Clock::read(&admin, start, args.speed).await?;
    let resources = Resources::of(recording);
    // The replay is one trace: a span per client write sent again, with why, and under it the
    // API server's request and all the control plane did in answer.
    let (tracer, exporter) = client::trace::Tracer::new(
        TRACE_COMPONENT,
        client.clone(),
        client::trace::DEFAULT_BUFFER,
    );
    let exported = tokio_util::sync::CancellationToken::new();
    let exporting = tokio::spawn(exporter.run(exported.clone()));
    let mut root = tracer.root(
        &format!("replay {}", args.file.display()),
        trace::SpanKind::Internal,
    );
    let external = recording.external_writes().count();
    let mut sender = Sender {
        client: client::trace::sync_client(&tracer, &client),
        resources: &resources,
        names: HashMap::new(),
        uids: HashMap::new(),
    };

    // The clients' objects at the start, namespaces first.
    let mut initial: Vec<_> = recording.initial.iter().filter(|i| i.external).collect();
    initial.sort_by_key(|i| {
        (
            i.resource != "namespaces",
            i.resource != "customresourcedefinitions",
            revision(&i.object),
        )
    });
    for i in initial {
        let id = ObjectId::of(&i.api_version, &i.resource, &i.object);
        if let Err(e) = sender
            .create(&i.api_version, &i.resource, &i.object, None)
            .await
        {
            eprintln!(
                "  {:>8}  create {}: {e}",
                "start",
                id.map(|i| i.display()).unwrap_or_default()
            );
        }
    }

    // Each client write when the clock reaches its time; every write moves the recording's
    // objects on, so a client's patch is what it changed from the object it saw.
    let mut current = recording.initial_objects();
    for w in &recording.writes {
        let id = w.id();
        let before = if w.change == ChangeType::Deleted {
            current.remove(&id)
        } else {
            current.insert(id.clone(), w.object.clone())
        };
        if !w.external {
            continue;
        }
        let at: jiff::Timestamp = w.time.parse().unwrap_or(start);
        clock.advance_to(at).await?;
        let offset = at.duration_since(start);
        let verb = verb(w);
        let mut span = root.as_ref().and_then(|r| {
            tracer.child(
                &r.context(),
                &format!("replay {verb} {}", w.resource),
                trace::SpanKind::Client,
            )
        });
        if let Some(span) = &mut span {
            span.set("recordedRevision", w.revision.to_string());
            span.set("recordedBy", w.writer.who());
            span.set(
                "reason",
                format!(
                    "written by {} at +{:.1}s: a client outside the control plane, so sent again \
                     (the control plane's writes are left to the replay's own)",
                    w.writer.who(),
                    offset.as_secs_f64()
                ),
            );
            span.set(trace::attr::NAME, id.name.as_str());
        }
        let send = async {
            match verb {
                "create" => sender
                    .create(&w.api_version, &w.resource, &w.object, Some(w))
                    .await
                    .map(|_| ()),
                "delete" => sender.delete(&id).await,
                _ => sender.patch(&id, before.as_ref(), w).await,
            }
        };
        let outcome = match &span {
            Some(span) => client::trace::under(&tracer, span.context(), send).await,
            None => send.await,
        };
        if let Some(mut span) = span {
            span.summary = match &outcome {
                Ok(()) => format!("{verb} {} as {}", id.display(), w.writer.who()),
                Err(e) => format!("{verb} {} failed: {e}", id.display()),
            };
            span.end();
            tracer.record(span);
        }
        let line = format!(
            "  {:>8}  {verb} {}  ({})",
            format!("+{:.1}s", offset.as_secs_f64()),
            id.display(),
            w.writer.who()
        );
        match outcome {
            Ok(()) => eprintln!("{line}"),
            Err(e) => eprintln!("{line}: {e}"),
        }
    }
    let end: jiff::Timestamp = recording.end.time.parse().unwrap_or(start);
    clock.advance_to(end).await?;

    // The clock stands at the recording's end: what the controllers do without time passing
    // (no grace period ends) they do now, until the cluster comes out as recorded or --settle
    // has passed.
    let recorded = recording.final_objects();
    let settle = Instant::now();
    let report = loop {
        let report = admin::replay::compare(&recorded, &resources.list(&client).await?);
        if report.same() || settle.elapsed() >= args.settle {
            break report;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    if let Some(mut root) = root.take() {
        root.summary = format!(
            "{external} client writes of {} recorded sent again; {} objects compared, {}",
            recording.writes.len(),
            report.compared,
            if report.same() {
                "all the same".to_owned()
            } else {
                format!("{} came out otherwise", report.differences.len())
            }
        );
        root.end();
        tracer.record(root);
    }
    exported.cancel();
    let _ = exporting.await;
    Ok(report)
}

/// The component the replay's spans name.
const TRACE_COMPONENT: &str = "miniplane-replay";

/// What a client write asks of the replay: `create`, `delete` (a delete request, or an
/// object removed at once) or `patch`.
fn verb(w: &Write) -> &'static str {
    match w.change {
        ChangeType::Created => "create",
        ChangeType::Deleted => "delete",
        ChangeType::Updated if w.deleting => "delete",
        ChangeType::Updated => "patch",
    }
}

fn revision(object: &Value) -> u64 {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_default()
}

/// The clock of the cluster replayed into, with the recording's time mapped onto it: the
/// recording's start is the cluster's time when the replay began (for a new cluster, the same
/// instant). A virtual clock runs at the replay's speed to each write's time (and stands there
/// again if it stood before: `AdminClient::advance_clock`); on a real clock the replay waits,
/// a speed above 1 shortening the waits.
struct Clock<'a> {
    admin: &'a AdminClient,
    /// The recording's start.
    recorded_start: jiff::Timestamp,
    /// The cluster's time then.
    cluster_start: jiff::Timestamp,
    virtual_clock: bool,
    speed: f64,
}

impl<'a> Clock<'a> {
    async fn read(
        admin: &'a AdminClient,
        recorded_start: jiff::Timestamp,
        speed: f64,
    ) -> anyhow::Result<Clock<'a>> {
        let (virtual_clock, now) = match admin.clock().await {
            Ok(status) => (
                status.mode == admin::ClockMode::Virtual,
                status.now.parse()?,
            ),
            // An API server without miniplane's admin API: the machine's time.
            Err(_) => (false, jiff::Timestamp::now()),
        };
        Ok(Clock {
            admin,
            recorded_start,
            cluster_start: now,
            virtual_clock,
            speed,
        })
    }

    /// Moves (or waits for) the cluster's time to where the recording's `at` falls.
    async fn advance_to(&mut self, at: jiff::Timestamp) -> anyhow::Result<()> {
        let offset = self.recorded_start.duration_until(at);
        let target = self
            .cluster_start
            .checked_add(offset)
            .unwrap_or(self.cluster_start);
        let now: jiff::Timestamp = if self.virtual_clock {
            self.admin
                .clock()
                .await
                .map_err(|e| anyhow::anyhow!("reading the cluster's clock: {e}"))?
                .now
                .parse()?
        } else {
            jiff::Timestamp::now()
        };
        if target <= now {
            return Ok(());
        }
        let by = now.duration_until(target).unsigned_abs();
        if self.virtual_clock {
            self.admin
                .advance_clock(&format!("{}ns", by.as_nanos()), Some(self.speed))
                .await
                .map_err(|e| anyhow::anyhow!("moving the cluster's clock: {e}"))?;
        } else {
            tokio::time::sleep(by.div_f64(self.speed)).await;
        }
        Ok(())
    }
}

/// The resources a recording holds, as kube's dynamic API names them.
struct Resources {
    by_id: BTreeMap<(String, String), ApiResource>,
}

impl Resources {
    fn of(recording: &Recording) -> Resources {
        let mut by_id = BTreeMap::new();
        let objects = recording
            .initial
            .iter()
            .map(|i| (&i.api_version, &i.resource, &i.object))
            .chain(
                recording
                    .writes
                    .iter()
                    .map(|w| (&w.api_version, &w.resource, &w.object)),
            );
        for (api_version, resource, object) in objects {
            let key = (api_version.clone(), resource.clone());
            if by_id.contains_key(&key) {
                continue;
            }
            let kind = object
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            by_id.insert(
                key,
                ApiResource {
                    group: group.to_owned(),
                    version: version.to_owned(),
                    api_version: api_version.clone(),
                    kind: kind.to_owned(),
                    plural: resource.clone(),
                },
            );
        }
        Resources { by_id }
    }

    fn get(&self, api_version: &str, resource: &str) -> anyhow::Result<&ApiResource> {
        self.by_id
            .get(&(api_version.to_owned(), resource.to_owned()))
            .with_context(|| format!("{resource} of {api_version} is not in the recording"))
    }

    /// Every object of the recording's resources in the replay's cluster.
    async fn list(&self, client: &kube::Client) -> anyhow::Result<BTreeMap<ObjectId, Value>> {
        let mut out = BTreeMap::new();
        for ((api_version, resource), ar) in &self.by_id {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
            let list = match api.list(&ListParams::default()).await {
                Ok(list) => list,
                // A custom resource whose definition the replay did not get.
                Err(kube::Error::Api(e)) if e.code == 404 => continue,
                Err(e) => return Err(e).with_context(|| format!("listing {resource}")),
            };
            for item in list.items {
                let value = super::record::to_value(item, ar);
                if let Some(id) = ObjectId::of(api_version, resource, &value) {
                    out.insert(id, value);
                }
            }
        }
        Ok(out)
    }
}

/// Sends a recording's client writes to the replay's cluster.
struct Sender<'r> {
    client: kube::Client,
    resources: &'r Resources,
    /// The recording's generated names → the replay's.
    names: HashMap<ObjectId, String>,
    /// The recording's UIDs → the replay's (owner references between clients' objects).
    uids: HashMap<String, String>,
}

impl Sender<'_> {
    fn api(
        &self,
        api_version: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> anyhow::Result<Api<DynamicObject>> {
        let ar = self.resources.get(api_version, resource)?;
        Ok(match namespace {
            Some(ns) if !ns.is_empty() => Api::namespaced_with(self.client.clone(), ns, ar),
            _ => Api::all_with(self.client.clone(), ar),
        })
    }

    /// The replay's name of the recording's object `id`.
    fn name_of(&self, id: &ObjectId) -> String {
        self.names
            .get(id)
            .cloned()
            .unwrap_or_else(|| id.name.clone())
    }

    /// Creates `object` as a client did; a generated name is generated again and mapped.
    async fn create(
        &mut self,
        api_version: &str,
        resource: &str,
        object: &Value,
        write: Option<&Write>,
    ) -> anyhow::Result<()> {
        let id = ObjectId::of(api_version, resource, object).context("an object without a name")?;
        let mut body = strip(object);
        let generate = object
            .pointer("/metadata/generateName")
            .and_then(Value::as_str)
            .filter(|base| !base.is_empty() && id.name.starts_with(base));
        if generate.is_some()
            && let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.remove("name");
        }
        self.map_owners(&mut body);
        let api = self.api(api_version, resource, Some(&id.namespace))?;
        let params = PostParams {
            field_manager: write.and_then(|w| w.writer.manager.clone()),
            ..PostParams::default()
        };
        let data: DynamicObject = serde_json::from_value(body)?;
        match api.create(&params, &data).await {
            Ok(made) => {
                if let (Some(name), Some(uid)) = (&made.metadata.name, &made.metadata.uid) {
                    if let Some(old) = object.pointer("/metadata/uid").and_then(Value::as_str) {
                        self.uids.insert(old.to_owned(), uid.clone());
                    }
                    if *name != id.name {
                        self.names.insert(id, name.clone());
                    }
                }
                Ok(())
            }
            Err(kube::Error::Api(e)) if e.code == 409 && write.is_none() => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Sends what the write changed, as a JSON merge patch with the write's field manager.
    async fn patch(&self, id: &ObjectId, before: Option<&Value>, w: &Write) -> anyhow::Result<()> {
        let status = w.writer.subresource.as_deref() == Some("status");
        let part = |v: &Value| {
            let mut s = strip(v);
            if status {
                serde_json::json!({"status": s.get("status").cloned().unwrap_or(Value::Null)})
            } else {
                if let Some(o) = s.as_object_mut() {
                    o.remove("status");
                }
                s
            }
        };
        let old = before.map(part).unwrap_or_else(|| serde_json::json!({}));
        let mut patch = apimachinery::merge_patch::create(&old, &part(&w.object));
        if patch.as_object().is_some_and(serde_json::Map::is_empty) {
            return Ok(());
        }
        self.map_owners(&mut patch);
        let api = self.api(&w.api_version, &w.resource, Some(&id.namespace))?;
        let params = PatchParams {
            field_manager: w.writer.manager.clone(),
            ..PatchParams::default()
        };
        let name = self.name_of(id);
        if status {
            api.patch_status(&name, &params, &Patch::Merge(&patch))
                .await?;
        } else {
            api.patch(&name, &params, &Patch::Merge(&patch)).await?;
        }
        Ok(())
    }

    /// Deletes the object (a 404 means the replay's controllers deleted it already).
    async fn delete(&self, id: &ObjectId) -> anyhow::Result<()> {
        let api = self.api(&id.api_version, &id.resource, Some(&id.namespace))?;
        match api
            .delete(&self.name_of(id), &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Points owner references at the replay's UIDs of the clients' objects.
    fn map_owners(&self, body: &mut Value) {
        let Some(owners) = body
            .pointer_mut("/metadata/ownerReferences")
            .and_then(Value::as_array_mut)
        else {
            return;
        };
        for o in owners.iter_mut() {
            let uid = o.get("uid").and_then(Value::as_str).unwrap_or_default();
            if let Some(new) = self.uids.get(uid) {
                o["uid"] = Value::String(new.clone());
            }
        }
    }
}

/// An object as a client sends it: without what the API server sets (uid, resourceVersion,
/// creationTimestamp, generation, managedFields, deletion) and the trace annotation.
fn strip(object: &Value) -> Value {
    let mut body = object.clone();
    admin::replay::without_metadata(
        &mut body,
        &[
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ],
    );
    body
}

/// The report as text: a summary line, then each object that came out otherwise.
fn render(report: &Report) -> String {
    let mut out = String::new();
    if report.same() {
        out.push_str(&format!(
            "the replay ended as the recording did: {} objects compared, all the same\n",
            report.compared
        ));
        return out;
    }
    let count = |f: fn(&Outcome) -> bool| report.differences.iter().filter(|o| f(o)).count();
    out.push_str(&format!(
        "the replay ended otherwise: {} objects compared, {} the same, {} differ, {} missing, {} extra\n",
        report.compared,
        report.same,
        count(|o| matches!(o, Outcome::Differs { .. })),
        count(|o| matches!(o, Outcome::Missing { .. })),
        count(|o| matches!(o, Outcome::Extra { .. })),
    ));
    let show = |v: &Option<Value>| v.as_ref().map_or("(none)".to_owned(), Value::to_string);
    for o in &report.differences {
        match o {
            Outcome::Differs {
                id,
                replay_name,
                changes,
            } => {
                let renamed = replay_name
                    .as_ref()
                    .map(|n| format!(" (in the replay: {n})"))
                    .unwrap_or_default();
                out.push_str(&format!("  differs  {}{renamed}\n", id.display()));
                for c in changes {
                    out.push_str(&format!(
                        "             {}: {} (recorded) → {} (replay)\n",
                        c.path,
                        show(&c.old),
                        show(&c.new)
                    ));
                }
            }
            Outcome::Missing { id } => {
                out.push_str(&format!(
                    "  missing  {} (recorded, not in the replay)\n",
                    id.display()
                ));
            }
            Outcome::Extra { id } => {
                out.push_str(&format!(
                    "  extra    {} (in the replay only)\n",
                    id.display()
                ));
            }
        }
    }
    out
}
