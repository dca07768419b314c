#!/usr/bin/env bash
# The test command named in the README: the whole workspace's tests (unit, property, crash,
# router and end-to-end tests with the real kubectl and kube-rs).
set -euo pipefail
cd "$(dirname "$0")"
exec cargo test --workspace --locked "$@"
