#!/usr/bin/env bash
# The test command named in the README: the whole workspace's tests (unit, property, crash,
# router and end-to-end tests with the real kubectl, kube-rs and a headless Chromium).
#
# First it makes sure what the end-to-end tests run is installed, from Debian's packages:
#   kubectl          the real kubectl (Debian's dispatcher, which runs the kubectl matching
#                    the server's minor version, 1.33 for miniplane); the tests look for it in
#                    /usr/bin or /usr/local/bin
#   chromium         the web UI's tests drive a real headless Chromium (or $CHROMIUM) ...
#   chromium-driver  ... through chromedriver, found on the PATH
#   protobuf-compiler  protoc, which the etcd client of the store bench (a dev-dependency of
#                    the store crate, so built with its tests) compiles etcd's API with, and
#                    store-grpc's build script compiles miniplane's etcd .proto files with
#   etcd-client      the real etcdctl (/usr/bin/etcdctl, etcd 3.4), which the end-to-end tests
#                    run against `miniplane apiserver --etcd-listen` (tests/etcdctl.rs)
#   etcd-server      the real etcd (/usr/bin/etcd, 3.4): the store's etcd backend is tested on
#                    a 3-member cluster on loopback ports (store/tests/etcd/), and so is the
#                    API server on it (tests/apiserver_etcd.rs)
#   python3-venv     the Python `kubernetes` client's test runs it from a virtual environment,
#                    target/python-client, made here with the client from PyPI (pinned below)
# As root, missing packages are installed with apt-get; otherwise the script stops at once,
# naming every missing package and the command that installs them.
set -euo pipefail
cd "$(dirname "$0")"

missing=()
[ -x /usr/bin/kubectl ] || [ -x /usr/local/bin/kubectl ] || missing+=(kubectl)
if [ -z "${CHROMIUM:-}" ] && [ ! -x /usr/lib/chromium/chromium ] \
    && ! command -v chromium >/dev/null 2>&1 \
    && ! command -v chromium-browser >/dev/null 2>&1 \
    && ! command -v google-chrome >/dev/null 2>&1; then
    missing+=(chromium)
fi
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
[ -n "${PROTOC:-}" ] || command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler)
[ -x /usr/bin/etcdctl ] || missing+=(etcd-client)
[ -x /usr/bin/etcd ] || missing+=(etcd-server)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)

if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "test.sh: the tests need these Debian packages, not installed: ${missing[*]}" >&2
        echo "test.sh: install them (as root), then run ./test.sh again:" >&2
        echo "    sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    echo "test.sh: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q "${missing[@]}"
fi

# The official Python client of the Kubernetes release the server reports (1.33).
python_client=kubernetes==33.1.0
venv=target/python-client
if ! "$venv/bin/python" -c 'import kubernetes, sys; sys.exit(kubernetes.__version__ != "33.1.0")' \
        >/dev/null 2>&1; then
    echo "test.sh: installing the Python client ($python_client) in $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$python_client"
fi

# MINIPLANE_TEST_STORE=etcd ./test.sh: the same tests with the API servers of the end-to-end
# tests on an etcd member started here (Debian's etcd, loopback ports, data in a temporary
# directory, stopped at the end), each server under a key prefix of its own
# (tests/support/store.rs).
if [ "${MINIPLANE_TEST_STORE:-embedded}" = etcd ]; then
    etcd_dir=$(mktemp -d)
    read -r client_port peer_port < <(python3 -c 'import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')
    /usr/bin/etcd --name test --data-dir "$etcd_dir/data" \
        --listen-client-urls "http://127.0.0.1:$client_port" \
        --advertise-client-urls "http://127.0.0.1:$client_port" \
        --listen-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-cluster "test=http://127.0.0.1:$peer_port" \
        --max-request-bytes 2097152 --quota-backend-bytes 8589934592 \
        >"$etcd_dir/etcd.log" 2>&1 &
    etcd_pid=$!
    trap 'kill "$etcd_pid" 2>/dev/null; wait "$etcd_pid" 2>/dev/null; rm -rf "$etcd_dir"' EXIT
    for _ in $(seq 100); do
        ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:$client_port" endpoint health \
            >/dev/null 2>&1 && break
        sleep 0.1
    done
    export MINIPLANE_TEST_ETCD_SERVERS="http://127.0.0.1:$client_port"
    echo "test.sh: the end-to-end tests' API servers keep their objects in etcd at $MINIPLANE_TEST_ETCD_SERVERS"
    cargo test --workspace --locked "$@"
    exit
fi

exec cargo test --workspace --locked "$@"
