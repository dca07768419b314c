//! The generic table: every case runs for every registered resource, through the router.
//! A failure names the resource it failed for.

use crate::common;

use axum::http::{Method, StatusCode};
use common::{Harness, collection, resources, sample};
use serde_json::json;

#[tokio::test]
async fn every_resource_create_get_list() {
    let h = Harness::new().await;
    for info in resources() {
        let base = collection(&info);
        let name = "generic-a";
        let created = h.post(&base, &sample(&info, name)).await;
        assert_eq!(
            created.status,
            StatusCode::CREATED,
            "{base}: {:?}",
            created.body
        );
        let md = &created.body["metadata"];
        assert!(
            md["uid"].as_str().is_some_and(|u| !u.is_empty()),
            "{base}: uid"
        );
        assert!(
            md["resourceVersion"].as_str().is_some(),
            "{base}: resourceVersion"
        );
        assert!(
            md["creationTimestamp"].as_str().is_some(),
            "{base}: creationTimestamp"
        );
        assert_eq!(md["generation"], 1, "{base}: generation");
        assert_eq!(created.body["kind"], info.kind.as_str(), "{base}");
        if info.namespaced {
            assert_eq!(md["namespace"], "default", "{base}");
        }
        let got = h.get(&format!("{base}/{name}")).await;
        assert_eq!(got.status, StatusCode::OK, "{base}");
        assert_eq!(got.body["metadata"]["uid"], md["uid"], "{base}");
        let list = h.get(&base).await;
        assert_eq!(list.status, StatusCode::OK, "{base}");
        assert_eq!(list.body["kind"], format!("{}List", info.kind), "{base}");
        assert!(
            list.body["metadata"]["resourceVersion"].as_str().is_some(),
            "{base}"
        );
        let names: Vec<_> = list.body["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| i["metadata"]["name"].clone())
            .collect();
        assert!(names.contains(&json!(name)), "{base}: {names:?}");
        let again = h.post(&base, &sample(&info, name)).await;
        assert_eq!(again.status, StatusCode::CONFLICT, "{base}");
        assert_eq!(again.body["reason"], "AlreadyExists", "{base}");
        assert_eq!(
            again.body["message"],
            format!("{} \"{name}\" already exists", info.gvr.group_resource()),
            "{base}"
        );
    }
}

#[tokio::test]
async fn every_resource_update_and_stale_update_conflict() {
    let h = Harness::new().await;
    for info in resources() {
        let base = collection(&info);
        let created = h.post(&base, &sample(&info, "generic-u")).await;
        assert_eq!(
            created.status,
            StatusCode::CREATED,
            "{base}: {:?}",
            created.body
        );
        let mut obj = created.body.clone();
        obj["metadata"]["labels"]["changed"] = json!("yes");
        let updated = h.put(&format!("{base}/generic-u"), &obj).await;
        assert_eq!(updated.status, StatusCode::OK, "{base}: {:?}", updated.body);
        assert_eq!(
            updated.body["metadata"]["labels"]["changed"], "yes",
            "{base}"
        );
        assert_ne!(
            updated.body["metadata"]["resourceVersion"],
            created.body["metadata"]["resourceVersion"],
            "{base}"
        );
        assert_eq!(
            updated.body["metadata"]["uid"], created.body["metadata"]["uid"],
            "{base}"
        );
        // The first version's resourceVersion is stale now.
        let stale = h.put(&format!("{base}/generic-u"), &obj).await;
        assert_eq!(stale.status, StatusCode::CONFLICT, "{base}");
        assert_eq!(stale.body["reason"], "Conflict", "{base}");
        assert_eq!(
            stale.body["message"],
            format!(
                "Operation cannot be fulfilled on {} \"generic-u\": the object has been modified; please apply your changes to the latest version and try again",
                info.gvr.group_resource()
            ),
            "{base}"
        );
        // Without a resourceVersion the update is unconditional.
        obj["metadata"]
            .as_object_mut()
            .map(|m| m.remove("resourceVersion"));
        let unconditional = h.put(&format!("{base}/generic-u"), &obj).await;
        assert_eq!(
            unconditional.status,
            StatusCode::OK,
            "{base}: {:?}",
            unconditional.body
        );
        // PUT to a missing object: 404 unless the kind allows create-on-update.
        let mut missing = sample(&info, "generic-missing");
        missing["metadata"]["name"] = json!("generic-missing");
        let put_missing = h.put(&format!("{base}/generic-missing"), &missing).await;
        let expected = if info.allow_create_on_update {
            StatusCode::CREATED
        } else {
            StatusCode::NOT_FOUND
        };
        assert_eq!(
            put_missing.status, expected,
            "{base}: {:?}",
            put_missing.body
        );
    }
}

#[tokio::test]
async fn every_resource_delete_and_not_found() {
    let h = Harness::new().await;
    for info in resources() {
        let base = collection(&info);
        let created = h.post(&base, &sample(&info, "generic-d")).await;
        assert_eq!(
            created.status,
            StatusCode::CREATED,
            "{base}: {:?}",
            created.body
        );
        let deleted = h
            .delete(
                &format!("{base}/generic-d"),
                Some(&json!({"propagationPolicy": "Background"})),
            )
            .await;
        assert_eq!(deleted.status, StatusCode::OK, "{base}: {:?}", deleted.body);
        // The registries with `ReturnDeletedObject: true` in Kubernetes' pkg/registry answer
        // with the object (a typed client decodes it as the kind); the others with a Status.
        if ["Pod", "Namespace", "Service", "ServiceAccount"].contains(&info.kind.as_str()) {
            assert_eq!(deleted.body["kind"], info.kind.as_str(), "{base}");
            assert_eq!(deleted.body["metadata"]["name"], "generic-d", "{base}");
        } else {
            assert_eq!(deleted.body["kind"], "Status", "{base}: {:?}", deleted.body);
            assert_eq!(deleted.body["status"], "Success", "{base}");
            assert_eq!(deleted.body["details"]["name"], "generic-d", "{base}");
        }
        let after = h.get(&format!("{base}/generic-d")).await;
        if info.kind == "Namespace" {
            // Namespaces terminate; the namespace controller finishes the job.
            assert_eq!(after.body["status"]["phase"], "Terminating", "{base}");
            assert!(
                after.body["metadata"]["deletionTimestamp"].is_string(),
                "{base}"
            );
            continue;
        }
        assert_eq!(after.status, StatusCode::NOT_FOUND, "{base}");
        assert_eq!(after.body["reason"], "NotFound", "{base}");
        assert_eq!(
            after.body["message"],
            format!("{} \"generic-d\" not found", info.gvr.group_resource()),
            "{base}"
        );
        assert_eq!(
            after.body["details"]["kind"],
            info.gvr.resource.as_str(),
            "{base}"
        );
        let again = h.delete(&format!("{base}/generic-d"), None).await;
        assert_eq!(again.status, StatusCode::NOT_FOUND, "{base}");
        let patch_missing = h
            .patch(
                &format!("{base}/generic-d"),
                "application/merge-patch+json",
                &json!({}),
            )
            .await;
        assert_eq!(patch_missing.status, StatusCode::NOT_FOUND, "{base}");
    }
}

#[tokio::test]
async fn every_resource_watch_sees_added_modified_deleted() {
    let h = Harness::new().await;
    for info in resources() {
        if info.kind == "Namespace" {
            continue; // deletion only marks namespaces (covered in semantics tests)
        }
        let base = collection(&info);
        let list = h.get(&base).await;
        let rv = list.body["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mut w = h
            .watch(&format!("{base}?watch=1&resourceVersion={rv}"), None)
            .await;
        let created = h.post(&base, &sample(&info, "generic-w")).await;
        assert_eq!(created.status, StatusCode::CREATED, "{base}");
        let ev = w.next_change().await.expect("ADDED");
        assert_eq!(ev["type"], "ADDED", "{base}");
        assert_eq!(ev["object"]["kind"], info.kind.as_str(), "{base}");
        assert_eq!(
            ev["object"]["metadata"]["resourceVersion"],
            created.body["metadata"]["resourceVersion"],
            "{base}"
        );
        let mut obj = created.body.clone();
        obj["metadata"]["labels"]["w"] = json!("1");
        assert_eq!(
            h.put(&format!("{base}/generic-w"), &obj).await.status,
            StatusCode::OK,
            "{base}"
        );
        assert_eq!(
            w.next_change().await.expect("MODIFIED")["type"],
            "MODIFIED",
            "{base}"
        );
        assert_eq!(
            h.delete(&format!("{base}/generic-w"), None).await.status,
            StatusCode::OK,
            "{base}"
        );
        let del = w.next_change().await.expect("DELETED");
        assert_eq!(del["type"], "DELETED", "{base}");
        assert_eq!(del["object"]["metadata"]["name"], "generic-w", "{base}");
    }
}

#[tokio::test]
async fn every_resource_refuses_bad_input_and_changes_nothing() {
    let h = Harness::new().await;
    for info in resources() {
        let base = collection(&info);
        let rv_before = h.backend_revision();
        // Malformed JSON → 400.
        let bad = h
            .raw(
                Method::POST,
                &base,
                &[("content-type", "application/json")],
                b"{\"metadata\":".to_vec(),
            )
            .await;
        assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{base}");
        assert_eq!(bad.body["kind"], "Status", "{base}");
        // Malformed YAML → 400.
        let bad_yaml = h
            .raw(
                Method::POST,
                &base,
                &[("content-type", "application/yaml")],
                b"metadata: [".to_vec(),
            )
            .await;
        assert_eq!(bad_yaml.status, StatusCode::BAD_REQUEST, "{base}");
        // Unsupported content type → 415.
        let ct = h
            .raw(
                Method::POST,
                &base,
                &[("content-type", "text/plain")],
                b"hello".to_vec(),
            )
            .await;
        assert_eq!(ct.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{base}");
        // Over 3 MiB → 413.
        let big = vec![b' '; 3 * 1024 * 1024 + 10];
        let too_large = h
            .raw(
                Method::POST,
                &base,
                &[("content-type", "application/json")],
                big,
            )
            .await;
        assert_eq!(too_large.status, StatusCode::PAYLOAD_TOO_LARGE, "{base}");
        assert_eq!(too_large.body["reason"], "RequestEntityTooLarge", "{base}");
        // Wrong apiVersion / kind → 400.
        let mut wrong = sample(&info, "generic-bad");
        wrong["apiVersion"] = json!("nope/v9");
        let wrong_av = h.post(&base, &wrong).await;
        assert_eq!(wrong_av.status, StatusCode::BAD_REQUEST, "{base}");
        let mut wrong = sample(&info, "generic-bad");
        wrong["kind"] = json!("Nope");
        assert_eq!(
            h.post(&base, &wrong).await.status,
            StatusCode::BAD_REQUEST,
            "{base}"
        );
        // No name and no generateName → 422 with a cause.
        let mut nameless = sample(&info, "x");
        nameless["metadata"]
            .as_object_mut()
            .map(|m| m.remove("name"));
        let invalid = h.post(&base, &nameless).await;
        assert_eq!(
            invalid.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{base}: {:?}",
            invalid.body
        );
        assert_eq!(invalid.body["reason"], "Invalid", "{base}");
        assert_eq!(
            invalid.body["details"]["kind"],
            info.kind.as_str(),
            "{base}"
        );
        assert_eq!(
            invalid.body["details"]["causes"][0]["field"], "metadata.name",
            "{base}"
        );
        // Bad PATCH content type → 415.
        let p = h
            .patch(&format!("{base}/whatever"), "application/json", &json!({}))
            .await;
        assert_eq!(p.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{base}");
        // Nothing was written.
        assert_eq!(
            h.backend_revision(),
            rv_before,
            "{base}: a refused request wrote something"
        );
        // The server still answers.
        assert_eq!(h.get(&base).await.status, StatusCode::OK, "{base}");
    }
}

#[tokio::test]
async fn every_resource_dry_run_writes_nothing() {
    let h = Harness::new().await;
    for info in resources() {
        let base = collection(&info);
        let rv_before = h.backend_revision();
        let dry = h
            .post(&format!("{base}?dryRun=All"), &sample(&info, "generic-dry"))
            .await;
        assert_eq!(dry.status, StatusCode::CREATED, "{base}: {:?}", dry.body);
        assert_eq!(dry.body["metadata"]["name"], "generic-dry", "{base}");
        assert_eq!(h.backend_revision(), rv_before, "{base}");
        assert_eq!(
            h.get(&format!("{base}/generic-dry")).await.status,
            StatusCode::NOT_FOUND,
            "{base}"
        );
        // Dry-run update, patch and delete of a real object change nothing either.
        let real = h.post(&base, &sample(&info, "generic-real")).await;
        assert_eq!(real.status, StatusCode::CREATED, "{base}");
        let rv_before = h.backend_revision();
        let mut changed = real.body.clone();
        changed["metadata"]["labels"]["dry"] = json!("run");
        let put = h
            .put(&format!("{base}/generic-real?dryRun=All"), &changed)
            .await;
        assert_eq!(put.status, StatusCode::OK, "{base}: {:?}", put.body);
        assert_eq!(put.body["metadata"]["labels"]["dry"], "run", "{base}");
        let patch = h
            .patch(
                &format!("{base}/generic-real?dryRun=All"),
                "application/merge-patch+json",
                &json!({"metadata": {"labels": {"dry": "patch"}}}),
            )
            .await;
        assert_eq!(patch.status, StatusCode::OK, "{base}: {:?}", patch.body);
        assert_eq!(patch.body["metadata"]["labels"]["dry"], "patch", "{base}");
        let del = h
            .delete(&format!("{base}/generic-real?dryRun=All"), None)
            .await;
        assert_eq!(del.status, StatusCode::OK, "{base}");
        assert_eq!(h.backend_revision(), rv_before, "{base}");
        let after = h.get(&format!("{base}/generic-real")).await;
        assert_eq!(after.status, StatusCode::OK, "{base}");
        assert!(
            after.body["metadata"]["labels"].get("dry").is_none(),
            "{base}"
        );
        assert!(
            after.body["metadata"].get("deletionTimestamp").is_none(),
            "{base}"
        );
    }
}

#[tokio::test]
async fn every_resource_serves_tables_and_refuses_bad_names() {
    let h = Harness::new().await;
    for info in resources() {
        let base = collection(&info);
        assert_eq!(
            h.post(&base, &sample(&info, "generic-t")).await.status,
            StatusCode::CREATED,
            "{base}"
        );
        let t = h.get_as(&base, common::TABLE).await;
        assert_eq!(t.status, StatusCode::OK, "{base}");
        assert_eq!(t.body["kind"], "Table", "{base}");
        if info.strategy.table_has_name_column() {
            assert_eq!(t.body["columnDefinitions"][0]["name"], "Name", "{base}");
            assert_eq!(t.body["columnDefinitions"][0]["format"], "name", "{base}");
        }
        let row = t.body["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["object"]["metadata"]["name"] == "generic-t")
            .cloned();
        let row = row.unwrap_or_else(|| panic!("{base}: no row for generic-t"));
        assert_eq!(
            row["cells"].as_array().map(Vec::len),
            t.body["columnDefinitions"].as_array().map(Vec::len),
            "{base}"
        );
        assert_eq!(row["object"]["metadata"]["name"], "generic-t", "{base}");
        let one = h.get_as(&format!("{base}/generic-t"), common::TABLE).await;
        assert_eq!(one.body["rows"].as_array().map(Vec::len), Some(1), "{base}");
        for bad in ["a/b", "..", "x%2"] {
            let mut obj = sample(&info, "x");
            obj["metadata"]["name"] = json!(bad);
            let r = h.post(&base, &obj).await;
            assert_eq!(
                r.status,
                StatusCode::UNPROCESSABLE_ENTITY,
                "{base}: name {bad:?}"
            );
        }
    }
}

#[tokio::test]
async fn every_resource_patches_with_all_four_types() {
    let h = Harness::new().await;
    for info in resources() {
        let base = collection(&info);
        let created = h.post(&base, &sample(&info, "generic-p")).await;
        assert_eq!(created.status, StatusCode::CREATED, "{base}");
        let url = format!("{base}/generic-p");
        let merge = h
            .patch(
                &url,
                "application/merge-patch+json",
                &json!({"metadata": {"labels": {"m": "1"}}}),
            )
            .await;
        assert_eq!(merge.status, StatusCode::OK, "{base}: {:?}", merge.body);
        assert_eq!(merge.body["metadata"]["labels"]["m"], "1", "{base}");
        let jp = h
            .patch(
                &url,
                "application/json-patch+json",
                &json!([{"op": "add", "path": "/metadata/labels/j", "value": "2"}]),
            )
            .await;
        assert_eq!(jp.status, StatusCode::OK, "{base}: {:?}", jp.body);
        assert_eq!(jp.body["metadata"]["labels"]["j"], "2", "{base}");
        let smp = h
            .patch(
                &url,
                "application/strategic-merge-patch+json",
                &json!({"metadata": {"labels": {"s": "3"}}}),
            )
            .await;
        assert_eq!(smp.status, StatusCode::OK, "{base}: {:?}", smp.body);
        assert_eq!(smp.body["metadata"]["labels"]["m"], "1", "{base}");
        // A stale resourceVersion in a patch conflicts.
        let stale = h
            .patch(&url, "application/merge-patch+json", &json!({"metadata": {"resourceVersion": created.body["metadata"]["resourceVersion"]}}))
            .await;
        assert_eq!(stale.status, StatusCode::CONFLICT, "{base}");
        // Server-side apply creates (201), then updates (200), and records its manager.
        let apply_url = format!("{base}/generic-ssa?fieldManager=tester");
        let body = serde_json::to_vec(&sample(&info, "generic-ssa")).expect("json");
        let first = h
            .raw(
                axum::http::Method::PATCH,
                &apply_url,
                &[("content-type", "application/apply-patch+yaml")],
                body.clone(),
            )
            .await;
        assert_eq!(
            first.status,
            StatusCode::CREATED,
            "{base}: {:?}",
            first.body
        );
        let again = h
            .raw(
                axum::http::Method::PATCH,
                &apply_url,
                &[("content-type", "application/apply-patch+yaml")],
                body,
            )
            .await;
        assert_eq!(again.status, StatusCode::OK, "{base}: {:?}", again.body);
        let managers: Vec<_> = again.body["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| (m["manager"].clone(), m["operation"].clone()))
            .collect();
        assert!(
            managers.contains(&(json!("tester"), json!("Apply"))),
            "{base}: {managers:?}"
        );
    }
}

#[tokio::test]
async fn unknown_resources_and_paths_are_404() {
    let h = Harness::new().await;
    for uri in [
        "/api/v1/namespaces/default/widgets",
        "/apis/nope/v1/things",
        "/apis/apps/v9/deployments",
        "/nonsense",
        "/apis/apps/v1/namespaces/default/deployments/x/nope",
    ] {
        let r = h.get(uri).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{uri}");
        assert_eq!(r.body["kind"], "Status", "{uri}");
    }
}

trait Revision {
    fn backend_revision(&self) -> u64;
}

impl Revision for Harness {
    fn backend_revision(&self) -> u64 {
        use store::Backend;
        self.backend.current_revision().0
    }
}
