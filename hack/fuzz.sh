#!/usr/bin/env bash
# make fuzz: runs every fuzz target of the repository for FUZZTIME each (default 10s), one
# `go test -fuzz` per target (go test fuzzes one target per run), stops at the first failure and
# prints a table of target, package, execs and result. Targets are found, not listed: every
# `func FuzzX(f *testing.F)` in a *_test.go file git knows of (committed or not, unless
# ignored), so a new fuzzer joins without editing this. An optional argument is a regexp that
# target names must match: hack/fuzz.sh 'FuzzTF|FuzzEnv'. FUZZTIME is go test's -fuzztime: a
# duration (30s) or a count of execs (20000x).
#
# FUZZMINIMIZETIME (default 100x) bounds each minimization of a new input: go test's default,
# 60s, lets the minimizing of one input eat a short run, since in these big test binaries (the
# Kubernetes API types, controller-runtime) every exec outside the fuzzing loop costs tens of
# milliseconds. A failing input is still written, only less small.
#
# A failure leaves its input in the package's testdata/fuzz/<target>/; `go test -run
# <target>/<file> ./<package>` replays it, and committed there it stays a regression test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

fuzztime="${FUZZTIME:-10s}"
minimizetime="${FUZZMINIMIZETIME:-100x}"
only="${1:-.}"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# "<package dir> <target>" for every fuzz target, in a stable order.
targets=$(git ls-files --cached --others --exclude-standard -- '*_test.go' |
  { xargs -r grep -H -E '^func Fuzz[A-Za-z0-9_]*\(' || true; } |
  awk -F: '{ dir = $1; if (!sub(/\/[^\/]*$/, "", dir)) dir = "."
             t = $2; sub(/^func /, "", t); sub(/\(.*/, "", t); print dir, t }' |
  sort -u)
if [ -z "$targets" ]; then
  echo "fuzz.sh: no fuzz targets found" >&2
  exit 1
fi

rows=()
table() {
  printf '\n%-20s %-32s %12s  %s\n' TARGET PACKAGE EXECS RESULT
  for row in "${rows[@]}"; do
    # shellcheck disable=SC2086 # a row is four words
    printf '%-20s %-32s %12s  %s\n' $row
  done
  printf '(FUZZTIME=%s each, %s, %s CPUs, load %s)\n' "$fuzztime" "$(go env GOVERSION)" \
    "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"
  if [ "$races" -gt 0 ]; then
    echo "ok*: no input failed, but go test reported its own deadline race (go.dev/issue/75804," \
      "fixed in Go 1.27); a count such as FUZZTIME=20000x has no deadline to race"
  fi
}

# deadlineRace says whether the log of target's run shows only Go's own race at the -fuzztime
# deadline (go.dev/issue/75804, fixed in Go 1.27): the coordinator fails the target with a bare
# "context deadline exceeded" although no input failed and none was written.
deadlineRace() {
  local target=$1 log=$2
  [ "$(grep -c -e '^--- FAIL' -e '^    --- FAIL' "$log")" -eq 1 ] &&
    grep -q "^--- FAIL: $target (" "$log" &&
    grep -qx '    context deadline exceeded' "$log" &&
    ! grep -q -e 'Failing input written' -e '^panic: ' "$log"
}

ran=0
races=0
while read -r dir target; do
  [[ "$target" =~ $only ]] || continue
  ran=$((ran + 1))
  log="$logs/$target.log"
  echo "== $target (./$dir, $fuzztime)"
  status=0
  go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimizetime" \
    "./$dir" >"$log" 2>&1 || status=$?
  # The coordinator's last progress line carries the total: "fuzz: elapsed: 10s, execs: 1234 (...)".
  execs=$(sed -n -E 's/^fuzz: elapsed: [^,]*, execs: ([0-9]+).*/\1/p' "$log" | tail -n 1)
  if [ "$status" -ne 0 ] && deadlineRace "$target" "$log"; then
    races=$((races + 1))
    rows+=("$target ./$dir ${execs:-0} ok*")
    continue
  fi
  if [ "$status" -ne 0 ]; then
    rows+=("$target ./$dir ${execs:-0} FAIL")
    tail -n 60 "$log"
    table
    echo "fuzz.sh: $target failed; its input, if it got that far, is under ./$dir/testdata/fuzz/$target/" >&2
    exit 1
  fi
  rows+=("$target ./$dir ${execs:-0} ok")
done <<<"$targets"

if [ "$ran" -eq 0 ]; then
  echo "fuzz.sh: no fuzz target matches $only" >&2
  exit 1
fi
table
