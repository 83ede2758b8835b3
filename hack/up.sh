#!/usr/bin/env bash
# make up: a local kind cluster with the operator in it. Starts a Docker engine when none
# answers (and leaves it running, with the cluster), then runs devctl up, which chooses the node
# image (kind's published one where Docker has it or can pull it, else the offline one, built
# when missing) unless NODE_IMAGE names one.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
hack/docker.sh start

# devctl rebuilds itself, only when what goes into it changed (bin/devctl build --help says how).
# Where it cannot (no binary yet, one too old to know how, a compile error), go build builds it,
# or says why not.
bin/devctl build --if-changed 2>/dev/null || go build -trimpath -o bin/devctl ./devctl/cmd/devctl
exec bin/devctl up ${NODE_IMAGE:+--image "$NODE_IMAGE"} "$@"
