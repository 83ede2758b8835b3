#!/usr/bin/env bash
# Builds the real control-plane programs the tests run against (kube-apiserver, etcd, kubectl)
# from Go modules, never from downloaded binaries, and links them into bin/k8s/.
#
# The binaries are cached per Kubernetes version in the user's cache dir, outside the clone,
# so a fresh clone (CI) pays only for a symlink once they were built on this machine.
# Prints the directory to use as KUBEBUILDER_ASSETS on its last line.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
module="$root/hack/kubernetes"
version=$(awk '$1=="k8s.io/kubernetes" {print $2}' "$module/go.mod")
etcd_version=$(awk '$1=="go.etcd.io/etcd/server/v3" {print $2}' "$module/go.mod")
cache="${MLKUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlkube}/kubernetes-$version-etcd-$etcd_version"
out="$root/bin/k8s"

build() { # build NAME PACKAGE
  local name=$1 pkg=$2
  if [ -x "$cache/$name" ]; then return; fi
  echo "building $name $version from $pkg (cold: minutes; cached afterwards in $cache)" >&2
  local start=$SECONDS
  local minor=${version#v1.}; minor=${minor%%.*}
  # Without these the server reports v0.0.0-master and clients warn about version skew.
  local ldflags="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  mkdir -p "$cache"
  (cd "$module" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$cache/$name.tmp" "$pkg")
  mv "$cache/$name.tmp" "$cache/$name"
  echo "built $name in $((SECONDS - start))s" >&2
}

build etcd go.etcd.io/etcd/server/v3
build kubectl k8s.io/kubernetes/cmd/kubectl
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver

mkdir -p "$out"
for name in etcd kubectl kube-apiserver; do ln -sfn "$cache/$name" "$out/$name"; done
echo "$out"
