# Progress lines for long work in the build scripts, on stderr (their stdout is their result):
#   source hack/progress.sh
#   trap progress_stop EXIT                 # or call it from the script's own EXIT trap
#   progress_start "debootstrap bookworm"   # then "  still debootstrap bookworm (1m30s)"
#   debootstrap ...                         #   every PROGRESS_EVERY (15) seconds
#   progress_end                            # "  ✓ debootstrap bookworm (1m42s)"
# The work runs in the script's own shell, under its set -e: when it fails, the script exits and
# progress_stop, from the EXIT trap, stops the ticker and prints "  ✗ debootstrap bookworm (5s)".
# No ticker outlives its script, whatever ends it: one whose script is gone stops by itself.
#
# progress_start LABEL LOG, with LOG the output of `go build -v` (the name of each package as it
# starts compiling), ends each line with what the build does now: ": compiling k8s.io/x" or
# ": downloading M V".

_progress_ticker="" _progress_label="" _progress_start=0

# elapsed SECONDS: "42s", "2m05s".
elapsed() {
  if (($1 < 60)); then printf '%ds' "$1"; else printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); fi
}

# _progress_doing LOG: what the last line of a go build -v log says the build does now.
_progress_doing() {
  local last
  [ -n "$1" ] && [ -s "$1" ] || return 0
  last=$(tail -n 1 "$1")
  case $last in
    "go: downloading "*) printf ': downloading %s' "${last#go: downloading }" ;;
    *[[:space:]:#]*) ;;
    ?*) printf ': compiling %s' "$last" ;;
  esac
}

progress_start() {
  local log=${2:-} script=$$
  progress_stop
  _progress_label=$1 _progress_start=$SECONDS
  (
    # The sleep dies with the ticker: it must not hold the script's stderr open.
    trap 'kill "$nap" 2>/dev/null; exit 0' TERM
    while :; do
      sleep "${PROGRESS_EVERY:-15}" &
      nap=$!
      wait "$nap" || true
      kill -0 "$script" 2>/dev/null || exit 0
      printf '  still %s (%s)%s\n' "$_progress_label" "$(elapsed $((SECONDS - _progress_start)))" "$(_progress_doing "$log")"
    done
  ) >&2 &
  _progress_ticker=$!
}

# _progress_finish MARK: stops the ticker and ends the open step's line with MARK.
_progress_finish() {
  [ -n "$_progress_ticker" ] || return 0
  kill "$_progress_ticker" 2>/dev/null || true
  wait "$_progress_ticker" 2>/dev/null || true
  _progress_ticker=""
  printf '  %s %s (%s)\n' "$1" "$_progress_label" "$(elapsed $((SECONDS - _progress_start)))" >&2
}

progress_end() { _progress_finish ✓; }

# progress_stop ends a step that did not reach progress_end: it failed.
progress_stop() { _progress_finish ✗; }
