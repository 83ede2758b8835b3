#!/usr/bin/env bash
# make e2e: the end-to-end tests in a real kind cluster. Gives the machine a Docker engine when
# none answers (and stops it again at the end), builds the offline node image and devctl, and
# runs the e2e suite, which makes its own cluster and deletes it. MLKUBE_E2E_RUN=REGEXP runs only
# the tests it matches (go test -run), for working on one of them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# One e2e run at a time on a machine: they share the cluster name and the Docker engine.
lockdir="${MLKUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlkube}"
mkdir -p "$lockdir"
exec {lock}>"$lockdir/e2e.lock"
if ! flock -n "$lock"; then
  echo "e2e.sh: another e2e run holds $lockdir/e2e.lock; waiting for it" >&2
  flock "$lock"
fi

started_docker=no
if ! timeout 10 docker info >/dev/null 2>&1; then
  hack/docker.sh start
  started_docker=yes
fi
# Kueue's manager, which TestKueue's devctl up --kueue needs, is built from the start in the
# background: on a cold machine it is about 10 minutes of compiling Kueue's own Kubernetes
# libraries (0.35; the project's are 0.37, a separate build cache), which then overlap the
# suite's waits on kind instead of adding to them. devctl up waits for it (build-kubernetes.sh
# builds a program once at a time); warm, it answers at once.
kueue_build=""
case "${MLKUBE_E2E_RUN:-TestKueue}" in
  *Kueue*)
    # In a process group of its own, so that an early end stops the go build it runs too.
    setsid nice -n 10 hack/build-kubernetes.sh kueue >"$lockdir/kueue-build.log" 2>&1 &
    kueue_build=$!
    ;;
esac
cleanup() {
  if [ -n "$kueue_build" ] && kill -0 "$kueue_build" 2>/dev/null; then
    kill -- "-$kueue_build" 2>/dev/null || true
    wait "$kueue_build" 2>/dev/null || true
  fi
  [ "$started_docker" = yes ] && hack/docker.sh stop || true
}
trap cleanup EXIT

# The dashboard tests (e2e/dashboard_test.go) drive the dashboard in tmux; a fresh test machine
# has none, and Debian's package is all it takes.
if ! command -v tmux >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "e2e.sh: tmux is missing: apt-get install tmux" >&2
    exit 1
  fi
  echo "e2e.sh: installing tmux" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null
fi

image=$(clusters/nodeimage/build.sh | tail -n 1)
go build -o bin/devctl ./devctl/cmd/devctl
# devctl dashboard runs the dashboard in its own process; the tfjob-tui binary is run too.
go build -o bin/tfjob-tui ./tui/cmd/tfjob-tui
kubectl=$(hack/control-plane.sh | tail -n 1)/kubectl
# -parallel 4: the suite's tail is TestKueue and TestAcrossNodes side by side, and TestKueue's
# three scenarios, in queues of their own, mostly wait on Kueue's timeouts; at go's default (one
# test per core) two of them waited for a slot, 40 s more.
MLKUBE_DEVCTL="$root/bin/devctl" MLKUBE_TUI="$root/bin/tfjob-tui" MLKUBE_NODE_IMAGE="$image" MLKUBE_KUBECTL="$kubectl" \
  go test -tags e2e -count=1 -parallel 4 -timeout 40m -v ${MLKUBE_E2E_RUN:+-run "$MLKUBE_E2E_RUN"} ./e2e/
