//! `miniplane describe`: kubectl describe (`staging/src/k8s.io/kubectl/pkg/cmd/describe/` and
//! the describers in `staging/src/k8s.io/kubectl/pkg/describe/describe.go`).
//!
//! ```text
//!   describe deploy web        GET the object, then what its describer needs:
//!     Deployment               + its ReplicaSets (by selector)      workloads.rs
//!     ReplicaSet               + its pods (by selector)             workloads.rs
//!     Pod                                                            pod.rs
//!     Node                     + the pods bound to it                node.rs
//!     anything else            every field, generically              generic.rs
//!   and always the events whose involvedObject is this object (kind, name, namespace, uid).
//! ```
//!
//! The describers are plain functions from objects to text (writer.rs aligns it as kubectl's
//! tab writer does); this file only fetches.

mod generic;
mod node;
mod pod;
mod pod_template;
mod workloads;
mod writer;

pub use pod_template::pod_template_text;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::config_flags::{ConfigFlags, Session};
use super::error::{Error, KubeResultExt, Result};
use super::get::fetch_objects;
use super::resource_args;
use super::restmapper::Mapping;

/// Flags of `miniplane describe`.
#[derive(Debug, clap::Args)]
pub struct DescribeArgs {
    /// TYPE [NAME...] or TYPE/NAME... (a TYPE alone describes all of them).
    #[arg(value_name = "TYPE[/NAME]", required = true)]
    args: Vec<String>,
    /// With a TYPE alone: only objects matching this label selector.
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    selector: Option<String>,
    /// With a TYPE alone: across all namespaces.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    #[command(flatten)]
    config: ConfigFlags,
}

/// Runs `miniplane describe`.
pub async fn run(args: DescribeArgs) -> Result<()> {
    let requests = resource_args::parse(&args.args)?;
    let session = Session::connect(&args.config).await?;
    let mapper = session.mapper().await?;
    let (targets, _) = resource_args::resolve(&mapper, &requests)?;
    let params = ListParams {
        label_selector: args.selector.clone(),
        limit: Some(500),
        ..ListParams::default()
    };
    let mut errors = Vec::new();
    let objects = fetch_objects(
        &session,
        &targets,
        args.all_namespaces,
        &params,
        &mut errors,
    )
    .await?;
    for (i, (mapping, object)) in objects.iter().enumerate() {
        let text = describe(&session, mapping, object).await?;
        super::print(&if i == 0 { text } else { format!("\n\n{text}") });
    }
    for e in &errors {
        eprintln!("{e}");
    }
    if !errors.is_empty() {
        return Err(Error::Reported);
    }
    if objects.is_empty() {
        eprintln!("No resources found in {} namespace.", session.namespace);
    }
    Ok(())
}

/// Fetches what the object's describer needs and runs it.
async fn describe(session: &Session, mapping: &Mapping, object: &Value) -> Result<String> {
    let now = jiff::Timestamp::now();
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let events = events_for(session, mapping, object).await?;
    let text = match (
        mapping.resource.group.as_str(),
        mapping.resource.kind.as_str(),
    ) {
        ("apps", "Deployment") => {
            let d = typed(object)?;
            let replica_sets: Vec<ReplicaSet> =
                list_in(session, namespace, &ListParams::default()).await?;
            workloads::deployment(&d, &replica_sets, &events, now)
        }
        ("apps", "ReplicaSet") => {
            let rs: ReplicaSet = typed(object)?;
            let selector = rs
                .spec
                .as_ref()
                .map(|s| s.selector.clone())
                .unwrap_or_default();
            let selector: kube::core::Selector = selector.try_into().unwrap_or_default();
            let pods: Vec<Pod> = list_in(
                session,
                namespace,
                &ListParams::default().labels_from(&selector),
            )
            .await?;
            workloads::replica_set(&rs, &pods, &events, now)
        }
        ("", "Pod") => pod::pod(&typed(object)?, &events, now),
        ("", "Node") => {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            let params = ListParams::default().fields(&format!("spec.nodeName={name}"));
            let api: Api<Pod> = Api::all(session.client.clone());
            let pods = api.list(&params).await.at(&session.server)?.items;
            node::node(&typed(object)?, &pods, &events, now)
        }
        _ => {
            let mut w = writer::PrefixWriter::new();
            generic::describe(&mut w, object);
            writer::events(&mut w, &events, now);
            w.finish()
        }
    };
    Ok(text)
}

/// The events about `object` (kubectl's `searchEvents`: a field selector on involvedObject).
async fn events_for(session: &Session, mapping: &Mapping, object: &Value) -> Result<Vec<Event>> {
    let meta = &object["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    let namespace = meta["namespace"].as_str().unwrap_or_default();
    let mut fields = vec![
        format!("involvedObject.name={name}"),
        format!("involvedObject.kind={}", mapping.resource.kind),
    ];
    if mapping.namespaced {
        fields.push(format!("involvedObject.namespace={namespace}"));
    }
    // A kubelet's node events carry the node name as uid, not the Node's uid.
    if let Some(uid) = meta["uid"]
        .as_str()
        .filter(|_| mapping.resource.kind != "Node")
    {
        fields.push(format!("involvedObject.uid={uid}"));
    }
    let params = ListParams::default().fields(&fields.join(","));
    let api: Api<Event> = if mapping.namespaced {
        Api::namespaced(session.client.clone(), namespace)
    } else {
        Api::all(session.client.clone())
    };
    Ok(api.list(&params).await.at(&session.server)?.items)
}

/// Lists `K` in `namespace`.
async fn list_in<K>(session: &Session, namespace: &str, params: &ListParams) -> Result<Vec<K>>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(session.client.clone(), namespace);
    Ok(api.list(params).await.at(&session.server)?.items)
}

/// The object as a k8s-openapi type.
fn typed<K: DeserializeOwned>(object: &Value) -> Result<K> {
    serde_json::from_value(object.clone()).map_err(|e| {
        Error::Other(format!(
            "the server sent an object that cannot be described: {e}"
        ))
    })
}
