#!/usr/bin/env bash
# Times `devctl up` from nothing (cold) and on an existing cluster (warm), and `make up` on an
# existing cluster with nothing changed (no-op: hack/up.sh, the node image check and devctl's
# build check included), against a bare `kind create cluster` with the same node image, N times
# each, and prints the medians:
#   hack/bench-up.sh [N] [WORKERS]   (default 3 and 0; needs a Docker engine and the node image)
# With WORKERS, both make clusters of one control plane and that many workers: devctl with
# --workers (flannel), bare kind with the config devctl generates for it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
n=${1:-3}
workers=${2:-0}
image=$(clusters/nodeimage/build.sh | tail -n 1)
go build -o bin/devctl ./devctl/cmd/devctl
go build -o bin/kind sigs.k8s.io/kind
export KUBECONFIG=$(mktemp)
nets=$(mktemp -d)
trap 'rm -rf "$KUBECONFIG" "$nets"' EXIT
config=clusters/kind.yaml up_flags=()
[ "$workers" -eq 0 ] || config=$nets/kind.yaml up_flags=(--workers "$workers")

secs() { local s=$(date +%s.%N); "$@" >/dev/null 2>&1; awk -v a="$(date +%s.%N)" -v b="$s" 'BEGIN {printf "%.2f", a - b}'; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

kind=() cold=() warm=() noop=()
for i in $(seq 1 "$n"); do
  # The config devctl up --workers makes, over empty folders for the nodes' network configs.
  [ "$workers" -eq 0 ] || bin/devctl kind-config --workers "$workers" --net-dir "$nets" > "$config"
  kind+=("$(secs bin/kind create cluster --name bench-kind --image "$image" --config "$config" --wait 5m)")
  bin/kind delete cluster --name bench-kind >/dev/null 2>&1
  cold+=("$(secs bin/devctl up --name bench-devctl --image "$image" "${up_flags[@]}")")
  warm+=("$(secs bin/devctl up --name bench-devctl --image "$image" "${up_flags[@]}")")
  noop+=("$(secs hack/up.sh --name bench-devctl)")
  bin/devctl down --name bench-devctl >/dev/null 2>&1
  echo "run $i: kind create ${kind[-1]}s, devctl up cold ${cold[-1]}s, warm ${warm[-1]}s, make up no-op ${noop[-1]}s" >&2
done
printf '| what | median of %d (s) | runs (s) |\n| --- | --- | --- |\n' "$n"
printf '| `kind create cluster --wait 5m` (bare, same image) | %.1f | %s |\n' "$(printf '%s\n' "${kind[@]}" | median)" "$(printf '%.1f ' "${kind[@]}")"
printf '| `devctl up`, no cluster (cold) | %.1f | %s |\n' "$(printf '%s\n' "${cold[@]}" | median)" "$(printf '%.1f ' "${cold[@]}")"
printf '| `devctl up`, cluster exists (warm) | %.1f | %s |\n' "$(printf '%s\n' "${warm[@]}" | median)" "$(printf '%.1f ' "${warm[@]}")"
printf '| `make up`, cluster exists, nothing changed (no-op) | %.1f | %s |\n' "$(printf '%s\n' "${noop[@]}" | median)" "$(printf '%.1f ' "${noop[@]}")"
