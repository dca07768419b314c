//! `miniplane cloud ...`: the simulated cloud under the cluster, seen and handled from outside
//! (`docs/cloud.md`), as one would use a cloud's own CLI (`aws ec2 describe-instances`,
//! `aws ec2 stop-instances`) next to `kubectl`.
//!
//! ```text
//!   miniplane cloud instances | load-balancers | routes       tables of what the cloud holds
//!   miniplane cloud launch NAME [--internal-ip IP]             a machine (idempotent by name)
//!   miniplane cloud stop | start | delete NAME                 a machine's power; delete terminates
//!   miniplane cloud fault set --api A [--fail-fraction F] [--delay D] | clear [--api A] | list
//!   miniplane cloud serve --data-dir DIR [--listen ADDR]       the cloud itself, in the foreground
//! ```
//!
//! The client verbs find the cloud through its `cloud-config.json` (`--cloud-config`; by
//! default the `cloud/cloud-config.json` beside `$KUBECONFIG` when `miniplane up` wrote one
//! there, else `.miniplane/cloud/cloud-config.json`: the cloud of `miniplane up` run in this
//! directory) and talk to it with [`cloud::sim::HttpCloud`]. No Kubernetes counterpart: the cloud is outside the cluster.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::anyhow;
use cloud::CloudError;
use cloud::sim::{CloudInstance, Fault, FaultApi, HttpCloud, Server, SimOptions};
use jiff::Timestamp;
use tokio_util::sync::CancellationToken;

/// `miniplane cloud`.
#[derive(Debug, clap::Args)]
pub struct CloudArgs {
    /// The cloud's config file, written by the cloud when it starts (`{"endpoint": ...}`);
    /// the verbs find the cloud through it (`serve` writes it). Default: the
    /// `cloud/cloud-config.json` beside $KUBECONFIG if there is one, else
    /// `.miniplane/cloud/cloud-config.json`.
    #[arg(long, value_name = "FILE", global = true)]
    cloud_config: Option<PathBuf>,
    #[command(subcommand)]
    command: CloudCommand,
}

#[derive(Debug, clap::Subcommand)]
enum CloudCommand {
    #[command(flatten)]
    Verb(Verb),
    /// Runs the simulated cloud in the foreground until Ctrl-C or SIGTERM.
    Serve(ServeArgs),
}

/// The verbs that talk to a running cloud.
#[derive(Debug, clap::Subcommand)]
enum Verb {
    /// Lists the instances: the nodes' machines.
    Instances,
    /// Lists the load balancers: one per Service of type LoadBalancer.
    #[command(name = "load-balancers", visible_alias = "lbs")]
    LoadBalancers,
    /// Lists the routes: each node's pod CIDR sent to that node.
    Routes,
    /// Launches an instance; one of that name that exists is left as it is.
    Launch {
        /// The instance's name (a node's name).
        name: String,
        /// Its InternalIP (default: the lowest free address of 172.31.0.0/16).
        #[arg(long, value_name = "IP")]
        internal_ip: Option<Ipv4Addr>,
    },
    /// Stops an instance: its node shuts down (tainted, then NotReady).
    Stop {
        /// The instance.
        name: String,
    },
    /// Starts a stopped instance.
    Start {
        /// The instance.
        name: String,
    },
    /// Terminates an instance: it no longer exists, and its Node is deleted.
    Delete {
        /// The instance.
        name: String,
    },
    /// Makes the cloud's API fail or slow on purpose.
    Fault {
        #[command(subcommand)]
        command: FaultCommand,
    },
}

#[derive(Debug, clap::Subcommand)]
enum FaultCommand {
    /// Sets the fault of an API group (replacing the one there).
    Set {
        /// The API group.
        #[arg(long, value_enum)]
        api: ApiGroup,
        /// The fraction of its calls that fail with 503 (0 to 1).
        #[arg(long, value_name = "F", value_parser = parse_fraction)]
        fail_fraction: Option<f64>,
        /// A delay added to each of its calls (e.g. 500ms, 2s).
        #[arg(long, value_name = "DURATION", value_parser = apimachinery::duration::parse_duration)]
        delay: Option<Duration>,
    },
    /// Clears the fault of one API group, or every fault.
    Clear {
        /// Only this API group's fault.
        #[arg(long, value_enum)]
        api: Option<ApiGroup>,
    },
    /// Lists the faults in force.
    List,
}

/// The API groups of the cloud, as `--api` takes them.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ApiGroup {
    Instances,
    Loadbalancers,
    Routes,
    All,
}

impl From<ApiGroup> for FaultApi {
    fn from(api: ApiGroup) -> FaultApi {
        match api {
            ApiGroup::Instances => FaultApi::Instances,
            ApiGroup::Loadbalancers => FaultApi::LoadBalancers,
            ApiGroup::Routes => FaultApi::Routes,
            ApiGroup::All => FaultApi::All,
        }
    }
}

/// Flags of `miniplane cloud serve`.
#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// The cloud's directory: its state.json and cloud-config.json (`miniplane up` uses
    /// <data-dir>/cloud).
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,
    /// Address of the cloud's HTTP API (port 0 picks a free port; cloud-config.json tells it).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// How long a new load balancer provisions before it is active.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = apimachinery::duration::parse_duration)]
    lb_provisioning_delay: Duration,
}

impl CloudArgs {
    /// The default log filter: `serve` logs what the cloud does, as a component does; the
    /// client verbs print only their answer.
    pub fn default_log_filter(&self) -> &'static str {
        match self.command {
            CloudCommand::Serve(_) => "info",
            _ => "off",
        }
    }
}

/// Runs `miniplane cloud`.
pub fn main(args: CloudArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match args.command {
        CloudCommand::Serve(serve_args) => runtime.block_on(serve(serve_args)),
        CloudCommand::Verb(verb) => {
            let config = args.cloud_config.unwrap_or_else(|| {
                default_cloud_config(std::env::var_os("KUBECONFIG").map(PathBuf::from))
            });
            runtime.block_on(run(&config, verb))
        }
    }
}

/// Where the verbs look for the cloud without `--cloud-config`: `miniplane up` keeps its
/// kubeconfig and its cloud in one data dir, so a shell pointed at a cluster with
/// `export KUBECONFIG=DIR/kubeconfig` finds that cluster's cloud at `DIR/cloud/`.
fn default_cloud_config(kubeconfig: Option<PathBuf>) -> PathBuf {
    kubeconfig
        .and_then(|k| {
            k.parent()
                .map(|dir| dir.join("cloud").join("cloud-config.json"))
        })
        .filter(|candidate| candidate.is_file())
        .unwrap_or_else(|| PathBuf::from(".miniplane/cloud/cloud-config.json"))
}

/// `miniplane cloud serve`.
async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let options = SimOptions {
        lb_provisioning_delay: args.lb_provisioning_delay,
        seed: None,
    };
    let server = Server::bind(&args.data_dir, args.listen, options).await?;
    println!(
        "miniplane cloud listening on {} (state in {}, cloud config {})",
        server.endpoint(),
        args.data_dir.join(cloud::sim::STATE_FILE).display(),
        server.cloud_config_path().display()
    );
    let shutdown = CancellationToken::new();
    let mut run = tokio::spawn(server.run(shutdown.clone()));
    tokio::select! {
        result = &mut run => return Ok(result??),
        () = crate::components::apiserver::wait_for_signal() => {}
    }
    tracing::info!("shutting down");
    shutdown.cancel();
    Ok(run.await??)
}

/// The client verbs.
async fn run(cloud_config: &std::path::Path, verb: Verb) -> anyhow::Result<()> {
    let cloud = HttpCloud::from_cloud_config(cloud_config).map_err(|e| not_answering(&e))?;
    match verb {
        Verb::Instances => {
            let instances = cloud.list_instances().await.map_err(|e| failed(e, None))?;
            print_instances(&instances);
        }
        Verb::LoadBalancers => {
            let lbs = cloud
                .list_load_balancers()
                .await
                .map_err(|e| failed(e, None))?;
            let now = Timestamp::now();
            let rows = lbs.iter().map(|lb| {
                let ports: Vec<String> = lb
                    .ports
                    .iter()
                    .map(|p| format!("{}:{}/{}", p.port, p.node_port, p.protocol))
                    .collect();
                vec![
                    lb.name.clone(),
                    format!("{}/{}", lb.service.namespace, lb.service.name),
                    lb.state.as_str().to_owned(),
                    lb.ingress_ip.to_string(),
                    or_none(ports.join(",")),
                    or_none(lb.backends.join(",")),
                    apimachinery::duration::since(Some(lb.created_at), now),
                ]
            });
            print_table(
                "No load balancers.",
                &["NAME", "SERVICE", "STATE", "IP", "PORTS", "BACKENDS", "AGE"],
                rows,
            );
        }
        Verb::Routes => {
            let routes = cloud.list_all_routes().await.map_err(|e| failed(e, None))?;
            let now = Timestamp::now();
            let rows = routes.iter().map(|r| {
                vec![
                    r.name.clone(),
                    r.cluster.clone(),
                    r.target_node.clone(),
                    r.destination_cidr.clone(),
                    if r.blackhole { "blackhole" } else { "active" }.to_owned(),
                    apimachinery::duration::since(Some(r.created_at), now),
                ]
            });
            print_table(
                "No routes.",
                &["NAME", "CLUSTER", "TARGET", "DESTINATION", "STATE", "AGE"],
                rows,
            );
        }
        Verb::Launch { name, internal_ip } => {
            let existing = match cloud.get_instance(&name).await {
                Ok(i) => Some(i),
                Err(CloudError::InstanceNotFound) => None,
                Err(e) => return Err(failed(e, Some(&name))),
            };
            let i = cloud
                .launch_instance(&name, internal_ip)
                .await
                .map_err(|e| failed(e, Some(&name)))?;
            let what = if existing.as_ref().is_some_and(|e| e.id == i.id) {
                "exists"
            } else {
                "launched"
            };
            println!(
                "instance/{} {what} ({}, {}, {}, internal IP {})",
                i.name,
                i.id,
                i.zone,
                i.state.as_str(),
                i.internal_ip
            );
        }
        Verb::Stop { name } => {
            let i = cloud
                .stop_instance(&name)
                .await
                .map_err(|e| failed(e, Some(&name)))?;
            println!("instance/{} stopped ({})", i.name, i.id);
        }
        Verb::Start { name } => {
            let i = cloud
                .start_instance(&name)
                .await
                .map_err(|e| failed(e, Some(&name)))?;
            println!("instance/{} started ({})", i.name, i.id);
        }
        Verb::Delete { name } => {
            let i = cloud
                .delete_instance(&name)
                .await
                .map_err(|e| failed(e, Some(&name)))?;
            println!("instance/{} terminated ({})", i.name, i.id);
        }
        Verb::Fault { command } => fault(&cloud, command).await?,
    }
    Ok(())
}

/// `miniplane cloud fault ...`.
async fn fault(cloud: &HttpCloud, command: FaultCommand) -> anyhow::Result<()> {
    match command {
        FaultCommand::Set {
            api,
            fail_fraction,
            delay,
        } => {
            if fail_fraction.is_none() && delay.is_none() {
                return Err(anyhow!(
                    "nothing to set: give --fail-fraction and/or --delay"
                ));
            }
            let fault = Fault {
                api: api.into(),
                fail_fraction: fail_fraction.unwrap_or(0.0),
                delay_ms: delay.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            };
            cloud.set_fault(&fault).await.map_err(|e| failed(e, None))?;
            println!(
                "cloud fault on {}: {} (undo: miniplane cloud fault clear --api {})",
                fault.api,
                describe(&fault),
                fault.api
            );
        }
        FaultCommand::Clear { api } => {
            let api = api.map(FaultApi::from);
            cloud.clear_faults(api).await.map_err(|e| failed(e, None))?;
            match api {
                Some(api) => println!("cloud fault on {api} cleared"),
                None => println!("cloud faults cleared"),
            }
        }
        FaultCommand::List => {
            let faults = cloud.get_faults().await.map_err(|e| failed(e, None))?;
            let rows = faults.iter().map(|f| {
                vec![
                    f.api.to_string(),
                    f.fail_percentage(),
                    apimachinery::duration::go_duration(f.delay()),
                ]
            });
            print_table("No cloud faults in force.", &["API", "FAIL", "DELAY"], rows);
        }
    }
    Ok(())
}

fn print_instances(instances: &[CloudInstance]) {
    let now = Timestamp::now();
    let rows = instances.iter().map(|i| {
        vec![
            i.name.clone(),
            i.id.clone(),
            i.instance_type.clone(),
            i.zone.clone(),
            i.state.as_str().to_owned(),
            i.internal_ip.to_string(),
            i.external_ip.to_string(),
            apimachinery::duration::since(Some(i.launched_at), now),
        ]
    });
    print_table(
        "No instances.",
        &[
            "NAME",
            "ID",
            "TYPE",
            "ZONE",
            "STATE",
            "INTERNAL-IP",
            "EXTERNAL-IP",
            "AGE",
        ],
        rows,
    );
}

/// `50% of calls fail, 2s added to each call`.
fn describe(fault: &Fault) -> String {
    let mut parts = Vec::new();
    if fault.fail_fraction > 0.0 {
        parts.push(format!("{} of calls fail", fault.fail_percentage()));
    }
    if fault.delay_ms > 0 {
        parts.push(format!(
            "{} added to each call",
            apimachinery::duration::go_duration(fault.delay())
        ));
    }
    if parts.is_empty() {
        "none (cleared)".to_owned()
    } else {
        parts.join(", ")
    }
}

/// Prints `rows` under `header`, aligned as kubectl aligns its tables (each column as wide
/// as its widest cell, three spaces apart), or `empty` when there are none.
fn print_table(empty: &str, header: &[&str], rows: impl Iterator<Item = Vec<String>>) {
    let rows: Vec<Vec<String>> = rows.collect();
    if rows.is_empty() {
        println!("{empty}");
        return;
    }
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    let mut widths = vec![0; header.len()];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (n, (cell, width)) in row.iter().zip(&widths).enumerate() {
            if n + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}   "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    print!("{out}");
}

fn or_none(s: String) -> String {
    if s.is_empty() { "<none>".to_owned() } else { s }
}

/// `--fail-fraction`: a number from 0 to 1.
fn parse_fraction(s: &str) -> Result<f64, String> {
    let f: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if (0.0..=1.0).contains(&f) {
        Ok(f)
    } else {
        Err(format!("{s} is not between 0 and 1"))
    }
}

/// The one line for a cloud that cannot be found or reached.
fn not_answering(detail: &dyn std::fmt::Display) -> anyhow::Error {
    anyhow!(
        "the simulated cloud does not answer (is the cluster running? --cloud-config): {detail}"
    )
}

/// The one line for a failed call; `instance` names the instance the call was about.
fn failed(e: CloudError, instance: Option<&str>) -> anyhow::Error {
    match (e, instance) {
        (CloudError::Unavailable(detail), _) => not_answering(&detail),
        (CloudError::InstanceNotFound, Some(name)) => anyhow!("instance {name:?} not found"),
        (e, _) => anyhow!(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cloud_beside_kubeconfig_is_the_default_when_it_exists() {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let fallback = PathBuf::from(".miniplane/cloud/cloud-config.json");
        assert_eq!(default_cloud_config(None), fallback);
        assert_eq!(
            default_cloud_config(Some(kubeconfig.clone())),
            fallback,
            "no cloud beside the kubeconfig"
        );
        std::fs::create_dir(dir.path().join("cloud")).unwrap();
        std::fs::write(dir.path().join("cloud/cloud-config.json"), "{}").unwrap();
        assert_eq!(
            default_cloud_config(Some(kubeconfig)),
            dir.path().join("cloud/cloud-config.json")
        );
    }
}
