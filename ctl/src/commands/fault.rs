//! `miniplane fault ...`: breaks a running cluster on purpose and undoes it (`docs/faults.md`).
//! Every verb prints the fault's name; `miniplane fault clear NAME` undoes it.
//!
//! No kubectl counterpart: this is the admin API of miniplane's API server
//! ([`miniplane::admin_client::AdminClient`]).

use std::path::PathBuf;
use std::time::Duration;

use admin::{Fault, FaultSpec};
use anyhow::Context;
use miniplane::admin_client::AdminClient;

/// Where the API server is.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// Kubeconfig file (default: $KUBECONFIG, then `.miniplane/kubeconfig` if it exists, then
    /// ~/.kube/config).
    #[arg(long, value_name = "FILE", global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The API server's URL (overrides the kubeconfig).
    #[arg(long, value_name = "URL", global = true)]
    pub master: Option<String>,
}

impl ClusterArgs {
    /// The client source these flags choose.
    pub fn source(&self) -> client::ClusterSource {
        let local = PathBuf::from(".miniplane/kubeconfig");
        match (&self.master, &self.kubeconfig) {
            (Some(url), _) => client::ClusterSource::Url(url.clone()),
            (None, Some(path)) => client::ClusterSource::Kubeconfig(path.clone()),
            (None, None) if std::env::var_os("KUBECONFIG").is_none() && local.exists() => {
                client::ClusterSource::Kubeconfig(local)
            }
            (None, None) => client::ClusterSource::Infer,
        }
    }

    /// A client of the admin API.
    pub async fn admin(&self) -> anyhow::Result<AdminClient> {
        let config = client::ClientConfig::new(self.source()).user_agent(admin::FIELD_MANAGER);
        let client = client::build_client(&config)
            .await
            .context("reading the kubeconfig")?;
        client.apiserver_version().await.context(
            "the API server does not answer (is the cluster running? --kubeconfig, --master)",
        )?;
        Ok(AdminClient::new(client))
    }
}

/// `miniplane fault`.
#[derive(Debug, clap::Args)]
pub struct FaultArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(subcommand)]
    command: FaultCommand,
}

#[derive(Debug, clap::Subcommand)]
enum FaultCommand {
    /// Lists the faults in force and the controllers' work queues.
    List,
    /// Stops a node's heartbeats (its kubelet "dies"): NotReady, taints, eviction follow.
    StopHeartbeats {
        /// The node.
        node: String,
    },
    /// Removes a node: its kubelet stops and its Node object is deleted.
    RemoveNode {
        /// The node.
        node: String,
    },
    /// Pauses a controller: its workers take nothing from its work queue.
    Pause {
        /// deployment, replicaset, endpoint, endpointslice, garbagecollector, namespace, nodeipam,
        /// serviceaccount, clusterrole-aggregation, root-ca-cert-publisher, csrsigning
        /// (kube-controller-manager) or cloud-node,
        /// service (cloud-controller-manager).
        controller: String,
    },
    /// Resumes a paused controller.
    Resume {
        /// The controller.
        controller: String,
    },
    /// Lets a paused controller process the next key(s) of its queue.
    Step {
        /// The controller.
        controller: String,
        /// How many keys.
        #[arg(short = 'n', long, default_value_t = 1)]
        count: u64,
    },
    /// Delays and/or drops the watch events the API server sends to one component.
    Watch {
        /// The component (User-Agent program): kube-controller-manager, kube-scheduler, kubelet.
        #[arg(long)]
        component: String,
        /// Only watches of this resource (plural, e.g. pods).
        #[arg(long)]
        resource: Option<String>,
        /// Delay per event (e.g. 500ms, 2s).
        #[arg(long, value_parser = apimachinery::duration::parse_duration)]
        delay: Option<Duration>,
        /// Fraction of events dropped (0 to 1).
        #[arg(long, default_value_t = 0.0)]
        drop: f64,
    },
    /// Answers a fraction of writes with 409 Conflict or 500 InternalError.
    FailWrites {
        /// 409 or 500.
        #[arg(long)]
        code: u16,
        /// Fraction of matching writes that fail (0 to 1).
        #[arg(long, default_value_t = 1.0)]
        fraction: f64,
        /// Only writes of this resource (plural).
        #[arg(long)]
        resource: Option<String>,
        /// Only writes from this component (User-Agent program).
        #[arg(long)]
        component: Option<String>,
    },
    /// Stops a component (controller-manager, scheduler, kubelet, cloud-controller-manager)
    /// until the fault is cleared.
    StopComponent {
        /// The component.
        component: String,
    },
    /// Clears a fault (by name), or all of them.
    Clear {
        /// The fault's name (see `miniplane fault list`).
        #[arg(required_unless_present = "all")]
        name: Option<String>,
        /// Clears every fault.
        #[arg(long, conflicts_with = "name")]
        all: bool,
    },
}

/// Runs `miniplane fault`.
pub fn main(args: FaultArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(args))
}

fn injected(fault: &Fault) {
    println!(
        "fault/{} injected: {} (undo: miniplane fault clear {})",
        fault.name,
        fault.spec.describe(),
        fault.name
    );
}

async fn run(args: FaultArgs) -> anyhow::Result<()> {
    let api = args.cluster.admin().await?;
    let inject = |spec: FaultSpec| {
        let api = api.clone();
        async move {
            spec.validate()?;
            let fault = api.inject(spec).await?;
            injected(&fault);
            anyhow::Ok(())
        }
    };
    match args.command {
        FaultCommand::List => {
            let faults = api.faults().await?;
            if faults.is_empty() {
                println!("No faults in force.");
            } else {
                println!("{:<32} {:<16} WHAT", "NAME", "KIND");
                for f in &faults {
                    println!("{:<32} {:<16} {}", f.name, f.spec.kind(), f.spec.describe());
                }
            }
            let controllers = api.controllers().await?;
            if !controllers.is_empty() {
                println!();
                println!(
                    "{:<18} {:<7} {:>6} {:>9} {:>8} {:>8} {:>6}",
                    "CONTROLLER", "PAUSED", "DEPTH", "INFLIGHT", "WAITING", "RETRIES", "SYNCS"
                );
                for c in controllers {
                    println!(
                        "{:<18} {:<7} {:>6} {:>9} {:>8} {:>8} {:>6}",
                        c.name, c.paused, c.depth, c.in_flight, c.waiting, c.retries, c.syncs
                    );
                }
            }
            Ok(())
        }
        FaultCommand::StopHeartbeats { node } => inject(FaultSpec::StopHeartbeats { node }).await,
        FaultCommand::RemoveNode { node } => inject(FaultSpec::RemoveNode { node }).await,
        FaultCommand::Pause { controller } => {
            injected(&api.pause(&controller).await?);
            Ok(())
        }
        FaultCommand::Resume { controller } => {
            let removed = api.resume(&controller).await?;
            match removed.first() {
                Some(f) => println!("fault/{} cleared: {controller} resumed", f.name),
                None => println!("controller {controller} was not paused"),
            }
            Ok(())
        }
        FaultCommand::Step { controller, count } => {
            let fault = api.step(&controller, count).await?;
            println!(
                "{controller}: {count} step(s) granted ({})",
                fault.spec.describe()
            );
            Ok(())
        }
        FaultCommand::Watch {
            component,
            resource,
            delay,
            drop,
        } => {
            let delay_ms = delay.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            inject(FaultSpec::WatchEvents {
                component,
                resource,
                delay_ms,
                drop_fraction: drop,
            })
            .await
        }
        FaultCommand::FailWrites {
            code,
            fraction,
            resource,
            component,
        } => {
            inject(FaultSpec::FailWrites {
                code,
                fraction,
                resource,
                component,
            })
            .await
        }
        FaultCommand::StopComponent { component } => {
            inject(FaultSpec::StopComponent { component }).await
        }
        FaultCommand::Clear { name, all } => {
            let cleared = if all {
                api.clear_all().await?
            } else {
                let name = name.unwrap_or_default();
                vec![api.clear(&name).await?]
            };
            if cleared.is_empty() {
                println!("No faults in force.");
            }
            for f in cleared {
                println!("fault/{} cleared", f.name);
            }
            Ok(())
        }
    }
}
