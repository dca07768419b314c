#!/usr/bin/env bash
# The main job until `miniplane up` lands (issue 6): builds the release binary and runs the whole
# control plane as separate processes — API server with its durable store, controller-manager,
# scheduler and N simulated nodes — on 127.0.0.1, writes a kubeconfig, and stops everything on
# Ctrl-C. Usage: ./cluster.sh [--nodes N] [--port PORT] [--data-dir DIR]
set -euo pipefail
cd "$(dirname "$0")"

nodes=3 port=6443 data=.miniplane
while [ $# -gt 0 ]; do
    case "$1" in
        --nodes) nodes="$2"; shift 2 ;;
        --port) port="$2"; shift 2 ;;
        --data-dir) data="$2"; shift 2 ;;
        *) echo "cluster.sh: unknown option $1 (use --nodes N, --port PORT, --data-dir DIR)" >&2; exit 2 ;;
    esac
done

# MINIPLANE_BIN runs an already-built binary instead (e.g. a debug build).
if [ -n "${MINIPLANE_BIN:-}" ]; then
    bin="$MINIPLANE_BIN"
else
    cargo build --release --quiet -p ctl
    bin="${CARGO_TARGET_DIR:-target}/release/miniplane"
fi
mkdir -p "$data"
url="http://127.0.0.1:$port"
kubeconfig="$data/kubeconfig"
cat > "$kubeconfig" <<KCFG
apiVersion: v1
kind: Config
clusters: [{name: miniplane, cluster: {server: "$url"}}]
users: [{name: miniplane, user: {}}]
contexts: [{name: miniplane, context: {cluster: miniplane, user: miniplane}}]
current-context: miniplane
KCFG

pids=()
stop() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap stop EXIT INT TERM

"$bin" apiserver --data-dir "$data/store" --listen "127.0.0.1:$port" & pids+=($!)
for _ in $(seq 100); do
    curl -fs "$url/readyz" >/dev/null 2>&1 && break
    kill -0 "${pids[0]}" 2>/dev/null || { echo "cluster.sh: the API server did not start" >&2; exit 1; }
    sleep 0.1
done
"$bin" controller-manager --kubeconfig "$kubeconfig" & pids+=($!)
"$bin" scheduler --kubeconfig "$kubeconfig" & pids+=($!)
"$bin" kubelet --nodes "$nodes" --kubeconfig "$kubeconfig" & pids+=($!)

cat <<MSG

miniplane is running at $url with $nodes simulated nodes. In another terminal:

    export KUBECONFIG=$PWD/$kubeconfig
    kubectl get nodes
    kubectl create deployment nginx --image=nginx --replicas=3
    kubectl get deploy,rs,pods -o wide

Ctrl-C stops every component (the store keeps the objects for the next start).
MSG
wait -n "${pids[@]}"
