//! [`LabRunner`]: runs a lab's actions and checks against a running cluster. It holds no
//! state of its own (the `miniplane lab` verbs keep the current step in the lab's data
//! directory), so the same runner serves `lab start` (setup), `lab check`, `lab solve` and
//! the CI test that runs every lab in process.
//!
//! Actions that are commands run the real `miniplane` binary (or `kubectl`) with the lab's
//! kubeconfig, exactly as the student types them: a solution is also a worked example.
//!
//! The programs a command may run: `miniplane`, `kubectl`, `etcdctl` (with `ETCDCTL_API=3` and
//! `ETCDCTL_ENDPOINTS` set when the cluster serves its store over etcd's API, `etcdListen`),
//! and `sh -c '...'` for a line that needs a shell (`$(kubectl get ... -o jsonpath=...)`, a
//! pipe, a background job, a variable), with the same environment and `miniplane` first on
//! its `PATH`. When the cluster runs several API servers (`apiservers`), `APISERVER_1` to
//! `APISERVER_N` hold their URLs: `sh -c 'kubectl --server "$APISERVER_2" get pods'`.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use admin::{CheckResult, LabStatus};
use tokio::io::AsyncWriteExt;

use super::check::evaluate;
use super::snapshot::fetch;
use super::spec::{Action, CheckSpec, Lab};
use crate::admin_client::AdminClient;

/// How long `waitFor` and a solved step's checks may take to pass.
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long `lab check` gives a step's checks to pass before it reports them failing: the
/// student's last command may still be on its way through the cluster (an informer's event,
/// a controller's sync, a pod's start), as a Killercoda check is retried.
pub const CHECK_SETTLE: Duration = Duration::from_secs(5);

/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(100);

/// Starts an operator against the cluster of a kubeconfig; it keeps running (the host stops
/// it with the lab).
pub type OperatorStarter =
    std::sync::Arc<dyn Fn(&std::path::Path) -> Result<(), String> + Send + Sync>;

/// A lab on a running cluster.
pub struct LabRunner {
    /// The lab.
    pub lab: Lab,
    client: kube::Client,
    admin: AdminClient,
    kubeconfig: PathBuf,
    exe: PathBuf,
    /// Operators the `operator` action can start, by name.
    operators: std::collections::HashMap<String, OperatorStarter>,
    /// The cluster's etcd v3 endpoint, if it serves one.
    etcd_endpoint: Option<std::net::SocketAddr>,
    /// The URLs of the cluster's API servers, the kubeconfig's first (empty: not told).
    apiservers: Vec<String>,
}

/// Splits a command line as a shell would for simple quoting (`'...'`, `"..."`, `\ `).
pub fn split_command(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                if let Some(n) = chars.next() {
                    word.push(n);
                    in_word = true;
                }
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err(format!("{line:?}: unclosed quote"));
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// The variables naming a cluster's API servers, `APISERVER_1=<first URL>` to
/// `APISERVER_N=<last>`, when it runs more than one (none for one: the kubeconfig names it).
pub fn apiserver_env(urls: &[String]) -> Vec<(String, String)> {
    if urls.len() < 2 {
        return Vec::new();
    }
    urls.iter()
        .enumerate()
        .map(|(i, url)| (format!("APISERVER_{}", i + 1), url.clone()))
        .collect()
}

impl LabRunner {
    /// A runner for `lab` on the cluster `client` reaches, whose kubeconfig is `kubeconfig`;
    /// `exe` is the `miniplane` binary commands run.
    pub fn new(lab: Lab, client: kube::Client, kubeconfig: PathBuf, exe: PathBuf) -> Self {
        LabRunner {
            lab,
            admin: AdminClient::new(client.clone()),
            client,
            kubeconfig,
            exe,
            operators: std::collections::HashMap::new(),
            etcd_endpoint: None,
            apiservers: Vec::new(),
        }
    }

    /// Lets commands reach the cluster's etcd v3 endpoint at `addr` (`Cluster::etcd_endpoint`):
    /// they get `ETCDCTL_API=3` and `ETCDCTL_ENDPOINTS=addr`, so `etcdctl get ...` needs no
    /// flags.
    pub fn with_etcd_endpoint(mut self, addr: Option<std::net::SocketAddr>) -> Self {
        self.etcd_endpoint = addr;
        self
    }

    /// The cluster's etcd v3 endpoint, if it serves one.
    pub fn etcd_endpoint(&self) -> Option<std::net::SocketAddr> {
        self.etcd_endpoint
    }

    /// Lets commands reach each of the cluster's API servers (`Cluster::apiserver_urls`, the
    /// kubeconfig's first): when there are several, they get `APISERVER_1` to `APISERVER_N`
    /// ([`apiserver_env`]), so `kubectl --server "$APISERVER_2" get pods` asks the second.
    pub fn with_apiservers(mut self, urls: Vec<String>) -> Self {
        self.apiservers = urls;
        self
    }

    /// The URLs of the cluster's API servers, as [`LabRunner::with_apiservers`] set them.
    pub fn apiservers(&self) -> &[String] {
        &self.apiservers
    }

    /// Lets the `operator: NAME` action start `NAME` with `start`.
    pub fn with_operator(mut self, name: impl Into<String>, start: OperatorStarter) -> Self {
        self.operators.insert(name.into(), start);
        self
    }

    /// The admin API of the lab's cluster.
    pub fn admin(&self) -> &AdminClient {
        &self.admin
    }

    /// Runs the lab's setup.
    pub async fn setup(&self) -> Result<(), String> {
        for action in &self.lab.setup {
            self.run_action(action)
                .await
                .map_err(|e| format!("setup: {e}"))?;
        }
        Ok(())
    }

    async fn command(&self, line: &str, stdin: Option<&str>) -> Result<String, String> {
        let words = split_command(line)?;
        let (program, args) = words
            .split_first()
            .ok_or_else(|| "an empty command".to_string())?;
        let exe = match program.as_str() {
            "miniplane" => self.exe.clone(),
            "kubectl" | "etcdctl" | "sh" => PathBuf::from(program),
            other => {
                return Err(format!(
                    "{other}: only miniplane, kubectl, etcdctl and sh commands run in labs"
                ));
            }
        };
        let mut command = tokio::process::Command::new(&exe);
        if let Some(addr) = self.etcd_endpoint {
            command
                .env("ETCDCTL_API", "3")
                .env("ETCDCTL_ENDPOINTS", addr.to_string());
        }
        command.envs(apiserver_env(&self.apiservers));
        if program == "sh"
            && let Some(dir) = self.exe.parent()
        {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let dirs = std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(&path));
            if let Ok(joined) = std::env::join_paths(dirs) {
                command.env("PATH", joined);
            }
        }
        let mut child = command
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("RUST_LOG")
            .current_dir(&self.lab.dir)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("{line}: cannot run {}: {e}", exe.display()))?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes())
                .await
                .map_err(|e| format!("{line}: {e}"))?;
        }
        let out = child
            .wait_with_output()
            .await
            .map_err(|e| format!("{line}: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "`{line}` failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// Runs one action.
    pub async fn run_action(&self, action: &Action) -> Result<(), String> {
        match action {
            Action::Run(line) => self.command(line, None).await.map(drop),
            Action::Refused(line) => match self.command(line, None).await {
                Ok(_) => Err(format!(
                    "`{line}` succeeded, but it should have been refused"
                )),
                Err(e) if e.starts_with(&format!("`{line}` failed")) => Ok(()),
                Err(e) => Err(e),
            },
            Action::Apply(yaml) | Action::Create(yaml) => {
                let verb = if matches!(action, Action::Apply(_)) {
                    "miniplane apply"
                } else {
                    "kubectl create"
                };
                let trimmed = yaml.trim();
                if !trimmed.contains('\n') && self.lab.dir.join(trimmed).is_file() {
                    self.command(&format!("{verb} -f {trimmed}"), None).await
                } else {
                    self.command(&format!("{verb} -f -"), Some(yaml)).await
                }
                .map(drop)
            }
            Action::Fault(spec) => self
                .admin
                .inject(spec.clone())
                .await
                .map(drop)
                .map_err(|e| e.to_string()),
            Action::ClearFault(name) if name == "all" => self
                .admin
                .clear_all()
                .await
                .map(drop)
                .map_err(|e| e.to_string()),
            Action::ClearFault(name) => self
                .admin
                .clear(name)
                .await
                .map(drop)
                .map_err(|e| e.to_string()),
            Action::Step { controller, count } => self
                .admin
                .step(controller, count.unwrap_or(1))
                .await
                .map(drop)
                .map_err(|e| e.to_string()),
            Action::Operator(name) => match self.operators.get(name) {
                Some(start) => start(&self.kubeconfig),
                None => Err(format!("operator {name}: not available here")),
            },
            Action::WaitFor(check) => {
                let results = self
                    .wait_for(std::slice::from_ref(check.as_ref()), 0, WAIT_TIMEOUT)
                    .await?;
                match results.iter().find(|r| !r.passed) {
                    None => Ok(()),
                    Some(r) => Err(format!(
                        "waited {} s for {}: {}",
                        WAIT_TIMEOUT.as_secs(),
                        r.description,
                        r.message.as_deref().unwrap_or_default()
                    )),
                }
            }
        }
    }

    /// Evaluates `checks` (of step `step`, 0-based) once.
    pub async fn evaluate(
        &self,
        checks: &[CheckSpec],
        step: usize,
    ) -> Result<Vec<CheckResult>, String> {
        let refs: Vec<&CheckSpec> = checks.iter().collect();
        let snapshot = fetch(&self.client, &self.admin, &refs).await?;
        Ok(checks
            .iter()
            .map(|c| {
                let outcome = evaluate(&c.check, &snapshot);
                CheckResult {
                    step: step + 1,
                    name: c.name.clone(),
                    description: c.description.clone(),
                    passed: outcome.is_ok(),
                    message: outcome.err(),
                }
            })
            .collect())
    }

    /// The results of step `step`'s checks (0-based).
    pub async fn check_step(&self, step: usize) -> Result<Vec<CheckResult>, String> {
        let s = self
            .lab
            .steps
            .get(step)
            .ok_or_else(|| format!("the lab has {} steps", self.lab.steps.len()))?;
        self.evaluate(&s.checks, step).await
    }

    /// The results of step `step`'s checks once they all pass, or after [`CHECK_SETTLE`]
    /// (what `lab check` reports).
    pub async fn check_step_settled(&self, step: usize) -> Result<Vec<CheckResult>, String> {
        let s = self
            .lab
            .steps
            .get(step)
            .ok_or_else(|| format!("the lab has {} steps", self.lab.steps.len()))?;
        self.wait_for(&s.checks, step, CHECK_SETTLE).await
    }

    /// Looks again until every check of `checks` passes or `timeout` ends; the last results.
    pub async fn wait_for(
        &self,
        checks: &[CheckSpec],
        step: usize,
        timeout: Duration,
    ) -> Result<Vec<CheckResult>, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let results = self.evaluate(checks, step).await?;
            if results.iter().all(|r| r.passed) || Instant::now() >= deadline {
                return Ok(results);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Runs step `step`'s solution, then waits until its checks pass; the final results.
    pub async fn solve_step(&self, step: usize) -> Result<Vec<CheckResult>, String> {
        let s = self
            .lab
            .steps
            .get(step)
            .ok_or_else(|| format!("the lab has {} steps", self.lab.steps.len()))?;
        for action in &s.solution {
            self.run_action(action)
                .await
                .map_err(|e| format!("step {} solution: {e}", step + 1))?;
        }
        self.wait_for(&s.checks, step, WAIT_TIMEOUT).await
    }

    /// The lab's status with step `step` (0-based; `steps.len()` when done) current and its
    /// results `current`; earlier steps count as passed.
    pub fn status(&self, step: usize, current: &[CheckResult], lang: &str) -> LabStatus {
        let mut checks: Vec<CheckResult> = Vec::new();
        for (i, s) in self.lab.steps.iter().enumerate().take(step) {
            checks.extend(s.checks.iter().map(|c| CheckResult {
                step: i + 1,
                name: c.name.clone(),
                description: c.description.clone(),
                passed: true,
                message: None,
            }));
        }
        checks.extend(current.iter().cloned());
        let done = step >= self.lab.steps.len();
        LabStatus {
            lab: self.lab.name.clone(),
            title: self.lab.title(lang).to_string(),
            step: (step + 1).min(self.lab.steps.len()),
            steps: self.lab.steps.len(),
            step_title: self
                .lab
                .steps
                .get(step)
                .map(|s| s.title(lang).to_string())
                .unwrap_or_default(),
            checks,
            done,
            checked_at: jiff::Timestamp::now().to_string(),
        }
    }

    /// Publishes `status` to the API server (for the web UI); failures are logged only.
    pub async fn publish(&self, status: &LabStatus) {
        if let Err(e) = self.admin.put_lab(status).await {
            tracing::debug!(error = %e, "lab status not published");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{apiserver_env, split_command};

    #[test]
    fn several_apiservers_are_numbered_from_one() {
        assert!(apiserver_env(&["http://127.0.0.1:6443".to_owned()]).is_empty());
        let urls = ["http://127.0.0.1:6443", "http://127.0.0.1:6444"].map(str::to_owned);
        assert_eq!(
            apiserver_env(&urls),
            [
                ("APISERVER_1".to_owned(), urls[0].clone()),
                ("APISERVER_2".to_owned(), urls[1].clone())
            ]
        );
    }

    #[test]
    fn commands_split_like_a_shell() {
        assert_eq!(
            split_command(r#"miniplane scale deployment web --replicas 5"#).expect("valid"),
            ["miniplane", "scale", "deployment", "web", "--replicas", "5"]
        );
        assert_eq!(
            split_command(r#"kubectl patch deploy web -p '{"spec": {"paused": true}}'"#)
                .expect("valid"),
            [
                "kubectl",
                "patch",
                "deploy",
                "web",
                "-p",
                r#"{"spec": {"paused": true}}"#
            ]
        );
        assert!(split_command("kubectl 'open").is_err());
    }
}
