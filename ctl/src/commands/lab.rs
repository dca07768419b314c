//! `miniplane lab list | start NAME | status | check | hint | solve | reset` (see
//! `docs/labs.md`). `start` runs the lab's cluster in the foreground (like `up`) in
//! `.miniplane/labs/<NAME>/`, runs the setup and keeps checking the current step for the web
//! UI; the other verbs, from another terminal, read the lab's state file there
//! (`lab-state.json`: the lab, its current step, hints shown) and talk to its cluster.

use std::path::{Path, PathBuf};
use std::time::Duration;

use admin::CheckResult;
use anyhow::{Context, bail};
use miniplane::lab::{Lab, LabRunner, load, load_all};
use serde::{Deserialize, Serialize};

/// Where labs' clusters and state live.
const LABS_DATA: &str = ".miniplane/labs";

/// `miniplane lab`.
#[derive(Debug, clap::Args)]
pub struct LabArgs {
    /// The labs' directory (default: $MINIPLANE_LABS, else ./labs, else the source tree's).
    #[arg(long, value_name = "DIR", global = true)]
    labs: Option<PathBuf>,
    /// Language of the texts: en or ko.
    #[arg(long, default_value = "en", global = true)]
    lang: String,
    #[command(subcommand)]
    command: LabCommand,
}

#[derive(Debug, clap::Subcommand)]
enum LabCommand {
    /// Lists the labs.
    List,
    /// Starts a fresh cluster for a lab, runs its setup, and serves it until Ctrl-C.
    Start {
        /// The lab (e.g. 03-workqueue, or just 3).
        name: String,
        /// Runs every component as its own process (as `up --separate`): a stopped component
        /// is then a killed process.
        #[arg(long)]
        separate: bool,
    },
    /// Shows the current step and its task.
    Status,
    /// Checks the current step (giving the cluster a few seconds to settle); moves on when
    /// every check passes, exits with status 1 when one fails.
    Check,
    /// Shows the next hint for the current step.
    Hint,
    /// Does the current step for you (every remaining step with --all).
    Solve {
        /// Solves every remaining step.
        #[arg(long)]
        all: bool,
    },
    /// Clears faults, deletes the default namespace's workloads and runs the setup again.
    Reset,
}

/// What `lab-state.json` keeps.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct State {
    lab: String,
    /// Current step, 0-based (`steps.len()`: done).
    step: usize,
    /// Hints of the current step shown so far.
    hints: usize,
}

fn labs_root(flag: Option<&PathBuf>) -> PathBuf {
    if let Some(dir) = flag {
        return dir.clone();
    }
    if let Some(dir) = std::env::var_os("MINIPLANE_LABS") {
        return PathBuf::from(dir);
    }
    let local = PathBuf::from("labs");
    if local.join("01-declarative").is_dir() {
        return local;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../labs")
}

fn find_lab(root: &Path, name: &str) -> anyhow::Result<Lab> {
    let labs = load_all(root).map_err(anyhow::Error::msg)?;
    let wanted = name.trim_start_matches('0');
    labs.into_iter()
        .find(|l| {
            l.name == name
                || l.name.split('-').next().map(|n| n.trim_start_matches('0')) == Some(wanted)
        })
        .with_context(|| {
            format!(
                "no lab {name:?} in {} (see `miniplane lab list`)",
                root.display()
            )
        })
}

/// The lab's data directory, absolute (commands run in the lab's own directory).
fn data_dir(lab: &str) -> PathBuf {
    let dir = PathBuf::from(LABS_DATA).join(lab);
    std::path::absolute(&dir).unwrap_or(dir)
}

fn current() -> anyhow::Result<State> {
    let file = PathBuf::from(LABS_DATA).join("current");
    let name = std::fs::read_to_string(&file)
        .with_context(|| "no lab started here (miniplane lab start NAME)".to_string())?;
    read_state(name.trim())
}

fn read_state(lab: &str) -> anyhow::Result<State> {
    let file = data_dir(lab).join("lab-state.json");
    let text = std::fs::read_to_string(&file).with_context(|| file.display().to_string())?;
    Ok(serde_json::from_str(&text)?)
}

fn write_state(state: &State) -> anyhow::Result<()> {
    let file = data_dir(&state.lab).join("lab-state.json");
    std::fs::write(&file, serde_json::to_vec_pretty(state)?)
        .with_context(|| file.display().to_string())
}

fn exe() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("miniplane"))
}

async fn runner(lab: Lab) -> anyhow::Result<LabRunner> {
    let kubeconfig = data_dir(&lab.name).join("kubeconfig");
    let source = client::ClusterSource::Kubeconfig(kubeconfig.clone());
    let client =
        client::build_client(&client::ClientConfig::new(source).user_agent("miniplane-lab"))
            .await
            .context("reading the lab's kubeconfig")?;
    client.apiserver_version().await.with_context(|| {
        format!(
            "the cluster of lab {} does not answer: is `miniplane lab start {}` still running?",
            lab.name, lab.name
        )
    })?;
    let dir = data_dir(&lab.name);
    // The etcd endpoint `lab start` wrote down, if the lab's cluster serves one.
    let etcd = std::fs::read_to_string(dir.join(ETCD_ENDPOINT_FILE))
        .ok()
        .and_then(|text| text.trim().parse().ok());
    // The API servers' URLs `lab start` wrote down.
    let apiservers = std::fs::read_to_string(dir.join(APISERVERS_FILE))
        .map(|text| text.lines().map(str::to_owned).collect())
        .unwrap_or_default();
    Ok(LabRunner::new(lab, client, kubeconfig, exe())
        .with_operator(
            "website-operator",
            example_operator("website-operator", dir),
        )
        .with_etcd_endpoint(etcd)
        .with_apiservers(apiservers))
}

/// The file of a lab's data dir holding its cluster's etcd endpoint (`127.0.0.1:PORT`), for
/// `lab check` and `lab solve` in another terminal.
const ETCD_ENDPOINT_FILE: &str = "etcd-endpoint";

/// The file of a lab's data dir holding its API servers' URLs, one a line, the first the
/// kubeconfig's (for `lab check` and `lab solve`: `APISERVER_1`, `APISERVER_2`, ...).
const APISERVERS_FILE: &str = "apiservers";

/// Starts the example operator `name` (built by `cargo build -p ctl --example NAME`, next to
/// this binary in `examples/`) in the background, its log and pid in the lab's data dir;
/// `lab start` stops it with the lab.
fn example_operator(name: &'static str, dir: PathBuf) -> miniplane::lab::runner::OperatorStarter {
    std::sync::Arc::new(move |kubeconfig: &Path| {
        let binary = exe()
            .parent()
            .map(|d| d.join("examples").join(name))
            .filter(|p| p.is_file())
            .ok_or_else(|| format!("{name} is not built: cargo build -p ctl --example {name}"))?;
        let log =
            std::fs::File::create(dir.join(format!("{name}.log"))).map_err(|e| e.to_string())?;
        let child = std::process::Command::new(&binary)
            .arg(kubeconfig)
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("{}: {e}", binary.display()))?;
        std::fs::write(dir.join("operator.pid"), child.id().to_string()).map_err(|e| e.to_string())
    })
}

/// Stops the operator `lab solve` started, if any (SIGTERM to the pid it recorded).
fn stop_operator(dir: &Path) {
    let file = dir.join("operator.pid");
    if let Some(pid) = std::fs::read_to_string(&file)
        .ok()
        .and_then(|s| s.trim().parse::<libc::pid_t>().ok())
    {
        #[allow(unsafe_code)]
        // SAFETY: `kill` touches no memory of ours; the pid is the operator this lab started.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    let _ = std::fs::remove_file(file);
}

fn print_results(results: &[CheckResult]) {
    for r in results {
        let mark = if r.passed { "✓" } else { "✗" };
        println!("  {mark} {}", r.description);
    }
    if let Some(first) = results.iter().find(|r| !r.passed) {
        println!();
        println!(
            "  missing: {}",
            first.message.as_deref().unwrap_or_default()
        );
    }
}

fn print_step(lab: &Lab, step: usize, lang: &str) {
    match lab.steps.get(step) {
        Some(s) => {
            println!("Step {}/{}: {}", step + 1, lab.steps.len(), s.title(lang));
            println!();
            println!("{}", s.task(lang).trim());
        }
        None => println!("Lab {} is done. Well done!", lab.name),
    }
}

/// Runs `miniplane lab`.
pub fn main(args: LabArgs) -> anyhow::Result<()> {
    let root = labs_root(args.labs.as_ref());
    let lang = match args.lang.as_str() {
        "en" | "ko" => args.lang.clone(),
        other => bail!("--lang {other}: supported values: en, ko"),
    };
    if let LabCommand::Start { name, separate } = &args.command {
        return start(&find_lab(&root, name)?, &lang, *separate);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        if let LabCommand::List = args.command {
            for lab in load_all(&root).map_err(anyhow::Error::msg)? {
                println!("{:<28} {}", lab.name, lab.title(&lang));
            }
            return Ok(());
        }
        let mut state = current()?;
        let lab = load(&root.join(&state.lab)).map_err(anyhow::Error::msg)?;
        let runner = runner(lab).await?;
        let lab = &runner.lab;
        match args.command {
            LabCommand::List | LabCommand::Start { .. } => Ok(()),
            LabCommand::Status => {
                println!("Lab {}: {}", lab.name, lab.title(&lang));
                print_step(lab, state.step, &lang);
                Ok(())
            }
            LabCommand::Check => {
                if state.step >= lab.steps.len() {
                    print_step(lab, state.step, &lang);
                    return Ok(());
                }
                let results = runner
                    .check_step_settled(state.step)
                    .await
                    .map_err(anyhow::Error::msg)?;
                println!(
                    "Step {}/{}: {}",
                    state.step + 1,
                    lab.steps.len(),
                    lab.steps[state.step].title(&lang)
                );
                print_results(&results);
                let failed = results.iter().filter(|r| !r.passed).count();
                if failed == 0 {
                    state.step += 1;
                    state.hints = 0;
                    write_state(&state)?;
                    println!();
                    print_step(lab, state.step, &lang);
                }
                runner
                    .publish(&runner.status(state.step, &results, &lang))
                    .await;
                // Scripts (and CI) read the verdict from the exit status.
                if failed > 0 {
                    bail!(
                        "step {}: {failed} of {} checks not met",
                        state.step + 1,
                        results.len()
                    );
                }
                Ok(())
            }
            LabCommand::Hint => {
                let Some(step) = lab.steps.get(state.step) else {
                    print_step(lab, state.step, &lang);
                    return Ok(());
                };
                let hints = step.hints(&lang);
                match hints.get(state.hints) {
                    Some(h) => {
                        println!("Hint {}/{}: {}", state.hints + 1, hints.len(), h.trim());
                        state.hints += 1;
                        write_state(&state)?;
                    }
                    None => println!("No more hints: `miniplane lab solve` shows the way."),
                }
                Ok(())
            }
            LabCommand::Solve { all } => {
                loop {
                    if state.step >= lab.steps.len() {
                        break;
                    }
                    println!(
                        "Solving step {}: {}",
                        state.step + 1,
                        lab.steps[state.step].title(&lang)
                    );
                    for action in &lab.steps[state.step].solution {
                        println!("  {}", describe(action));
                    }
                    let results = runner
                        .solve_step(state.step)
                        .await
                        .map_err(anyhow::Error::msg)?;
                    print_results(&results);
                    if !results.iter().all(|r| r.passed) {
                        bail!("the solution did not make every check pass");
                    }
                    state.step += 1;
                    state.hints = 0;
                    write_state(&state)?;
                    if !all {
                        break;
                    }
                }
                println!();
                print_step(lab, state.step, &lang);
                Ok(())
            }
            LabCommand::Reset => {
                runner.admin().clear_all().await?;
                for kind in ["jobs", "deployments", "replicasets", "pods", "services"] {
                    let line = format!("kubectl delete {kind} --all --wait=false");
                    runner
                        .run_action(&miniplane::lab::spec::Action::Run(line))
                        .await
                        .map_err(anyhow::Error::msg)?;
                }
                runner.setup().await.map_err(anyhow::Error::msg)?;
                state.step = 0;
                state.hints = 0;
                write_state(&state)?;
                println!(
                    "Lab {} reset (faults cleared, workloads deleted, setup run again).",
                    lab.name
                );
                print_step(lab, 0, &lang);
                Ok(())
            }
        }
    })
}

/// One line for an action, as `lab solve` shows it.
fn describe(action: &miniplane::lab::spec::Action) -> String {
    use miniplane::lab::spec::Action;
    match action {
        Action::Run(line) => format!("$ {line}"),
        Action::Refused(line) => format!("$ {line}   (refused, as it should be)"),
        Action::Apply(yaml) if !yaml.trim().contains('\n') => {
            format!("$ miniplane apply -f {}", yaml.trim())
        }
        Action::Create(yaml) if !yaml.trim().contains('\n') => {
            format!("$ kubectl create -f {}", yaml.trim())
        }
        Action::Apply(_) => "$ miniplane apply -f - (the manifest in lab.yaml)".into(),
        Action::Create(_) => "$ kubectl create -f - (the manifest in lab.yaml)".into(),
        Action::Fault(spec) => format!("$ miniplane fault ... ({})", spec.describe()),
        Action::ClearFault(name) => format!("$ miniplane fault clear {name}"),
        Action::Step { controller, count } => {
            format!(
                "$ miniplane fault step {controller} -n {}",
                count.unwrap_or(1)
            )
        }
        Action::WaitFor(check) => format!("(wait until {})", check.description),
        Action::Operator(name) => format!("$ cargo run -p ctl --example {name} -- $KUBECONFIG &"),
    }
}

/// `lab start`: a fresh cluster in the lab's data dir, the setup, then checks every 2 s
/// (published for the web UI) until Ctrl-C.
fn start(lab: &Lab, lang: &str, separate: bool) -> anyhow::Result<()> {
    let dir = data_dir(&lab.name);
    std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
    let builder = miniplane::Cluster::builder()
        .data_dir(&dir)
        .fresh(true)
        .fsync(false);
    let mut builder = lab.cluster.configure(builder).on_progress(|p| {
        if matches!(p, miniplane::Progress::Exited { .. }) {
            eprintln!("{p}");
        }
    });
    if separate {
        builder = builder.separate(exe());
    }
    let cluster = builder.start()?;
    let state = State {
        lab: lab.name.clone(),
        step: 0,
        hints: 0,
    };
    write_state(&state)?;
    std::fs::write(PathBuf::from(LABS_DATA).join("current"), &lab.name)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let kubeconfig = cluster.kubeconfig_path().to_path_buf();
    let etcd = cluster.etcd_endpoint();
    let etcd_file = dir.join(ETCD_ENDPOINT_FILE);
    match etcd {
        Some(addr) => std::fs::write(&etcd_file, addr.to_string())?,
        None => {
            let _ = std::fs::remove_file(&etcd_file);
        }
    }
    let apiservers = cluster.apiserver_urls().to_vec();
    std::fs::write(dir.join(APISERVERS_FILE), apiservers.join("\n"))?;
    let apiserver_exports: Vec<String> = miniplane::lab::runner::apiserver_env(&apiservers)
        .into_iter()
        .map(|(name, url)| format!("{name}={url}"))
        .collect();
    let runner = LabRunner::new(lab.clone(), cluster.client(), kubeconfig.clone(), exe())
        .with_etcd_endpoint(etcd)
        .with_apiservers(apiservers);
    runtime.block_on(async {
        runner.setup().await.map_err(anyhow::Error::msg)?;
        println!("Lab {}: {}", lab.name, lab.title(lang));
        println!("Cluster: {} (kubeconfig {})", cluster.url(), kubeconfig.display());
        println!();
        match lab.readme(lang) {
            Ok(text) => println!("{}", text.trim()),
            Err(e) => eprintln!("miniplane: {e}"),
        }
        println!();
        print_step(lab, 0, lang);
        println!();
        println!("In another terminal: export KUBECONFIG={}; then `miniplane lab check` (hint, solve, status).", kubeconfig.display());
        if let Some(addr) = etcd {
            println!("For etcdctl: export ETCDCTL_API=3 ETCDCTL_ENDPOINTS={addr}");
        }
        if !apiserver_exports.is_empty() {
            println!(
                "For the API servers (kubectl --server \"$APISERVER_2\" get pods): export {}",
                apiserver_exports.join(" ")
            );
        }
        println!("Ctrl-C stops the lab.");
        let mut tick = tokio::time::interval(Duration::from_secs(2));
        // One listener for the whole loop: a Ctrl-C that arrives while a check runs is kept.
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        loop {
            tokio::select! {
                _ = &mut ctrl_c => break,
                () = cluster.stopped() => break,
                _ = tick.tick() => {
                    let Ok(state) = read_state(&lab.name) else { continue };
                    let results = if state.step < lab.steps.len() {
                        runner.check_step(state.step).await.unwrap_or_default()
                    } else {
                        Vec::new()
                    };
                    runner.publish(&runner.status(state.step, &results, lang)).await;
                }
            }
        }
        anyhow::Ok(())
    })?;
    stop_operator(&dir);
    cluster.stop()?;
    Ok(())
}
