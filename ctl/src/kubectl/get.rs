//! `miniplane get`: kubectl get (`staging/src/k8s.io/kubectl/pkg/cmd/get/get.go`).
//!
//! ```text
//!   get deploy,po [-n NS | -A] [-l SEL]     one LIST per type, as a server-side Table
//!   get deploy web                          one GET per name, as a Table
//!   get ... -o wide                         + the priority>0 columns
//!   get ... -o yaml|json|name               the objects (a v1 List for several)
//!   get ... -w                              the list, then a row per watch event
//! ```
//!
//! A server that does not serve Tables gets kubectl's fallback: NAME and AGE from the objects.
//! Nothing found prints `No resources found in NS namespace.` on stderr (exit status 0);
//! a missing name prints the server's NotFound after the rest (exit status 1).

use kube::api::{ListParams, WatchParams};
use kube::core::WatchEvent;
use serde_json::Value;

use super::config_flags::{ConfigFlags, Session};
use super::error::{Error, KubeResultExt, Result};
use super::printers::{self, OutputFormat};
use super::resource_args::{self, Resolved};
use super::restmapper::Mapping;
use super::table::{self, PrintOptions, Table};
use super::tabwriter::TabWriter;
use super::watch::Watch;

/// The `Accept` header that asks for a server-side Table (kubectl's, for `get`).
pub const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// Page size of list requests (kubectl's `--chunk-size` default).
const CHUNK_SIZE: u32 = 500;

/// Flags of `miniplane get`.
#[derive(Debug, clap::Args)]
pub struct GetArgs {
    /// TYPE[,TYPE...] [NAME...] or TYPE/NAME... (types: plural, singular, short name or kind;
    /// `all` for the common workload types).
    #[arg(value_name = "TYPE[/NAME]")]
    args: Vec<String>,
    /// List across all namespaces.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// Label selector, e.g. app=web,tier!=db.
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    selector: Option<String>,
    /// Field selector, e.g. status.phase=Running.
    #[arg(long, value_name = "SELECTOR")]
    field_selector: Option<String>,
    /// Output format (default: a table).
    #[arg(short = 'o', long, value_enum)]
    output: Option<OutputFormat>,
    /// After listing, watch for changes.
    #[arg(short = 'w', long)]
    watch: bool,
    /// Leave out the table header.
    #[arg(long)]
    no_headers: bool,
    #[command(flatten)]
    config: ConfigFlags,
}

impl GetArgs {
    fn list_params(&self) -> ListParams {
        ListParams {
            label_selector: self.selector.clone(),
            field_selector: self.field_selector.clone(),
            limit: Some(CHUNK_SIZE),
            ..ListParams::default()
        }
    }

    fn is_table(&self) -> bool {
        matches!(self.output, None | Some(OutputFormat::Wide))
    }

    fn print_options(&self, mapping: &Mapping, with_kind: bool) -> PrintOptions {
        PrintOptions {
            wide: self.output == Some(OutputFormat::Wide),
            with_namespace: self.all_namespaces && mapping.namespaced,
            kind_prefix: with_kind.then(|| mapping.kind_group()),
            no_headers: self.no_headers,
        }
    }
}

/// Runs `miniplane get`.
pub async fn run(args: GetArgs) -> Result<()> {
    if args.args.is_empty() {
        return Err(Error::Usage(
            "you must specify the type of resource to get, e.g. `miniplane get pods`".to_owned(),
        ));
    }
    let requests = resource_args::parse(&args.args)?;
    let named = requests.iter().any(|r| !r.names.is_empty());
    if named && args.all_namespaces {
        return Err(Error::Usage(
            "a resource cannot be retrieved by name across all namespaces".to_owned(),
        ));
    }
    if named && args.selector.is_some() {
        return Err(Error::Usage(
            "name cannot be provided when a selector is specified".to_owned(),
        ));
    }
    let session = Session::connect(&args.config).await?;
    let mapper = session.mapper().await?;
    let (targets, with_kind) = resource_args::resolve(&mapper, &requests)?;
    if args.watch {
        return watch(&session, &args, &targets, with_kind).await;
    }
    let mut errors = Vec::new();
    let printed = if args.is_table() {
        print_tables(&session, &args, &targets, with_kind, &mut errors).await?
    } else {
        print_objects(&session, &args, &targets, &mut errors).await?
    };
    for e in &errors {
        eprintln!("{e}");
    }
    if !errors.is_empty() {
        return Err(Error::Reported);
    }
    if !printed && args.is_table() {
        eprintln!("{}", no_resources(&session, &args, &targets));
    }
    Ok(())
}

/// kubectl's message for an empty result.
fn no_resources(session: &Session, args: &GetArgs, targets: &[Resolved<'_>]) -> String {
    if !args.all_namespaces && targets.iter().all(|t| t.mapping.namespaced) {
        format!("No resources found in {} namespace.", session.namespace)
    } else {
        "No resources found".to_owned()
    }
}

/// One table per type, separated by a blank line. Returns whether anything was printed;
/// NotFound errors for names go to `errors`.
async fn print_tables(
    session: &Session,
    args: &GetArgs,
    targets: &[Resolved<'_>],
    with_kind: bool,
    errors: &mut Vec<Error>,
) -> Result<bool> {
    let mut printed = false;
    for target in targets {
        let url = session
            .api(target.mapping, args.all_namespaces)
            .resource_url()
            .to_owned();
        let table = if target.names.is_empty() {
            list_table(session, &url, &args.list_params()).await?
        } else {
            let mut combined = Table::default();
            for name in &target.names {
                match get_table(session, &url, name).await {
                    Ok(one) => {
                        combined.column_definitions = one.column_definitions;
                        combined.rows.extend(one.rows);
                    }
                    Err(e) if e.is_not_found() => errors.push(e),
                    Err(e) => return Err(e),
                }
            }
            combined
        };
        if table.rows.is_empty() {
            continue;
        }
        if printed && !args.no_headers {
            super::print("\n");
        }
        let options = args.print_options(target.mapping, with_kind);
        super::print(&TabWriter::table().format(&table::render(&table, &options, true)));
        printed = true;
    }
    Ok(printed)
}

/// `-o json|yaml|name`: the objects, one `List` unless exactly one `TYPE NAME` was asked.
async fn print_objects(
    session: &Session,
    args: &GetArgs,
    targets: &[Resolved<'_>],
    errors: &mut Vec<Error>,
) -> Result<bool> {
    let mut objects = fetch_objects(
        session,
        targets,
        args.all_namespaces,
        &args.list_params(),
        errors,
    )
    .await?;
    let single = targets.len() == 1 && targets[0].names.len() == 1;
    let printed = !objects.is_empty();
    match args.output {
        Some(OutputFormat::Name) => {
            let lines: String = objects
                .iter()
                .map(|(m, o)| {
                    format!(
                        "{}\n",
                        m.object_name(o["metadata"]["name"].as_str().unwrap_or(""))
                    )
                })
                .collect();
            super::print(&lines);
        }
        format => {
            let value = match (single, objects.len()) {
                (true, 1) => objects.remove(0).1,
                // A single name that was not found prints nothing but the error.
                (true, 0) => return Ok(false),
                _ => printers::list(objects.into_iter().map(|(_, o)| o).collect()),
            };
            super::print(&if format == Some(OutputFormat::Json) {
                printers::to_json(&value)
            } else {
                printers::to_yaml(&value)
            });
        }
    }
    Ok(printed)
}

/// The objects `targets` name: every object of a type without names (LIST with `params`,
/// following `continue`), else a GET per name. NotFound errors go to `errors`.
pub async fn fetch_objects<'m>(
    session: &Session,
    targets: &[Resolved<'m>],
    all_namespaces: bool,
    params: &ListParams,
    errors: &mut Vec<Error>,
) -> Result<Vec<(&'m Mapping, Value)>> {
    let mut objects = Vec::new();
    for target in targets {
        let api = session.api(target.mapping, all_namespaces);
        if target.names.is_empty() {
            let mut params = params.clone();
            loop {
                let list = api.list(&params).await.at(&session.server)?;
                for item in list.items {
                    objects.push((target.mapping, object_value(target.mapping, item)));
                }
                match list.metadata.continue_.filter(|c| !c.is_empty()) {
                    Some(token) => params.continue_token = Some(token),
                    None => break,
                }
            }
        } else {
            for name in &target.names {
                match api.get(name).await.at(&session.server) {
                    Ok(o) => objects.push((target.mapping, object_value(target.mapping, o))),
                    Err(e) if e.is_not_found() => errors.push(e),
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(objects)
}

/// An object as printed: `apiVersion`/`kind` filled in (list items lack them), no
/// `managedFields`.
pub fn object_value(mapping: &Mapping, object: kube::api::DynamicObject) -> Value {
    let mut value = serde_json::to_value(object).unwrap_or(Value::Null);
    if let Some(map) = value.as_object_mut() {
        map.entry("apiVersion")
            .or_insert_with(|| Value::String(mapping.resource.api_version.clone()));
        map.entry("kind")
            .or_insert_with(|| Value::String(mapping.resource.kind.clone()));
    }
    printers::without_managed_fields(value)
}

/// LISTs `url` as a Table, following `continue` tokens.
async fn list_table(session: &Session, url: &str, params: &ListParams) -> Result<Table> {
    let mut params = params.clone();
    let mut all = Table::default();
    loop {
        let request = kube::core::Request::new(url)
            .list(&params)
            .map_err(|e| Error::Other(e.to_string()))?;
        let page = request_table(session, request).await?;
        all.column_definitions = page.column_definitions;
        all.rows.extend(page.rows);
        all.metadata.resource_version = page.metadata.resource_version;
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params.continue_token = Some(token),
            None => return Ok(all),
        }
    }
}

/// GETs one object as a Table.
async fn get_table(session: &Session, url: &str, name: &str) -> Result<Table> {
    let request = kube::core::Request::new(url)
        .get(name, &Default::default())
        .map_err(|e| Error::Usage(format!("invalid name {name:?}: {e}")))?;
    request_table(session, request).await
}

/// Sends `request` asking for a Table; an object or list instead (a server without
/// server-side printing) becomes kubectl's NAME/AGE fallback table.
async fn request_table(session: &Session, mut request: http::Request<Vec<u8>>) -> Result<Table> {
    request.headers_mut().insert(
        http::header::ACCEPT,
        http::HeaderValue::from_static(TABLE_ACCEPT),
    );
    let value: Value = session.client.request(request).await.at(&session.server)?;
    table_of(value)
}

/// A Table response as a [`Table`]; anything else through kubectl's NAME/AGE fallback.
fn table_of(value: Value) -> Result<Table> {
    if value["kind"] == "Table" {
        return serde_json::from_value(value)
            .map_err(|e| Error::Other(format!("the server sent a malformed Table: {e}")));
    }
    Ok(table::from_objects(&value, jiff::Timestamp::now()))
}

/// `get -w`: the current rows (or objects), then one per watch event until interrupted.
async fn watch(
    session: &Session,
    args: &GetArgs,
    targets: &[Resolved<'_>],
    with_kind: bool,
) -> Result<()> {
    let [target] = targets else {
        return Err(Error::Usage(
            "you may only specify a single resource type with --watch".to_owned(),
        ));
    };
    let field_selector = match target.names.as_slice() {
        [] => args.field_selector.clone(),
        [name] => Some(match &args.field_selector {
            Some(f) => format!("metadata.name={name},{f}"),
            None => format!("metadata.name={name}"),
        }),
        _ => {
            return Err(Error::Usage(
                "watch is only supported on individual resources and resource collections"
                    .to_owned(),
            ));
        }
    };
    let url = session
        .api(target.mapping, args.all_namespaces)
        .resource_url()
        .to_owned();
    let list_params = ListParams {
        field_selector: field_selector.clone(),
        ..args.list_params()
    };
    let options = args.print_options(target.mapping, with_kind);
    let mut writer = TabWriter::table();
    let mut header_due = true;
    let mut yaml_documents = 0;
    // Watch events carry the columns once at most: keep the list's.
    let mut columns = Vec::new();
    let (accept, resource_version) = if args.is_table() {
        let table = list_table(session, &url, &list_params).await?;
        columns.clone_from(&table.column_definitions);
        if table.rows.is_empty() {
            eprintln!("{}", no_resources(session, args, targets));
        } else {
            super::print(&writer.format(&table::render(&table, &options, true)));
            header_due = false;
        }
        (TABLE_ACCEPT, table.metadata.resource_version)
    } else {
        let api = session.api(target.mapping, args.all_namespaces);
        let list = api.list(&list_params).await.at(&session.server)?;
        for item in list.items {
            let object = object_value(target.mapping, item);
            print_watched(args, target.mapping, &object, &mut yaml_documents);
        }
        ("application/json", list.metadata.resource_version)
    };
    let params = WatchParams {
        label_selector: args.selector.clone(),
        field_selector,
        bookmarks: true,
        ..WatchParams::default()
    };
    let mut watch = Watch::new(
        session,
        &url,
        params,
        accept,
        resource_version.unwrap_or_default(),
    );
    loop {
        let (WatchEvent::Added(object)
        | WatchEvent::Modified(object)
        | WatchEvent::Deleted(object)) = watch.next().await?
        else {
            continue;
        };
        if args.is_table() {
            let mut table = table_of(object)?;
            if table.column_definitions.is_empty() {
                table.column_definitions.clone_from(&columns);
            } else {
                columns.clone_from(&table.column_definitions);
            }
            super::print(&writer.format(&table::render(&table, &options, header_due)));
            header_due = false;
        } else {
            let object = printers::without_managed_fields(object);
            print_watched(args, target.mapping, &object, &mut yaml_documents);
        }
    }
}

/// One watched object in `-o name|json|yaml` (YAML documents separated by `---`, counted
/// in `yaml_documents`).
fn print_watched(args: &GetArgs, mapping: &Mapping, object: &Value, yaml_documents: &mut usize) {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    super::print(&match args.output {
        Some(OutputFormat::Name) => format!("{}\n", mapping.object_name(name)),
        Some(OutputFormat::Json) => printers::to_json(object),
        _ => {
            *yaml_documents += 1;
            let separator = if *yaml_documents > 1 { "---\n" } else { "" };
            format!("{separator}{}", printers::to_yaml(object))
        }
    });
}
