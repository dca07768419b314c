//! The simulated cloud end to end: a real [`Server`] on a free port of 127.0.0.1 with its state
//! in a temporary directory, driven through [`HttpCloud`] as the cloud-controller-manager and
//! `miniplane cloud` drive it: the provider interface, the admin calls, a restart, faults and
//! a corrupt state file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use cloud::sim::{
    self, CloudInstance, Fault, FaultApi, HttpCloud, InstanceState, LoadBalancerState, Server,
    SimOptions,
};
use cloud::{CloudError, Interface, LoadBalancerPort, NodeAddress, NodeRef, Route, ServiceRef};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A running cloud and a client made from its `cloud-config.json`.
struct Running {
    cloud: HttpCloud,
    shutdown: CancellationToken,
    task: JoinHandle<sim::Result<()>>,
}

impl Running {
    async fn start(dir: &Path, delay: Duration) -> Running {
        let options = SimOptions {
            lb_provisioning_delay: delay,
            seed: Some(1),
        };
        let server = Server::bind(dir, "127.0.0.1:0".parse().unwrap(), options)
            .await
            .expect("bind");
        assert_eq!(server.cloud_config_path(), dir.join("cloud-config.json"));
        let config = std::fs::read_to_string(server.cloud_config_path()).unwrap();
        let endpoint = format!("http://{}", server.local_addr());
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&config).unwrap(),
            serde_json::json!({ "endpoint": endpoint })
        );
        let cloud = HttpCloud::from_cloud_config(&server.cloud_config_path()).expect("client");
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(server.run(shutdown.clone()));
        Running {
            cloud,
            shutdown,
            task,
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.expect("join").expect("served");
    }
}

fn node(name: &str) -> NodeRef {
    NodeRef {
        name: name.into(),
        provider_id: None,
    }
}

fn service(name: &str, uid: &str) -> ServiceRef {
    ServiceRef {
        namespace: "default".into(),
        name: name.into(),
        uid: uid.into(),
    }
}

fn http_port() -> Vec<LoadBalancerPort> {
    vec![LoadBalancerPort {
        name: Some("http".into()),
        protocol: "TCP".into(),
        port: 80,
        node_port: 30080,
    }]
}

fn ip_of(status: &cloud::LoadBalancerStatus) -> Ipv4Addr {
    assert_eq!(status.ingress.len(), 1, "{status:?}");
    status.ingress[0].ip.as_deref().unwrap().parse().unwrap()
}

fn api_status<T: std::fmt::Debug>(result: Result<T, CloudError>) -> u16 {
    match result {
        Err(CloudError::Api { status, .. }) => status,
        other => panic!("expected a cloud API error, got {other:?}"),
    }
}

#[tokio::test]
async fn instances_through_the_provider_interface() {
    let dir = tempfile::tempdir().unwrap();
    let running = Running::start(dir.path(), Duration::from_millis(300)).await;
    let cloud = &running.cloud;
    assert_eq!(cloud.provider_name(), "miniplane");
    let instances = cloud.instances_v2().expect("InstancesV2");

    let a = cloud
        .launch_instance("node-a", Some(Ipv4Addr::new(10, 0, 0, 5)))
        .await
        .unwrap();
    let b = cloud.launch_instance("node-b", None).await.unwrap();
    assert_eq!((a.zone.as_str(), b.zone.as_str()), ("local-1a", "local-1b"));
    assert_eq!(b.internal_ip, Ipv4Addr::new(172, 31, 0, 1));
    // Launching again is how the launcher makes sure: the same instance comes back.
    assert_eq!(cloud.launch_instance("node-a", None).await.unwrap(), a);

    let metadata = instances.instance_metadata(&node("node-a")).await.unwrap();
    assert_eq!(
        metadata.provider_id,
        format!("miniplane:///local-1a/{}", a.id)
    );
    assert_eq!(metadata.instance_type, "sim.standard-2");
    assert_eq!(
        (metadata.zone.as_str(), metadata.region.as_str()),
        ("local-1a", "local-1")
    );
    assert_eq!(
        metadata.node_addresses,
        [
            NodeAddress {
                type_: "InternalIP".into(),
                address: "10.0.0.5".into()
            },
            NodeAddress {
                type_: "ExternalIP".into(),
                address: "198.51.100.1".into()
            },
            NodeAddress {
                type_: "Hostname".into(),
                address: "node-a".into()
            },
        ]
    );
    // By provider ID, the name does not matter.
    let by_id = NodeRef {
        name: "renamed".into(),
        provider_id: Some(metadata.provider_id.clone()),
    };
    assert!(instances.instance_exists(&by_id).await.unwrap());
    let foreign = NodeRef {
        name: "node-a".into(),
        provider_id: Some("aws:///us-east-1a/i-0abc".into()),
    };
    assert_eq!(api_status(instances.instance_exists(&foreign).await), 400);

    assert!(!instances.instance_shutdown(&node("node-b")).await.unwrap());
    let stopped = cloud.stop_instance("node-b").await.unwrap();
    assert_eq!(stopped.state, InstanceState::Stopped);
    assert!(instances.instance_exists(&node("node-b")).await.unwrap());
    assert!(instances.instance_shutdown(&node("node-b")).await.unwrap());
    cloud.start_instance("node-b").await.unwrap();
    assert!(!instances.instance_shutdown(&node("node-b")).await.unwrap());

    let gone = cloud.delete_instance("node-a").await.unwrap();
    assert_eq!(gone.state, InstanceState::Terminated);
    assert!(!instances.instance_exists(&node("node-a")).await.unwrap());
    assert!(!instances.instance_exists(&by_id).await.unwrap());
    assert!(matches!(
        instances.instance_metadata(&node("node-a")).await,
        Err(CloudError::InstanceNotFound)
    ));
    assert!(matches!(
        instances.instance_shutdown(&node("node-a")).await,
        Err(CloudError::InstanceNotFound)
    ));
    assert!(matches!(
        cloud.delete_instance("node-a").await,
        Err(CloudError::InstanceNotFound)
    ));
    assert!(matches!(
        cloud.get_instance("never").await,
        Err(CloudError::InstanceNotFound)
    ));
    let listed: Vec<(String, InstanceState)> = cloud
        .list_instances()
        .await
        .unwrap()
        .into_iter()
        .map(|i: CloudInstance| (i.name, i.state))
        .collect();
    assert_eq!(
        listed,
        [
            ("node-a".to_owned(), InstanceState::Terminated),
            ("node-b".to_owned(), InstanceState::Running)
        ]
    );
    match cloud.launch_instance("Not A Name", None).await {
        Err(CloudError::Api {
            status: 400,
            message,
        }) => {
            assert!(
                message.starts_with("invalid instance name \"Not A Name\""),
                "{message}"
            );
        }
        other => panic!("expected a 400, got {other:?}"),
    }
    running.stop().await;
}

#[tokio::test]
async fn load_balancers_provision_update_and_release_their_ip() {
    let dir = tempfile::tempdir().unwrap();
    let delay = Duration::from_millis(300);
    let running = Running::start(dir.path(), delay).await;
    let cloud = &running.cloud;
    let lbs = cloud.load_balancer().expect("LoadBalancer");
    let web = service("web", "3f2a9c1e-7d4b-4e8a-9b0c-1d2e3f4a5b6c");
    assert_eq!(
        lbs.get_load_balancer_name("kubernetes", &web),
        "a3f2a9c1e7d4b4e8a9b0c1d2e3f4a5b6"
    );
    assert_eq!(
        lbs.get_load_balancer("kubernetes", &web).await.unwrap(),
        None
    );

    let started = Instant::now();
    let status = lbs
        .ensure_load_balancer("kubernetes", &web, &http_port(), &[node("node-a")])
        .await
        .unwrap();
    assert!(
        started.elapsed() >= delay,
        "returned after {:?}",
        started.elapsed()
    );
    let ip = ip_of(&status);
    assert_eq!(ip, Ipv4Addr::new(203, 0, 113, 1));
    assert_eq!(status.ingress[0].ip_mode.as_deref(), Some("VIP"));
    let listed = cloud.list_load_balancers().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, LoadBalancerState::Active);
    assert_eq!(
        (
            listed[0].service.namespace.as_str(),
            listed[0].service.name.as_str()
        ),
        ("default", "web")
    );
    assert_eq!(listed[0].backends, ["node-a"]);

    // Ensuring again (an update) is quick and keeps the IP.
    let started = Instant::now();
    let again = lbs
        .ensure_load_balancer("kubernetes", &web, &http_port(), &[node("node-a")])
        .await
        .unwrap();
    assert!(started.elapsed() < delay, "took {:?}", started.elapsed());
    assert_eq!(ip_of(&again), ip);

    lbs.update_load_balancer(
        "kubernetes",
        &web,
        &http_port(),
        &[node("node-c"), node("node-b")],
    )
    .await
    .unwrap();
    assert_eq!(
        cloud.list_load_balancers().await.unwrap()[0].backends,
        ["node-b", "node-c"]
    );
    assert_eq!(
        lbs.get_load_balancer("kubernetes", &web).await.unwrap(),
        Some(again)
    );

    let api = service("api", "0b6f1c2d-aaaa-bbbb-cccc-000000000001");
    let status = lbs
        .ensure_load_balancer("kubernetes", &api, &http_port(), &[])
        .await
        .unwrap();
    assert_eq!(ip_of(&status), Ipv4Addr::new(203, 0, 113, 2));
    assert_eq!(
        api_status(
            lbs.update_load_balancer("kubernetes", &service("x", "missing"), &[], &[])
                .await
        ),
        404
    );

    lbs.ensure_load_balancer_deleted("kubernetes", &web)
        .await
        .unwrap();
    lbs.ensure_load_balancer_deleted("kubernetes", &web)
        .await
        .unwrap();
    assert_eq!(
        lbs.get_load_balancer("kubernetes", &web).await.unwrap(),
        None
    );
    // The freed IP is the next one given.
    let db = service("db", "77777777-0000-0000-0000-000000000000");
    let status = lbs
        .ensure_load_balancer("kubernetes", &db, &http_port(), &[])
        .await
        .unwrap();
    assert_eq!(ip_of(&status), Ipv4Addr::new(203, 0, 113, 1));
    running.stop().await;
}

#[tokio::test]
async fn routes_are_created_listed_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let running = Running::start(dir.path(), Duration::ZERO).await;
    let cloud = &running.cloud;
    let routes = cloud.routes().expect("Routes");
    cloud.launch_instance("node-a", None).await.unwrap();
    let to = |node: &str, cidr: &str| Route {
        name: String::new(),
        target_node: node.into(),
        destination_cidr: cidr.into(),
        blackhole: false,
    };
    routes
        .create_route("kubernetes", "uid-a", &to("node-a", "10.244.0.0/24"))
        .await
        .unwrap();
    routes
        .create_route("kubernetes", "uid-b", &to("node-b", "10.244.1.0/24"))
        .await
        .unwrap();
    routes
        .create_route("other", "uid-c", &to("node-c", "10.244.0.0/24"))
        .await
        .unwrap();
    // Creating the same route again is fine; another target for the same CIDR is not.
    routes
        .create_route("kubernetes", "uid-a", &to("node-a", "10.244.0.0/24"))
        .await
        .unwrap();
    assert_eq!(
        api_status(
            routes
                .create_route("kubernetes", "uid-z", &to("node-z", "10.244.0.0/24"))
                .await
        ),
        409
    );
    assert_eq!(
        api_status(
            routes
                .create_route("kubernetes", "uid-y", &to("node-y", "10.244.2.7/24"))
                .await
        ),
        400
    );

    let listed = routes.list_routes("kubernetes").await.unwrap();
    assert_eq!(
        listed,
        [
            Route {
                name: "kubernetes-uid-a".into(),
                target_node: "node-a".into(),
                destination_cidr: "10.244.0.0/24".into(),
                blackhole: false,
            },
            Route {
                name: "kubernetes-uid-b".into(),
                target_node: "node-b".into(),
                destination_cidr: "10.244.1.0/24".into(),
                // node-b has no instance.
                blackhole: true,
            },
        ]
    );
    assert_eq!(cloud.list_all_routes().await.unwrap().len(), 3);

    routes.delete_route("kubernetes", &listed[1]).await.unwrap();
    routes.delete_route("kubernetes", &listed[1]).await.unwrap();
    let names: Vec<String> = routes
        .list_routes("kubernetes")
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["kubernetes-uid-a"]);
    running.stop().await;
}

#[tokio::test]
async fn the_state_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let first = Running::start(dir.path(), Duration::from_millis(50)).await;
    let a = first.cloud.launch_instance("node-a", None).await.unwrap();
    first.cloud.stop_instance("node-a").await.unwrap();
    let b = first.cloud.launch_instance("node-b", None).await.unwrap();
    let lbs = first.cloud.load_balancer().unwrap();
    let web = service("web", "11111111-2222-3333-4444-555555555555");
    let api = service("api", "66666666-2222-3333-4444-555555555555");
    lbs.ensure_load_balancer("kubernetes", &web, &http_port(), &[])
        .await
        .unwrap();
    let ip = ip_of(
        &lbs.ensure_load_balancer("kubernetes", &api, &http_port(), &[])
            .await
            .unwrap(),
    );
    assert_eq!(ip, Ipv4Addr::new(203, 0, 113, 2));
    first
        .cloud
        .routes()
        .unwrap()
        .create_route(
            "kubernetes",
            "uid-b",
            &Route {
                name: String::new(),
                target_node: "node-b".into(),
                destination_cidr: "10.244.1.0/24".into(),
                blackhole: false,
            },
        )
        .await
        .unwrap();
    first
        .cloud
        .set_fault(&Fault {
            api: FaultApi::Routes,
            fail_fraction: 0.0,
            delay_ms: 5,
        })
        .await
        .unwrap();
    first.stop().await;

    // The same directory, another port: the client is made anew from cloud-config.json.
    let second = Running::start(dir.path(), Duration::from_millis(50)).await;
    let instances = second.cloud.list_instances().await.unwrap();
    let ids: Vec<(&str, &str, InstanceState)> = instances
        .iter()
        .map(|i| (i.name.as_str(), i.id.as_str(), i.state))
        .collect();
    assert_eq!(
        ids,
        [
            ("node-a", a.id.as_str(), InstanceState::Stopped),
            ("node-b", b.id.as_str(), InstanceState::Running)
        ]
    );
    let lbs = second.cloud.load_balancer().unwrap();
    let status = lbs
        .get_load_balancer("kubernetes", &api)
        .await
        .unwrap()
        .expect("still there");
    assert_eq!(ip_of(&status), ip);
    assert_eq!(
        second.cloud.list_all_routes().await.unwrap()[0].name,
        "kubernetes-uid-b"
    );
    assert_eq!(second.cloud.get_faults().await.unwrap()[0].delay_ms, 5);
    // The zone round-robin goes on where it was.
    let c = second.cloud.launch_instance("node-c", None).await.unwrap();
    assert_eq!(c.zone, "local-1c");
    second.stop().await;
}

#[tokio::test]
async fn faults_fail_or_slow_the_calls_of_their_group() {
    let dir = tempfile::tempdir().unwrap();
    let running = Running::start(dir.path(), Duration::ZERO).await;
    let cloud = &running.cloud;
    cloud.launch_instance("node-a", None).await.unwrap();
    let instances = cloud.instances_v2().unwrap();

    let faults = cloud
        .set_fault(&Fault {
            api: FaultApi::Instances,
            fail_fraction: 1.0,
            delay_ms: 0,
        })
        .await
        .unwrap();
    assert_eq!(faults.len(), 1);
    match instances.instance_exists(&node("node-a")).await {
        Err(CloudError::Api {
            status: 503,
            message,
        }) => assert_eq!(
            message,
            "injected fault: 100% of instances calls fail (miniplane cloud fault clear)"
        ),
        other => panic!("expected the injected fault, got {other:?}"),
    }
    assert_eq!(api_status(cloud.list_instances().await), 503);
    // Other groups are untouched, and the faults API is never faulted.
    cloud
        .routes()
        .unwrap()
        .list_routes("kubernetes")
        .await
        .unwrap();
    assert_eq!(
        cloud.get_faults().await.unwrap()[0].api,
        FaultApi::Instances
    );
    let left = cloud.clear_faults(Some(FaultApi::Instances)).await.unwrap();
    assert!(left.is_empty());
    assert!(instances.instance_exists(&node("node-a")).await.unwrap());

    let delay = Duration::from_millis(300);
    cloud
        .set_fault(&Fault {
            api: FaultApi::All,
            fail_fraction: 0.0,
            delay_ms: 300,
        })
        .await
        .unwrap();
    let started = Instant::now();
    cloud
        .routes()
        .unwrap()
        .list_routes("kubernetes")
        .await
        .unwrap();
    assert!(
        started.elapsed() >= delay,
        "answered after {:?}",
        started.elapsed()
    );
    // A caller with a shorter deadline sees an unreachable cloud.
    let impatient = cloud.clone().with_timeout(Duration::from_millis(100));
    match impatient
        .instances_v2()
        .unwrap()
        .instance_exists(&node("node-a"))
        .await
    {
        Err(CloudError::Unavailable(message)) => {
            assert!(message.ends_with("no answer within 0.1s"), "{message}")
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    match cloud
        .set_fault(&Fault {
            api: FaultApi::Routes,
            fail_fraction: 2.0,
            delay_ms: 0,
        })
        .await
    {
        Err(CloudError::Api {
            status: 400,
            message,
        }) => {
            assert_eq!(message, "fail_fraction 2 is not between 0 and 1")
        }
        other => panic!("expected a 400, got {other:?}"),
    }
    assert!(cloud.clear_faults(None).await.unwrap().is_empty());
    running.stop().await;
}

#[tokio::test]
async fn a_corrupt_state_file_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("state.json"), "{\"instances\": [").unwrap();
    let err = Server::bind(
        dir.path(),
        "127.0.0.1:0".parse().unwrap(),
        SimOptions::default(),
    )
    .await
    .expect_err("corrupt");
    let message = err.to_string();
    assert!(matches!(err, sim::Error::CorruptState { .. }), "{message}");
    assert!(
        message.starts_with("the simulated cloud's state file "),
        "{message}"
    );
    assert!(
        message.contains("state.json is corrupt: EOF while parsing a list"),
        "{message}"
    );
    // Nothing was overwritten.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("state.json")).unwrap(),
        "{\"instances\": ["
    );
}

#[tokio::test]
async fn a_second_cloud_on_the_same_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let running = Running::start(dir.path(), Duration::ZERO).await;
    let err = Server::bind(
        dir.path(),
        "127.0.0.1:0".parse().unwrap(),
        SimOptions::default(),
    )
    .await
    .expect_err("locked");
    assert!(matches!(err, sim::Error::Locked { .. }), "{err}");
    running.stop().await;
}

#[tokio::test]
async fn an_unreachable_cloud_is_unavailable() {
    // Bind and drop a listener: nothing listens on that port now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cloud = HttpCloud::new(&format!("http://127.0.0.1:{port}")).unwrap();
    match cloud
        .instances_v2()
        .unwrap()
        .instance_exists(&node("node-a"))
        .await
    {
        Err(CloudError::Unavailable(message)) => {
            assert!(
                message.contains(&format!("http://127.0.0.1:{port}/v1/instances")),
                "{message}"
            )
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn every_error_is_json() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let running = Running::start(dir.path(), Duration::ZERO).await;
    let addr = running
        .cloud
        .endpoint()
        .trim_start_matches("http://")
        .to_owned();
    let raw = |request: String| {
        let addr = addr.clone();
        async move {
            let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.unwrap();
            answer
        }
    };
    let get = |path: &str, method: &str| {
        format!("{method} {path} HTTP/1.1\r\nHost: cloud\r\nConnection: close\r\n\r\n")
    };
    let answer = raw(get("/v2/things", "GET")).await;
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert!(
        answer.ends_with(r#"{"message":"no such API path: GET /v2/things"}"#),
        "{answer}"
    );
    let answer = raw(get("/v1/faults", "PATCH")).await;
    assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");
    assert!(
        answer.ends_with(r#"{"message":"PATCH is not allowed on /v1/faults"}"#),
        "{answer}"
    );
    let body = "{\"name\": 7}";
    let answer = raw(format!(
        "POST /v1/instances HTTP/1.1\r\nHost: cloud\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ))
    .await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        answer.contains(r#"{"message":"invalid request body: "#),
        "{answer}"
    );
    running.stop().await;
}

/// Launches that arrive together are saved together (group commit) and each gets its own
/// answer: distinct names, ids and addresses for the good ones, a conflict for the one that
/// asks for a taken internal IP (undone alone), and all of it back after a restart.
#[tokio::test]
async fn concurrent_launches_are_saved_together_and_answered_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let running = Running::start(dir.path(), Duration::ZERO).await;
    let launches = (0..64).map(|i| {
        let cloud = running.cloud.clone();
        tokio::spawn(async move {
            let ip = Ipv4Addr::new(10, 0, 0, u8::try_from(i % 63 + 1).unwrap());
            cloud.launch_instance(&format!("n-{i}"), Some(ip)).await
        })
    });
    let answers: Vec<_> = joined(launches).await;
    let (ok, refused): (Vec<_>, Vec<_>) = answers.into_iter().partition(Result::is_ok);
    // n-0 and n-63 ask for 10.0.0.1: whichever came second is refused.
    assert_eq!(ok.len(), 63, "{refused:?}");
    assert_eq!(refused.len(), 1);
    assert!(
        matches!(&refused[0], Err(CloudError::Api { status: 409, .. })),
        "{refused:?}"
    );
    let instances: Vec<CloudInstance> = ok.into_iter().map(Result::unwrap).collect();
    let ids: std::collections::BTreeSet<_> = instances.iter().map(|i| i.id.clone()).collect();
    let external: std::collections::BTreeSet<_> = instances.iter().map(|i| i.external_ip).collect();
    assert_eq!((ids.len(), external.len()), (63, 63));
    running.stop().await;

    let again = Running::start(dir.path(), Duration::ZERO).await;
    let listed = again.cloud.list_instances().await.unwrap();
    assert_eq!(listed.len(), 63, "every answered launch was on disk");
    again.stop().await;
}

/// A poller that passes the list's `ETag` back gets `304 Not Modified` (nothing) until an
/// instance changes; a launch of an instance that exists changes nothing; a restarted cloud's
/// tags are new.
#[tokio::test]
async fn a_list_is_sent_again_only_when_an_instance_changed() {
    let dir = tempfile::tempdir().unwrap();
    let running = Running::start(dir.path(), Duration::ZERO).await;
    let cloud = &running.cloud;
    cloud.launch_instance("node-a", None).await.unwrap();
    let (listed, tag) = cloud
        .list_instances_since(None)
        .await
        .unwrap()
        .expect("a list");
    assert_eq!(listed.len(), 1);
    assert!(tag.starts_with('"') && tag.ends_with('"'), "{tag}");
    assert_eq!(cloud.list_instances_since(Some(&tag)).await.unwrap(), None);
    cloud.launch_instance("node-a", None).await.unwrap();
    assert_eq!(
        cloud.list_instances_since(Some(&tag)).await.unwrap(),
        None,
        "launching an existing instance changes nothing"
    );
    cloud.stop_instance("node-a").await.unwrap();
    let (listed, stopped) = cloud
        .list_instances_since(Some(&tag))
        .await
        .unwrap()
        .expect("changed");
    assert_eq!(listed[0].state, InstanceState::Stopped);
    assert_ne!(stopped, tag);
    assert_eq!(
        cloud
            .list_instances_since(Some("\"other\""))
            .await
            .unwrap()
            .map(|l| l.0.len()),
        Some(1)
    );
    running.stop().await;

    let again = Running::start(dir.path(), Duration::ZERO).await;
    let (listed, _) = again
        .cloud
        .list_instances_since(Some(&stopped))
        .await
        .unwrap()
        .expect("a restarted cloud's tags are new");
    assert_eq!(listed[0].state, InstanceState::Stopped);
    again.stop().await;
}

/// A change that cannot be saved is not made: with the cloud's directory gone, a launch is
/// answered 500 and the instance is not there, then or once saving works again.
#[tokio::test]
async fn a_change_that_cannot_be_saved_is_not_made() {
    let dir = tempfile::tempdir().unwrap();
    let cloud_dir = dir.path().join("cloud");
    let running = Running::start(&cloud_dir, Duration::ZERO).await;
    let cloud = &running.cloud;
    cloud.launch_instance("node-a", None).await.unwrap();
    std::fs::remove_dir_all(&cloud_dir).unwrap();
    let refused = cloud.launch_instance("node-b", None).await;
    assert_eq!(api_status(refused), 500);
    let names = |l: Vec<CloudInstance>| l.into_iter().map(|i| i.name).collect::<Vec<_>>();
    assert_eq!(names(cloud.list_instances().await.unwrap()), ["node-a"]);
    std::fs::create_dir_all(&cloud_dir).unwrap();
    let c = cloud.launch_instance("node-c", None).await.unwrap();
    assert_eq!(
        names(cloud.list_instances().await.unwrap()),
        ["node-a", "node-c"]
    );
    assert_eq!(
        c.internal_ip,
        Ipv4Addr::new(172, 31, 0, 2),
        "node-b's address was never taken"
    );
    running.stop().await;
}

async fn joined<T>(handles: impl Iterator<Item = JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}
