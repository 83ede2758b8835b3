#!/usr/bin/env bash
# make e2e: the end-to-end tests in a real kind cluster. Gives the machine a Docker engine when
# none answers (and stops it again at the end), builds the offline node image and devctl, and
# runs the e2e suite, which makes its own cluster and deletes it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

started_docker=no
if ! timeout 10 docker info >/dev/null 2>&1; then
  hack/docker.sh start
  started_docker=yes
fi
cleanup() { [ "$started_docker" = yes ] && hack/docker.sh stop || true; }
trap cleanup EXIT

image=$(clusters/nodeimage/build.sh | tail -n 1)
go build -o bin/devctl ./devctl/cmd/devctl
MLKUBE_DEVCTL="$root/bin/devctl" MLKUBE_NODE_IMAGE="$image" \
  go test -tags e2e -count=1 -timeout 40m -v ./e2e/
