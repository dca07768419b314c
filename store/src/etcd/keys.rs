//! `--etcd-prefix`: where the store's keys live in etcd (the `pathPrefix` of
//! `staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go`, `newStore` and `prepareKey`).
//!
//! kube-apiserver is given keys without the prefix (`/pods/default/web`) and prepends
//! `path.Join("/", prefix) + "/"`. miniplane's API server hands the store keys that already
//! start with `/registry/` (`/registry/core/pods/default/web`), so the prefix here *replaces*
//! that leading `/registry/`:
//!
//! ```text
//!   --etcd-prefix=/registry (default)   /registry/core/pods/a  ⇄  /registry/core/pods/a   (identity)
//!   --etcd-prefix=/team-a               /registry/core/pods/a  ⇄  /team-a/core/pods/a
//!   --etcd-prefix=/                     /registry/core/pods/a  ⇄  /core/pods/a
//! ```
//!
//! With the default prefix every key maps to itself, including keys outside `/registry/` (the
//! store's tests use such keys). With another prefix only keys under `/registry/` have a place
//! in etcd: a write to any other key is refused, a read of one finds nothing, and a range or
//! watch covers the part of its keys that lies under `/registry/` (a prefix such as `""` or `/`
//! is read as `/registry/`; a prefix beside it matches nothing).

use bytes::Bytes;

/// The key prefix of the API server's keys, which `--etcd-prefix` replaces.
pub(crate) const STORE_PREFIX: &[u8] = b"/registry/";

/// kube-apiserver's default `--etcd-prefix`.
pub const DEFAULT_PREFIX: &str = "/registry";

/// Go's `path.Join("/", prefix)` followed by store.go's trailing `/`: `registry`, `/registry`
/// and `/registry/` all become `/registry/`; `""` and `/` become `/`.
pub(crate) fn normalize_prefix(prefix: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in prefix.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let mut out = String::from("/");
    for p in parts {
        out.push_str(p);
        out.push('/');
    }
    out
}

/// The end of the range of keys starting with `prefix` (clientv3's `GetPrefixRangeEnd`);
/// `\0` ("to the end of the key space") for an empty or all-`0xff` prefix. Shared by every
/// speaker of etcd's API here: this backend, the store's etcd endpoint and the store bench.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// An etcd key range: `[key, end)`, a single key when `end` is `None`, everything from `key`
/// on when `end` is `\0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EtcdRange {
    /// The first key (never empty).
    pub key: Vec<u8>,
    /// The end of the range (exclusive), or `None` for exactly `key`.
    pub end: Option<Vec<u8>>,
}

/// Translates between the store's keys and etcd's (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct KeyMap {
    /// The etcd prefix that replaces [`STORE_PREFIX`]; `None` when it is `STORE_PREFIX`
    /// itself (every key maps to itself).
    etcd_prefix: Option<Vec<u8>>,
}

/// A key that has no place in etcd under a non-default `--etcd-prefix`.
#[derive(Debug)]
pub(crate) struct OutsidePrefix;

impl KeyMap {
    /// The map for a `--etcd-prefix` value.
    pub(crate) fn new(prefix: &str) -> Self {
        let normalized = normalize_prefix(prefix).into_bytes();
        KeyMap {
            etcd_prefix: (normalized != STORE_PREFIX).then_some(normalized),
        }
    }

    /// The etcd key of a store key.
    pub(crate) fn etcd_key(&self, key: &[u8]) -> Result<Vec<u8>, OutsidePrefix> {
        match &self.etcd_prefix {
            None => Ok(key.to_vec()),
            Some(p) => match key.strip_prefix(STORE_PREFIX) {
                Some(rest) => Ok([p.as_slice(), rest].concat()),
                None => Err(OutsidePrefix),
            },
        }
    }

    /// The store key of an etcd key; `None` for a key outside the prefix (never returned by
    /// a range or watch built by [`KeyMap::range`]).
    pub(crate) fn store_key(&self, key: Vec<u8>) -> Option<Bytes> {
        match &self.etcd_prefix {
            None => Some(Bytes::from(key)),
            Some(p) => key
                .strip_prefix(p.as_slice())
                .map(|rest| Bytes::from([STORE_PREFIX, rest].concat())),
        }
    }

    /// The etcd range of the store keys of `range` that are `>= start`; `None` when no key
    /// can match (a start past the range, or a range beside `/registry/` under another
    /// prefix).
    pub(crate) fn range(
        &self,
        range: &crate::KeyRange,
        start: Option<&Bytes>,
    ) -> Result<Option<EtcdRange>, OutsidePrefix> {
        match range {
            crate::KeyRange::Key(k) => {
                if start.is_some_and(|s| s.as_ref() > k.as_ref()) {
                    return Ok(None);
                }
                Ok(Some(EtcdRange {
                    key: self.etcd_key(k)?,
                    end: None,
                }))
            }
            crate::KeyRange::Prefix(p) => {
                // The part of the prefix's keys that has a place in etcd.
                let prefix: &[u8] = match &self.etcd_prefix {
                    None => p,
                    Some(_) if p.starts_with(STORE_PREFIX) => p,
                    Some(_) if STORE_PREFIX.starts_with(p) => STORE_PREFIX,
                    Some(_) => return Ok(None),
                };
                let end = prefix_end(prefix);
                let lower: &[u8] = match start {
                    Some(s) if s.as_ref() > prefix => s,
                    _ => prefix,
                };
                // `end` is `\0` for "to the end": nothing is past it.
                if end != [0] && lower >= end.as_slice() {
                    return Ok(None);
                }
                let key = self.etcd_key(lower)?;
                let end = match &self.etcd_prefix {
                    None => end,
                    Some(_) => prefix_end(&self.etcd_key(prefix)?),
                };
                Ok(Some(EtcdRange {
                    // etcd refuses an empty key: `\0` is the smallest key there is.
                    key: if key.is_empty() { vec![0] } else { key },
                    end: Some(end),
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KeyRange;

    fn prefix(p: &'static str) -> KeyRange {
        KeyRange::Prefix(Bytes::from_static(p.as_bytes()))
    }

    #[test]
    fn prefixes_normalize_as_path_join() {
        assert_eq!(normalize_prefix("/registry"), "/registry/");
        assert_eq!(normalize_prefix("registry/"), "/registry/");
        assert_eq!(normalize_prefix("//a//b/./c/../"), "/a/b/");
        assert_eq!(normalize_prefix(""), "/");
        assert_eq!(normalize_prefix("/"), "/");
    }

    #[test]
    fn default_prefix_is_the_identity_on_every_key() {
        let m = KeyMap::new(DEFAULT_PREFIX);
        for k in [&b"/registry/core/pods/a"[..], b"/a", b"\x00"] {
            assert_eq!(m.etcd_key(k).unwrap(), k);
            assert_eq!(m.store_key(k.to_vec()).unwrap(), k);
        }
        assert_eq!(
            m.range(&prefix(""), None).unwrap(),
            Some(EtcdRange {
                key: vec![0],
                end: Some(vec![0])
            })
        );
        assert_eq!(
            m.range(&prefix("/a/"), Some(&Bytes::from_static(b"/a/x")))
                .unwrap(),
            Some(EtcdRange {
                key: b"/a/x".to_vec(),
                end: Some(b"/a0".to_vec())
            })
        );
        // A start past the prefix matches nothing.
        assert_eq!(
            m.range(&prefix("/a/"), Some(&Bytes::from_static(b"/b")))
                .unwrap(),
            None
        );
    }

    #[test]
    fn another_prefix_replaces_registry() {
        let m = KeyMap::new("/team-a");
        assert_eq!(
            m.etcd_key(b"/registry/core/pods/a").unwrap(),
            b"/team-a/core/pods/a"
        );
        assert_eq!(
            m.store_key(b"/team-a/core/pods/a".to_vec()).unwrap(),
            Bytes::from_static(b"/registry/core/pods/a")
        );
        assert!(m.etcd_key(b"/other").is_err());
        assert_eq!(m.store_key(b"/other".to_vec()), None);
        let pods = m.range(&prefix("/registry/core/pods/"), None).unwrap();
        assert_eq!(
            pods,
            Some(EtcdRange {
                key: b"/team-a/core/pods/".to_vec(),
                end: Some(b"/team-a/core/pods0".to_vec())
            })
        );
        // "" and "/" cover /registry/ only; a prefix beside it covers nothing.
        let all = Some(EtcdRange {
            key: b"/team-a/".to_vec(),
            end: Some(b"/team-a0".to_vec()),
        });
        assert_eq!(m.range(&prefix(""), None).unwrap(), all);
        assert_eq!(m.range(&prefix("/"), None).unwrap(), all);
        assert_eq!(m.range(&prefix("/b/"), None).unwrap(), None);
        assert_eq!(
            m.range(&prefix(""), Some(&Bytes::from_static(b"/z")))
                .unwrap(),
            None
        );
    }

    #[test]
    fn root_prefix_drops_registry() {
        let m = KeyMap::new("/");
        assert_eq!(m.etcd_key(b"/registry/core/x").unwrap(), b"/core/x");
        assert_eq!(
            m.store_key(b"/core/x".to_vec()).unwrap(),
            Bytes::from_static(b"/registry/core/x")
        );
    }

    #[test]
    fn single_keys_past_start_match_nothing() {
        let m = KeyMap::new(DEFAULT_PREFIX);
        let key = KeyRange::Key(Bytes::from_static(b"/a"));
        assert_eq!(
            m.range(&key, Some(&Bytes::from_static(b"/b"))).unwrap(),
            None
        );
        assert!(
            m.range(&key, Some(&Bytes::from_static(b"/a")))
                .unwrap()
                .is_some()
        );
    }
}
