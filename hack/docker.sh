#!/usr/bin/env bash
# Gives a test machine a Docker engine when none answers, and stops it again:
#   hack/docker.sh start   # nothing to do where `docker info` works (a laptop with Docker)
#   hack/docker.sh stop    # stops only an engine this script started
# It installs Debian's docker.io when dockerd is missing, starts dockerd in the background and
# waits for it. On hosts whose capability bounding set lacks CAP_SYS_RESOURCE (some VMs and
# sandboxes), Docker 20.10 cannot start privileged containers, kind's nodes among them
# ("unable to apply caps: operation not permitted"); there dockerd gets a runc wrapper that
# drops that one capability from each container's spec.
set -euo pipefail

state="${MLKUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlkube}/docker"
pidfile="$state/dockerd.pid"
log="$state/dockerd.log"
wrapper="$state/runc-without-sys-resource"

say() { echo "docker.sh: $*" >&2; }

engine_answers() { timeout 10 docker info >/dev/null 2>&1; }

# CAP_SYS_RESOURCE is capability 24.
lacks_sys_resource() {
  local bnd
  bnd=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
  (( (16#$bnd >> 24 & 1) == 0 ))
}

install_engine() {
  command -v dockerd >/dev/null && command -v iptables >/dev/null && command -v jq >/dev/null && return
  [ "$(id -u)" = 0 ] || { say "dockerd is not installed and installing it needs root"; exit 1; }
  say "installing Debian's docker.io (with iptables, jq)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends docker.io iptables jq >/dev/null
}

write_wrapper() {
  local runc
  runc=$(command -v runc)
  mkdir -p "$state"
  cat > "$wrapper.tmp" <<WRAPPER
#!/usr/bin/env bash
# Written by hack/docker.sh: drops CAP_SYS_RESOURCE, which this host cannot grant, from the
# OCI spec of every container (create/run: the bundle's config.json; exec: --process FILE),
# then runs the real runc.
drop() {
  local f=\$1 key=\$2
  [ -f "\$f" ] || return 0
  jq "\$key |= (if . then with_entries(.value |= (if type == \"array\" then map(select(. != \"CAP_SYS_RESOURCE\")) else . end)) else . end)" "\$f" > "\$f.mlkube" && mv "\$f.mlkube" "\$f"
}
bundle=. process=
args=("\$@")
for ((i = 0; i < \${#args[@]}; i++)); do
  case "\${args[\$i]}" in
    --bundle|-b) bundle=\${args[\$((i + 1))]} ;;
    --bundle=*) bundle=\${args[\$i]#--bundle=} ;;
    --process|-p) process=\${args[\$((i + 1))]} ;;
    --process=*) process=\${args[\$i]#--process=} ;;
  esac
done
for a in "\$@"; do
  case "\$a" in
    create|run) drop "\$bundle/config.json" .process.capabilities; break ;;
    exec) [ -n "\$process" ] && drop "\$process" .capabilities; break ;;
  esac
done
exec $runc "\$@"
WRAPPER
  chmod 755 "$wrapper.tmp"
  mv "$wrapper.tmp" "$wrapper"
}

start() {
  if engine_answers; then
    say "a Docker engine answers already; nothing to do"
    return
  fi
  install_engine
  mkdir -p "$state"
  local args=(--storage-driver=overlay2 --exec-opt native.cgroupdriver=cgroupfs --pidfile="$pidfile")
  if lacks_sys_resource; then
    say "this host lacks CAP_SYS_RESOURCE; privileged containers run through $wrapper"
    write_wrapper
    args+=(--add-runtime "mlkube-runc=$wrapper" --default-runtime mlkube-runc)
  fi
  say "starting dockerd (log: $log)"
  # setsid: the engine outlives this script, and is stopped by `hack/docker.sh stop`.
  setsid dockerd "${args[@]}" >"$log" 2>&1 < /dev/null &
  for _ in $(seq 1 120); do
    engine_answers && { say "Docker engine up"; return; }
    sleep 0.5
  done
  say "dockerd did not answer within 60s; last lines of $log:"
  tail -n 20 "$log" >&2
  exit 1
}

stop() {
  if [ ! -f "$pidfile" ]; then
    say "no engine started by this script; nothing to stop"
    return
  fi
  local pid
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    say "stopping dockerd ($pid)"
    kill "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: hack/docker.sh start|stop" >&2; exit 2 ;;
esac
