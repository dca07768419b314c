//! The watch behind `get -w` and `events -w`: kubectl's `watchtools` loop over
//! `GET ...?watch=true&resourceVersion=RV` (`k8s.io/client-go/tools/watch/until.go`).
//!
//! The server ends every watch after its `timeoutSeconds`; the loop then watches again from
//! the last resource version it saw, so the user sees one endless stream. A `410 Gone` (the
//! revision was compacted) ends the command with the server's error, as kubectl does.
//!
//! ```text
//!   list (RV 40) ──▶ watch from 40 ──ADDED rv 41──▶ caller
//!                         │ ... server timeout, stream ends
//!                    watch from 41 ──MODIFIED rv 45──▶ caller
//! ```
//!
//! Events carry objects as JSON values: the objects themselves, or, with the Table `Accept`
//! header, one-row `Table`s.

use std::pin::Pin;

use futures::{Stream, StreamExt};
use kube::api::WatchParams;
use kube::core::WatchEvent;
use serde_json::Value;

use super::config_flags::Session;
use super::error::{Error, KubeResultExt, Result};

type EventStream = Pin<Box<dyn Stream<Item = kube::Result<WatchEvent<Value>>>>>;

/// A resumable watch of one collection URL.
pub struct Watch<'s> {
    session: &'s Session,
    url: String,
    params: WatchParams,
    accept: &'static str,
    resource_version: String,
    stream: Option<EventStream>,
}

impl<'s> Watch<'s> {
    /// A watch of `url` (a collection path) from `resource_version`, asking for `accept`.
    pub fn new(
        session: &'s Session,
        url: &str,
        params: WatchParams,
        accept: &'static str,
        resource_version: String,
    ) -> Watch<'s> {
        Watch {
            session,
            url: url.to_owned(),
            params,
            accept,
            resource_version,
            stream: None,
        }
    }

    /// The next `ADDED`/`MODIFIED`/`DELETED` event (`BOOKMARK`s are consumed here), watching
    /// again whenever the server ends the stream.
    pub async fn next(&mut self) -> Result<WatchEvent<Value>> {
        loop {
            let stream = match &mut self.stream {
                Some(stream) => stream,
                None => self.stream.insert(self.start().await?),
            };
            match stream.next().await {
                None => self.stream = None,
                Some(Err(e)) => return Err(Error::from_kube(e, &self.session.server)),
                Some(Ok(WatchEvent::Bookmark(b))) => {
                    self.resource_version = b.metadata.resource_version;
                }
                Some(Ok(WatchEvent::Error(status))) => {
                    return Err(Error::from_kube(
                        kube::Error::Api(status),
                        &self.session.server,
                    ));
                }
                Some(Ok(event)) => {
                    if let WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) =
                        &event
                        && let Some(rv) = resource_version_of(o)
                    {
                        self.resource_version = rv.to_owned();
                    }
                    return Ok(event);
                }
            }
        }
    }

    async fn start(&self) -> Result<EventStream> {
        let mut request = kube::core::Request::new(&self.url)
            .watch(&self.params, &self.resource_version)
            .map_err(|e| Error::Other(e.to_string()))?;
        request.headers_mut().insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static(self.accept),
        );
        let stream = self
            .session
            .client
            .request_events::<Value>(request)
            .await
            .at(&self.session.server)?;
        Ok(Box::pin(stream))
    }
}

/// The resource version an event leaves the collection at: the object's, or for a `Table`
/// event its (last) row's object's.
fn resource_version_of(object: &Value) -> Option<&str> {
    let meta = if object["kind"] == "Table" {
        &object["rows"].as_array()?.last()?["object"]["metadata"]
    } else {
        &object["metadata"]
    };
    meta["resourceVersion"].as_str().filter(|rv| !rv.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resource_version_of_objects_and_table_rows() {
        assert_eq!(
            resource_version_of(&json!({"metadata": {"resourceVersion": "7"}})),
            Some("7")
        );
        let table = json!({"kind": "Table", "rows": [
            {"cells": [], "object": {"metadata": {"resourceVersion": "9"}}}]});
        assert_eq!(resource_version_of(&table), Some("9"));
        assert_eq!(
            resource_version_of(&json!({"kind": "Table", "rows": []})),
            None
        );
    }
}
