//! The gRPC statuses of etcd's errors (`server/etcdserver/api/v3rpc/rpctypes/error.go`): the
//! same codes and messages, so etcd's clients recognize them.

use tonic::Status;

/// The flag that makes the endpoint writable.
pub const WRITABLE_FLAG: &str = "--etcd-listen-writable";

/// What a refused write says after etcd's own `etcdserver: permission denied`.
pub const READ_ONLY_HINT: &str =
    "miniplane's etcd endpoint is read-only; start it with --etcd-listen-writable to allow writes";

pub(crate) const COMPACTED: &str = "etcdserver: mvcc: required revision has been compacted";
pub(crate) const FUTURE_REV: &str = "etcdserver: mvcc: required revision is a future revision";
pub(crate) const EMPTY_KEY: &str = "etcdserver: key is not provided";
pub(crate) const KEY_NOT_FOUND: &str = "etcdserver: key not found";
pub(crate) const TOO_MANY_OPS: &str = "etcdserver: too many operations in txn request";
pub(crate) const DUPLICATE_KEY: &str = "etcdserver: duplicate key given in txn request";
pub(crate) const REQUEST_TOO_LARGE: &str = "etcdserver: request is too large";
pub(crate) const LEASE_NOT_FOUND: &str = "etcdserver: requested lease not found";
pub(crate) const LEASE_EXIST: &str = "etcdserver: lease already exists";
pub(crate) const LEASE_TTL_TOO_LARGE: &str = "etcdserver: too large lease TTL";
pub(crate) const STOPPED: &str = "etcdserver: server stopped";

/// The status etcd answers for a store error.
pub(crate) fn status(e: store::Error) -> Status {
    use store::Error as E;
    match e {
        E::Compacted { .. } => Status::out_of_range(COMPACTED),
        E::FutureRevision { .. } => Status::out_of_range(FUTURE_REV),
        E::EmptyKey => Status::invalid_argument(EMPTY_KEY),
        E::ValueTooLarge { .. } => Status::invalid_argument(REQUEST_TOO_LARGE),
        E::TooManyOps { .. } => Status::invalid_argument(TOO_MANY_OPS),
        E::DuplicateKey => Status::invalid_argument(DUPLICATE_KEY),
        E::Closed => Status::unavailable(STOPPED),
        other => Status::internal(format!("etcdserver: {other}")),
    }
}

/// The refusal of a write on a read-only endpoint: etcd's `PermissionDenied`, naming the flag.
pub(crate) fn read_only(what: &str) -> Status {
    Status::permission_denied(format!(
        "etcdserver: permission denied: {what}: {READ_ONLY_HINT}"
    ))
}

/// A request miniplane's endpoint does not serve.
pub(crate) fn unsupported(what: &str) -> Status {
    Status::unimplemented(format!("miniplane's etcd endpoint does not support {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::Revision;
    use tonic::Code;

    #[test]
    fn store_errors_map_to_etcds_codes_and_messages() {
        let cases = [
            (
                store::Error::Compacted {
                    requested: Revision(2),
                    compacted: Revision(5),
                },
                Code::OutOfRange,
                COMPACTED,
            ),
            (
                store::Error::FutureRevision {
                    requested: Revision(9),
                    current: Revision(5),
                },
                Code::OutOfRange,
                FUTURE_REV,
            ),
            (store::Error::EmptyKey, Code::InvalidArgument, EMPTY_KEY),
            (
                store::Error::TooManyOps {
                    ops: 200,
                    limit: 128,
                },
                Code::InvalidArgument,
                TOO_MANY_OPS,
            ),
            (
                store::Error::DuplicateKey,
                Code::InvalidArgument,
                DUPLICATE_KEY,
            ),
            (store::Error::Closed, Code::Unavailable, STOPPED),
        ];
        for (error, code, message) in cases {
            let s = status(error);
            assert_eq!(s.code(), code, "{message}");
            assert_eq!(s.message(), message);
        }
    }

    #[test]
    fn read_only_refusal_is_permission_denied_and_names_the_flag() {
        let s = read_only("put");
        assert_eq!(s.code(), Code::PermissionDenied);
        assert!(s.message().starts_with("etcdserver: permission denied"));
        assert!(s.message().contains(WRITABLE_FLAG), "{}", s.message());
    }
}
