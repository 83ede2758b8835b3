#!/usr/bin/env bash
# make run: the operator, built from this tree, against the cluster of the current kubeconfig
# when one answers, else against a local kube-apiserver and etcd (no kubelet: pods are created
# and shown, not run). CRDs are installed first. Ctrl-C stops everything this script started.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
kubectl="$root/bin/k8s/kubectl"
hack/control-plane.sh >/dev/null

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

if [ -z "${KUBECONFIG:-}" ] && [ ! -f "$HOME/.kube/config" ] || ! "$kubectl" version --request-timeout=3s >/dev/null 2>&1; then
  echo "no cluster answers at the current kubeconfig; starting a local kube-apiserver and etcd"
  rm -f bin/dev.kubeconfig
  go build -o bin/dev-control-plane ./hack/dev-control-plane
  bin/dev-control-plane --write-kubeconfig bin/dev.kubeconfig &
  pids+=($!)
  for _ in $(seq 1 600); do [ -f bin/dev.kubeconfig ] && break; sleep 0.1; done
  [ -f bin/dev.kubeconfig ] || { echo "the local control plane did not start" >&2; exit 1; }
  export KUBECONFIG="$root/bin/dev.kubeconfig"
else
  echo "installing the CRDs into $("$kubectl" config current-context)"
  "$kubectl" apply --server-side --force-conflicts -k operator/config/crd >/dev/null
fi

cat <<MSG

The operator is starting. In another terminal:
  export KUBECONFIG=$KUBECONFIG
  $kubectl apply -f samples/tfjob-distributed.yaml
  $kubectl get mlkube,pods,services
Ctrl-C stops it.

MSG
bin/mlkube-operator --leader-elect=false --metrics-bind-address=0 --health-probe-bind-address=:8081 "$@" &
pids+=($!)
wait "${pids[-1]}"
