#!/usr/bin/env bash
# make up: a local kind cluster with the operator in it. Starts a Docker engine when none
# answers (and leaves it running, with the cluster), then runs devctl up, which builds the
# offline node image unless NODE_IMAGE names one.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
hack/docker.sh start

# devctl is built only when what goes into it changed: go build's own check that a program this
# size is up to date takes over a second on 2 cores, hashing the inputs a fifth of that. They
# are the toolchain and its settings, go.mod and go.sum (the version of every other module), and
# the files of this module that go list says the build reads (embedded ones too), by content.
devctl_inputs() {
  go version
  go env GOFLAGS GOOS GOARCH CGO_ENABLED GOEXPERIMENT CC
  cat go.mod go.sum
  go list -deps -json=Dir,GoFiles,CgoFiles,EmbedFiles ./devctl/cmd/devctl | awk -v root="$root/" '
    /^\t"Dir": "/ { dir = $0; sub(/^\t"Dir": "/, "", dir); sub(/",?$/, "", dir) }
    /^\t"(GoFiles|CgoFiles|EmbedFiles)": \[/ { files = 1; next }
    /^\t\]/ { files = 0 }
    files && index(dir, root) == 1 { f = $0; sub(/^\t\t"/, "", f); sub(/",?$/, "", f); print dir "/" f }' |
    xargs -r -d '\n' sha256sum
}
# The stamp also names the binary (size, time): one built by another script is rebuilt once.
stampfile=bin/.devctl.stamp
binary() { stat -c '%s %Y' bin/devctl 2>/dev/null || true; }
inputs=$(devctl_inputs | sha256sum | cut -c1-16) || inputs=""
if [ -z "$inputs" ] || [ "$(cat "$stampfile" 2>/dev/null)" != "$inputs $(binary)" ]; then
  rm -f "$stampfile"
  go build -o bin/devctl ./devctl/cmd/devctl
  # Remembered unless a source changed during the build: then the next run builds again.
  if [ -n "$inputs" ] && [ "$(devctl_inputs | sha256sum | cut -c1-16)" = "$inputs" ]; then
    echo "$inputs $(binary)" > "$stampfile"
  fi
fi
exec bin/devctl up ${NODE_IMAGE:+--image "$NODE_IMAGE"} "$@"
