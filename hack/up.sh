#!/usr/bin/env bash
# make up: a local kind cluster with the operator in it. Starts a Docker engine when none
# answers (and leaves it running, with the cluster), builds the offline node image unless
# NODE_IMAGE names one (e.g. kind's own, on a machine that can pull it), then runs devctl up.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
hack/docker.sh start
image=${NODE_IMAGE:-$(clusters/nodeimage/build.sh | tail -n 1)}
go build -o bin/devctl ./devctl/cmd/devctl
exec bin/devctl up --image "$image" "$@"
