#!/usr/bin/env bash
# Builds the real control-plane programs the tests run against (kube-apiserver, etcd, kubectl)
# from Go modules and links them into bin/k8s/. They are cached per version outside the clone
# (hack/build-kubernetes.sh), so a fresh clone pays only for the links once this machine built
# them. Prints the directory to use as KUBEBUILDER_ASSETS on its last line.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
names=(etcd kubectl kube-apiserver)
mapfile -t paths < <("$root/hack/build-kubernetes.sh" "${names[@]}")
[ "${#paths[@]}" -eq "${#names[@]}" ] || { echo "control-plane.sh: build failed" >&2; exit 1; }
mkdir -p "$root/bin/k8s"
for i in "${!names[@]}"; do ln -sfn "${paths[$i]}" "$root/bin/k8s/${names[$i]}"; done
echo "$root/bin/k8s"
