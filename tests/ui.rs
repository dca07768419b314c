//! The web UI (`/ui`) in a real headless Chromium, against a whole cluster
//! (`miniplane::Cluster`: API server, controller-manager, scheduler, 3 simulated nodes):
//!
//! * a 3-replica Deployment applied through the API appears on the board as three Running,
//!   Ready pod cards spread over the node columns, with the events of their scheduling; a
//!   card opens the pod's trace;
//! * the ownership tree shows Deployment → ReplicaSet (revision 1) → 3 Pods;
//! * the Deployment's "trace" link opens its trace: the spans from `create deployments` to
//!   the kubelet's pods Running and `deployment available`, causal order, each span's "what
//!   and why" on click, the time axis zoomed to a span's subtree; the replay slider shows the board at the trace's first write (no pod
//!   yet) and at its last (three Running pods); the time axis zooms (+, fit) and scrolls
//!   sideways, and no span name is cut;
//! * a crash-looping pod's card is red and says `CrashLoopBackOff`, as kubectl's STATUS does;
//! * the Deployment's "history" link lists its kept versions with writers and diffs, and the
//!   replay shows it as it was created.
//!
//! Screenshots of each view go to `$CARGO_TARGET_TMPDIR/ui/`, and to `docs/ui/` with
//! `UPDATE_SCREENSHOTS=1` (as `UPDATE_GOLDEN=1` rewrites golden files).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::browser::Browser;
use crate::support::{DEADLINE, http};

/// Saves a screenshot of the current view as `<name>.png`.
fn screenshot(browser: &Browser, name: &str) {
    let png = browser.screenshot();
    let mut dirs = vec![PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ui")];
    if std::env::var_os("UPDATE_SCREENSHOTS").is_some() {
        dirs.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/ui"));
    }
    for dir in dirs {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), &png).unwrap();
    }
}

fn addr(url: &str) -> SocketAddr {
    url.trim_start_matches("http://").parse().unwrap()
}

fn create_deployment(api: SocketAddr, name: &str, replicas: u32) {
    let body = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": name, "image": "nginx:1.27"}]}
            }
        }
    });
    http::request(
        api,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        Some("application/json"),
        body.to_string().as_bytes(),
    )
    .unwrap()
    .expect_created();
}

fn replicaset_count(api: SocketAddr) -> usize {
    let list = http::request(
        api,
        "GET",
        "/apis/apps/v1/namespaces/default/replicasets",
        None,
        b"",
    )
    .unwrap()
    .json();
    list["items"].as_array().unwrap().len()
}

/// The spans a Deployment's trace must have, from the apply to the pods Running.
const SPINE: &[&str] = &[
    "create deployments",
    "sync deployment",
    "create replicasets",
    "sync replicaset",
    "create pods",
    "schedule pod",
    "create pods/binding",
    "kubelet sync pod",
    "patch pods/status",
    "deployment available",
];

#[test]
fn a_deployment_on_the_board_in_the_tree_and_in_its_trace() {
    let cluster = crate::support::cluster().nodes(3).start().unwrap();
    let api = addr(cluster.url());
    let browser = Browser::start(1280, 860);
    browser.navigate(&format!("{}/ui", cluster.url()));

    // The board: three node columns, Ready, live.
    browser.wait_for(
        "three Ready node columns and a live board",
        DEADLINE,
        "const cols = document.querySelectorAll('.node-col[data-node^=\"node-\"] .badge.ok');
         return cols.length === 3 && document.getElementById('status').textContent === 'live';",
    );

    create_deployment(api, "web", 3);
    let running = browser.wait_for(
        "three Running, Ready pod cards of web",
        DEADLINE,
        "const cards = [...document.querySelectorAll('.node-col .pod[data-phase=Running][data-ready=true]')]
           .filter(c => c.dataset.name.startsWith('web-'));
         return cards.length === 3 ? cards.map(c => c.closest('.node-col').dataset.node) : null;",
    );
    let mut nodes: Vec<&str> = running
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    nodes.sort();
    nodes.dedup();
    assert_eq!(
        nodes.len(),
        3,
        "the scheduler spreads the pods over the nodes: {running}"
    );
    browser.wait_for(
        "the Scheduled events of the three pods in the feed",
        DEADLINE,
        "return document.querySelectorAll('.board-side .event[data-reason=Scheduled]').length >= 3;",
    );
    screenshot(&browser, "board");

    // A pod card opens the pod's trace: the Deployment's, whose writes made the pod Running.
    browser.click(".board-main .pod[data-phase=Running]");
    browser.wait_for(
        "the trace of a pod, opened from its card",
        DEADLINE,
        "const t = document.querySelector('.trace-title');
         const names = [...document.querySelectorAll('.wf-row')].map(r => r.dataset.name);
         return t && t.textContent.includes('default/web') && names.includes('kubelet sync pod');",
    );

    // The ownership tree.
    browser.click("nav a[data-view=objects]");
    let revision = browser.wait_for(
        "Deployment web → its ReplicaSet → three pods",
        DEADLINE,
        "const d = document.querySelector('.deploy-obj[data-name=web]');
         const rs = d && d.querySelector('.rs-obj');
         return rs && rs.querySelectorAll('.pod-obj').length === 3 ? rs.querySelector('.chip.rev').textContent : null;",
    );
    assert_eq!(revision, "revision 1");
    screenshot(&browser, "objects");

    // Its trace, opened from the tree.
    browser.click(".deploy-obj[data-name=web] > .trace-link");
    let names = browser.wait_for(
        "the trace's waterfall from create deployments to deployment available",
        DEADLINE,
        &format!(
            "const names = [...document.querySelectorAll('.wf-row')].map(r => r.dataset.name);
             const title = document.querySelector('.trace-title');
             return title && title.textContent.includes('default/web → 201 Created')
               && {SPINE:?}.every(n => names.includes(n)) ? names : null;"
        ),
    );
    let names: Vec<&str> = names
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(names[0], "create deployments", "the apply is the root");
    let first = |n: &str| names.iter().position(|x| *x == n).unwrap();
    assert!(
        first("create deployments") < first("sync deployment")
            && first("sync deployment") < first("create replicasets")
            && first("create replicasets") < first("create pods")
            && first("create pods") < first("schedule pod")
            && first("schedule pod") < first("kubelet sync pod"),
        "causal order: {names:?}"
    );
    let count = |n: &str| names.iter().filter(|x| **x == n).count();
    assert_eq!(count("create pods"), 3, "{names:?}");
    assert_eq!(count("create pods/binding"), 3, "{names:?}");
    let running = browser.execute(
        "return [...document.querySelectorAll('.wf-row[data-name=\"kubelet sync pod\"]')]
           .filter(r => r.title.includes('→ Running')).length;",
        json!([]),
    );
    assert_eq!(running, 3, "each pod's kubelet sync takes it to Running");

    // What and why, on click.
    browser.click(".wf-row[data-name='schedule pod']");
    let detail = browser.wait_for(
        "the schedule pod span's details",
        DEADLINE,
        "const d = document.querySelector('.span-detail');
         return d.querySelector('h3') && d.querySelector('h3').textContent.startsWith('schedule pod') ? d.innerText : null;",
    );
    let detail = detail.as_str().unwrap();
    assert!(
        detail.contains("kube-scheduler")
            && detail.contains("feasible")
            && detail.contains("caused by"),
        "{detail}"
    );

    // Zoomed to the scheduling and what it caused (binding, kubelet, status), then back.
    browser.click(".span-detail button.zoom");
    let zoomed = browser.wait_for(
        "the time axis fitted to the schedule pod span's subtree",
        DEADLINE,
        "const u = document.querySelector('.wf-axis .wf-unzoom');
         return u ? document.querySelectorAll('.wf-row.outside').length : null;",
    );
    assert!(
        zoomed.as_u64().unwrap() > 0,
        "spans outside the zoomed window are dimmed"
    );
    browser.click(".wf-axis .wf-unzoom");
    browser.wait_for(
        "the whole trace again",
        DEADLINE,
        "return !document.querySelector('.wf-axis .wf-unzoom') && !document.querySelector('.wf-row.outside');",
    );

    // The replay: the board as it was at the trace's first write, then at its last.
    let first_revision = browser.execute(
        "const s = document.querySelector('.replay-slider'); s.value = 0;
         s.dispatchEvent(new Event('input')); return s.max;",
        json!([]),
    );
    assert!(
        first_revision.as_str().unwrap().parse::<u32>().unwrap() > 5,
        "the trace's writes are replay steps: {first_revision}"
    );
    browser.wait_for(
        "the board at the Deployment's creation: nodes, no web pod yet",
        DEADLINE,
        "const b = document.querySelector('.snapshot .compact');
         const label = document.querySelector('.replay-label').textContent;
         return b && label.startsWith('write 1 of') && label.includes('create deployments')
           && b.querySelectorAll('.node-col[data-node^=\"node-\"]').length === 3
           && b.querySelectorAll('.pod').length === 0;",
    );
    browser.execute(
        "const s = document.querySelector('.replay-slider'); s.value = s.max;
         s.dispatchEvent(new Event('input'));",
        json!([]),
    );
    browser.wait_for(
        "the board at the trace's last write: three Running web pods",
        DEADLINE,
        "const b = document.querySelector('.snapshot .compact');
         const label = document.querySelector('.replay-label').textContent;
         const s = document.querySelector('.replay-slider');
         return b && label.startsWith(`write ${Number(s.max) + 1} of`)
           && b.querySelectorAll('.pod[data-phase=Running][data-ready=true]').length === 3;",
    );

    // A span that wrote a revision replays the cluster at that revision: right after the
    // first pod was created, it is on no node yet.
    browser.click(".wf-row[data-name='create pods']");
    browser.click(".span-detail button.show-revision");
    browser.wait_for(
        "the board at the first pod's creation: one web pod, not scheduled",
        DEADLINE,
        "const b = document.querySelector('.snapshot .compact');
         const label = document.querySelector('.replay-label').textContent;
         return b && label.includes('create pods:')
           && b.querySelectorAll('.node-col.unscheduled .pod').length === 1
           && b.querySelectorAll('.node-col[data-node^=\"node-\"] .pod').length === 0;",
    );
    screenshot(&browser, "trace");

    // The waterfall zooms: the time axis widens with +, the pane scrolls sideways, "fit"
    // brings it back; no span name is cut.
    let widths = "const w = document.querySelector('.waterfall');
         const track = w.querySelector('.wf-row .wf-track');
         return [track.getBoundingClientRect().width, w.scrollWidth, w.clientWidth];";
    let before = browser.execute(widths, json!([]));
    browser.click(".wf-zoom-in");
    browser.click(".wf-zoom-in");
    let zoomed = browser.execute(widths, json!([]));
    let width = |v: &Value, i: usize| v[i].as_f64().unwrap();
    assert!(
        width(&zoomed, 0) > width(&before, 0) * 2.0,
        "two steps of 1.5x: {before} → {zoomed}"
    );
    assert!(
        width(&zoomed, 1) > width(&zoomed, 2),
        "the zoomed waterfall scrolls sideways: {zoomed}"
    );
    assert_eq!(
        browser.execute(
            "return document.querySelector('.wf-scale').textContent;",
            json!([])
        ),
        "225%"
    );
    browser.click(".wf-zoom-reset");
    let fitted = browser.execute(widths, json!([]));
    assert!(
        (width(&fitted, 0) - width(&before, 0)).abs() < 2.0,
        "fit: {before} → {fitted}"
    );
    let cut = browser.execute(
        "return [...document.querySelectorAll('.wf-row .wf-name')].filter(n =>
           n.getBoundingClientRect().right > n.closest('.wf-label').getBoundingClientRect().right + 0.5)
           .map(n => n.textContent);",
        json!([]),
    );
    assert_eq!(cut, json!([]), "span names cut");

    // A crash-looping pod is drawn red with kubectl's STATUS, never green.
    let crashy = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "crashy", "annotations": {"miniplane.dev/fail": "crash"}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    });
    http::request(
        api,
        "POST",
        "/api/v1/namespaces/default/pods",
        Some("application/json"),
        crashy.to_string().as_bytes(),
    )
    .unwrap()
    .expect_created();
    browser.click("nav a[data-view=board]");
    let card = browser.wait_for(
        "the crash-looping pod's card, red, saying CrashLoopBackOff",
        DEADLINE,
        "const c = document.querySelector('.board-main .pod[data-name=crashy]');
         return c && c.dataset.status === 'CrashLoopBackOff'
           ? [c.dataset.tone, getComputedStyle(c).borderTopColor, c.querySelector('.pod-status').textContent, c.dataset.phase] : null;",
    );
    assert_eq!(
        card,
        json!(["bad", "rgb(192, 57, 43)", "CrashLoopBackOff", "Running"]),
        "phase Running, but crash-looping: red, like kubectl's STATUS"
    );
    let pod = http::request(
        api,
        "GET",
        "/api/v1/namespaces/default/pods/crashy",
        None,
        b"",
    )
    .unwrap()
    .json();
    assert_eq!(
        pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"], 1,
        "{pod}"
    );
    screenshot(&browser, "board-crashloop");

    // The Deployment's history, opened from the tree: its versions with their writers and
    // diffs, and the replay of the object at its creation.
    browser.click("nav a[data-view=objects]");
    browser.wait_for(
        "the Deployment's history link",
        DEADLINE,
        "return !!document.querySelector('.deploy-obj[data-name=web] > .history-link');",
    );
    browser.click(".deploy-obj[data-name=web] > .history-link");
    let rows = browser.wait_for(
        "the Deployment's kept versions, the controller's status writes among them",
        DEADLINE,
        "const rows = [...document.querySelectorAll('.hist-row')];
         const title = document.querySelector('.hist-title');
         return title && title.textContent === 'deployments.apps default/web' && rows.length >= 2
           ? rows.map(r => [r.dataset.type, r.querySelector('.hist-writer').textContent,
               [...r.querySelectorAll('.hist-diff li')].map(l => l.dataset.path)]) : null;",
    );
    let rows = rows.as_array().unwrap();
    assert_eq!(rows[0][0], "Created", "{rows:?}");
    // The controller's first status write makes its managedFields entry; later ones change
    // fields it owns already (its entry's time stays), shown as such.
    assert!(
        rows.iter()
            .any(|r| r[0] == "Updated" && r[1] == "kube-controller-manager (Update status)"),
        "the Deployment controller's first status write: {rows:?}"
    );
    assert!(
        rows.iter().any(|r| r[0] == "Updated"
            && r[2]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p == "status.availableReplicas")),
        "a status write making the pods available, with its diff: {rows:?}"
    );
    browser.click(".hist-row[data-type=Created] .hist-rev");
    let created = browser.wait_for(
        "the object as it was created, on the replay",
        DEADLINE,
        "const row = document.querySelector('.hist-row.picked');
         return row && row.dataset.type === 'Created'
           ? JSON.parse(document.querySelector('.hist-object').textContent) : null;",
    );
    assert_eq!(created["spec"]["replicas"], 3, "{created}");
    assert!(created["status"]["replicas"].is_null(), "{created}");
    assert!(
        created["metadata"].get("managedFields").is_none(),
        "{created}"
    );
    screenshot(&browser, "history");
}

/// The controllers panel against the admin API (docs/faults.md): the Pause button stops the
/// Deployment controller's workers, so Deployments created meanwhile pile up in its queue
/// (depth and keys shown); Step lets exactly one sync through; Resume drains the rest. A lab's
/// status shows with its checks, and in the header.
#[test]
fn pause_a_controller_and_see_its_queue_grow() {
    let cluster = crate::support::cluster().nodes(1).start().unwrap();
    let api = addr(cluster.url());
    let browser = Browser::start(1280, 860);
    browser.navigate(&format!("{}/ui#/controllers", cluster.url()));

    let depth = |row: &str| {
        format!(
            "const r = document.querySelector('tr[data-controller=deployment]');
             return r && {row} ? Number(r.querySelector('td.depth').textContent) : null;"
        )
    };
    browser.wait_for(
        "the deployment controller's row with a Pause button",
        DEADLINE,
        &depth("r.querySelector('button[data-action=pause]')"),
    );
    browser.click("button[data-action=pause][data-controller=deployment]");
    browser.wait_for(
        "the deployment controller paused",
        DEADLINE,
        &depth("r.classList.contains('paused') && r.querySelector('button[data-action=step]')"),
    );

    // The pause reaches the controller-manager through its watch of the faults ConfigMap,
    // which may arrive after the button already shows "paused": a Deployment created before
    // then is synced at once. Create probes until one stays queued: then the workers are
    // surely paused.
    let queued = |key: &str| {
        format!(
            "const r = document.querySelector('tr[data-controller=deployment]');
             return r && [...r.querySelectorAll('code.key')].some(k => k.textContent === '{key}');"
        )
    };
    let mut probes = 0;
    loop {
        probes += 1;
        assert!(
            probes <= 5,
            "the pause never reached the controller-manager"
        );
        create_deployment(api, &format!("probe-{probes}"), 1);
        if browser
            .poll(
                Duration::from_secs(3),
                &queued(&format!("default/probe-{probes}")),
            )
            .is_some()
        {
            break;
        }
    }
    for name in ["a", "b", "c"] {
        create_deployment(api, name, 1);
    }
    browser.wait_for(
        "three more Deployments queued behind the paused workers",
        DEADLINE,
        &depth(&format!(
            "Number(r.querySelector('td.depth').textContent) >= 4
             && ['default/a', 'default/b', 'default/c', 'default/probe-{probes}'].every(k => r.innerText.includes(k))"
        )),
    );
    screenshot(&browser, "controllers");

    let syncs = |r: &str| {
        format!(
            "const r = document.querySelector('tr[data-controller=deployment]');
             return r && {r} ? Number(r.querySelector('td.syncs').textContent) : null;"
        )
    };
    let before = browser.execute(&syncs("true"), json!([]));
    let replicasets_before = replicaset_count(api);
    browser.click("button[data-action=step][data-controller=deployment]");
    // The stepped key is synced once (its new ReplicaSet's event queues it again: the
    // depth goes back up, the keys merge).
    browser.wait_for(
        "one step: exactly one more sync",
        DEADLINE,
        &syncs(&format!(
            "Number(r.querySelector('td.syncs').textContent) === {before} + 1
             && r.querySelector('td.in-flight').textContent === '0'"
        )),
    );
    assert_eq!(
        replicaset_count(api),
        replicasets_before + 1,
        "the step synced exactly one Deployment, which made its ReplicaSet"
    );

    browser.click("button[data-action=resume][data-controller=deployment]");
    browser.wait_for(
        "resumed: the queue drained",
        DEADLINE,
        &depth("r.querySelector('button[data-action=pause]') && Number(r.querySelector('td.depth').textContent) === 0"),
    );

    // A lab reports its status; the panel and the header show the step and its checks.
    let lab = json!({
        "lab": "03-workqueue", "title": "The workqueue", "step": 2, "steps": 4,
        "stepTitle": "Pile up changes",
        "checks": [
            {"step": 1, "name": "paused", "description": "the deployment controller is paused", "passed": true},
            {"step": 2, "name": "merged", "description": "three changes wait in the queue", "passed": false,
             "message": "deployment default/web: spec.replicas is 1, want 5"}
        ],
        "done": false, "checkedAt": "2026-11-30T15:40:01Z"
    });
    let put = http::request(
        api,
        "PUT",
        "/miniplane/v1/lab",
        Some("application/json"),
        lab.to_string().as_bytes(),
    )
    .unwrap();
    assert_eq!(put.status, 200, "{}", put.text());
    let shown = browser.wait_for(
        "the lab's step and checks",
        DEADLINE,
        "const l = document.querySelector('.lab-status[data-lab=\"03-workqueue\"]');
         const badge = document.getElementById('lab-badge');
         return l && !badge.hidden ? [l.innerText, badge.textContent] : null;",
    );
    let (panel, badge) = (shown[0].as_str().unwrap(), shown[1].as_str().unwrap());
    assert!(
        panel.contains("step 2 of 4") && panel.contains("Pile up changes"),
        "{panel}"
    );
    assert!(
        panel.contains("✓ the deployment controller is paused")
            && panel.contains("✗ three changes wait in the queue")
            && panel.contains("spec.replicas is 1, want 5"),
        "{panel}"
    );
    assert_eq!(badge, "The workqueue: step 2/4, 0/1 checks pass");
}

/// Retries folded in the trace view as `miniplane trace` folds them: with half of the
/// controllers' ReplicaSet writes answered 409 Conflict (a `FailWrites` fault), a
/// Deployment's trace has runs of retries; each is one row, `× N retries (409 Conflict)`,
/// that a click opens to every attempt and closes again.
#[test]
fn retries_fold_into_one_row_that_a_click_opens() {
    let cluster = crate::support::cluster().nodes(3).start().unwrap();
    let api = addr(cluster.url());
    let fault = json!({"name": "conflicts", "kind": "FailWrites", "code": 409, "fraction": 0.5,
                       "resource": "replicasets", "component": "kube-controller-manager"});
    http::request(
        api,
        "POST",
        "/miniplane/v1/faults",
        Some("application/json"),
        fault.to_string().as_bytes(),
    )
    .unwrap()
    .expect_created();
    create_deployment(api, "flaky", 3);
    let browser = Browser::start(1280, 860);
    browser.navigate(&format!(
        "{}/ui#/trace/deployments/default/flaky",
        cluster.url()
    ));
    let hidden = browser.wait_for(
        "a fold row of 409 retries in the trace of flaky",
        DEADLINE,
        "const f = document.querySelector('.wf-row.fold');
         return f && f.title.includes('409 Conflict') && !document.querySelector('.wf-row.unfolded')
           ? f.title : null;",
    );
    assert!(hidden.as_str().unwrap().contains("retr"), "{hidden}");
    let title = browser.execute(
        "return document.querySelector('.trace-title').textContent;",
        json!([]),
    );
    assert!(
        title.as_str().unwrap().contains("in folded retries"),
        "{title}"
    );
    let (all, shown) = (
        "return document.querySelectorAll('.wf-row').length;",
        "return document.querySelectorAll('.wf-row.unfolded').length;",
    );
    let before = browser.execute(all, json!([]));
    browser.click(".wf-row.fold");
    let opened = browser.wait_for(
        "the fold opened: its attempts as rows",
        DEADLINE,
        "const n = document.querySelectorAll('.wf-row.unfolded').length;
         return n > 0 && document.querySelector('.wf-row.fold.open') ? n : null;",
    );
    assert_eq!(
        browser.execute(all, json!([])).as_u64().unwrap(),
        before.as_u64().unwrap() + opened.as_u64().unwrap(),
        "opening a fold adds exactly the rows it hid"
    );
    screenshot(&browser, "trace-fold");
    browser.click(".wf-row.fold.open");
    assert_eq!(browser.execute(shown, json!([])), 0, "closed again");
}

/// The header's clock on a cluster with a virtual one: its time and "paused"; an advance
/// shows where it is headed, then the time it reached.
#[test]
fn the_header_shows_the_virtual_clock_as_it_moves() {
    let cluster = crate::support::cluster()
        .nodes(0)
        .controller_manager(false)
        .scheduler(false)
        .virtual_clock(0.0)
        .start()
        .unwrap();
    let api = addr(cluster.url());
    let browser = Browser::start(1280, 400);
    browser.navigate(&format!("{}/ui#/board", cluster.url()));
    let shown_clock = "const c = document.getElementById('clock');
         return c && !c.hidden ? c.textContent : null;";
    let first = browser.wait_for("the header's clock", DEADLINE, shown_clock);
    let first = first.as_str().unwrap().to_owned();
    assert!(
        first.starts_with("⏱ ") && first.ends_with(" · paused"),
        "{first}"
    );
    let post = http::request(
        api,
        "POST",
        "/miniplane/v1/clock",
        Some("application/json"),
        br#"{"advance":{"by":"2m","speed":30}}"#,
    )
    .unwrap();
    assert_eq!(post.status, 200, "{}", post.text());
    let to = post.json()["advancingTo"].as_str().unwrap().to_owned();
    let shown_time = to.replace('T', " ");
    let shown_time = shown_time
        .split('.')
        .next()
        .unwrap()
        .trim_end_matches('Z')
        .to_owned();
    let advancing = browser.wait_for(
        "the clock advancing",
        DEADLINE,
        "const c = document.getElementById('clock').textContent;
         return c.includes('advancing to') ? c : null;",
    );
    assert!(
        advancing
            .as_str()
            .unwrap()
            .ends_with(&format!("advancing to {shown_time}")),
        "{advancing}"
    );
    screenshot(&browser, "clock");
    let arrived = format!("⏱ {shown_time} · paused");
    browser.wait_for(
        "the clock arrived",
        DEADLINE,
        &format!(
            "const c = document.getElementById('clock').textContent;
             return c === {} ? c : null;",
            json!(arrived)
        ),
    );
}
