#!/usr/bin/env bash
# A local three-node RabbitMQ cluster for tests, chaos runs and trying failover by hand:
#
#   scripts/rabbitmq-cluster.sh up         start what is not running, cluster the nodes; the last
#                                          line of stdout is the cluster's AMQP_URL
#   scripts/rabbitmq-cluster.sh down       stop the three nodes and the cluster's epmd (data kept)
#   scripts/rabbitmq-cluster.sh kill N     SIGKILL node N's Erlang VM (beam.smp), by its pid
#   scripts/rabbitmq-cluster.sh stop N     stop node N gracefully (SIGTERM to its VM; the node
#                                          shuts down in order: connections closed, leaders handed over)
#   scripts/rabbitmq-cluster.sh start N    start node N again; returns once it answers AMQP
#   scripts/rabbitmq-cluster.sh status     which nodes run, their ports, the AMQP_URL
#   scripts/rabbitmq-cluster.sh url        the AMQP_URL only
#   scripts/rabbitmq-cluster.sh ctl N ...  rabbitmqctl against node N (its cookie and epmd), e.g.
#                                          `ctl 1 list_queues name type leader members`
#   scripts/rabbitmq-cluster.sh purge      down, then delete the nodes' data (a cluster from nothing next time)
#   scripts/rabbitmq-cluster.sh up --lease PID / release PID
#                                          for test runs (scripts/harness/rabbitmq-cluster.ts): the last
#                                          run to release a cluster that a leased `up` started stops it
#
# The nodes are Debian's rabbitmq-server (the package's own scripts under /usr/lib/rabbitmq, called
# directly: the /usr/sbin wrapper would switch to the rabbitmq user and that user's HOME, whose
# Erlang cookie is the machine broker's). They run as the calling user, each with its own node
# name (svc-rmqN@localhost), AMQP port, Erlang distribution port, configuration, data and logs
# under .tools/rabbitmq-cluster/, an Erlang cookie of their own (HOME=.tools/rabbitmq-cluster/home)
# and a private epmd on a port of its own, started here; so the machine's own broker (port 5672,
# rabbit@localhost, /var/lib/rabbitmq, the epmd on 4369) is never seen, let alone touched.
# Ports (RMQ_CLUSTER_BASE_PORT, default 25700; all below the ephemeral range): epmd on BASE,
# node N's AMQP on BASE+N, its distribution on BASE+10+N. Traffic stays on 127.0.0.1.
#
# A guest on a shared machine: it stops and kills only the processes whose pid files it wrote,
# after checking that the pid is still that process (an Erlang VM with this node's name, or
# epmd). A port taken by anything else stops `up` with a message. One run at a time on the machine
# (flock on RMQ_CLUSTER_LOCK_FILE), as scripts/services.sh does.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${RMQ_CLUSTER_DIR:-$root/.tools/rabbitmq-cluster}"
base_port="${RMQ_CLUSTER_BASE_PORT:-25700}"
lock_file="${RMQ_CLUSTER_LOCK_FILE:-${TMPDIR:-/tmp}/svc-workspace-rabbitmq-cluster.lock}"
rmq_bin="${RMQ_CLUSTER_RABBITMQ_BIN:-/usr/lib/rabbitmq/bin}"
boot_wait_s="${RMQ_CLUSTER_BOOT_SECONDS:-120}"
NODES=(1 2 3)

log() { printf '[rabbitmq-cluster] %s\n' "$*" >&2; }
fail() { log "$*"; exit 1; }
[[ "$base_port" =~ ^[0-9]+$ ]] && ((base_port >= 1024 && base_port <= 65500)) || fail "RMQ_CLUSTER_BASE_PORT must be a port number from 1024 to 65500, not '$base_port'"

epmd_port=$base_port
node_name() { echo "svc-rmq$1@localhost"; }
amqp_port() { echo $((base_port + $1)); }
dist_port() { echo $((base_port + 10 + $1)); }
node_dir() { echo "$dir/node$1"; }
beam_pidfile() { echo "$(node_dir "$1")/beam.pid"; }
cluster_url() {
  local n urls=()
  for n in "${NODES[@]}"; do urls+=("amqp://guest:guest@127.0.0.1:$(amqp_port "$n")"); done
  (IFS=,; echo "${urls[*]}")
}

check_node_arg() { [[ "${1:-}" =~ ^[123]$ ]] || fail "which node? 1, 2 or 3 (got '${1:-}')"; }

# --- one run at a time on this machine (flock on fd 9, released when the script exits) --------
take_lock() {
  command -v flock >/dev/null || { log "flock (util-linux) is missing: running without the machine-wide lock"; return 0; }
  [ -e "$lock_file" ] || (umask 000 && : >>"$lock_file") 2>/dev/null || true
  exec 9<"$lock_file" || fail "cannot read the lock file $lock_file; set RMQ_CLUSTER_LOCK_FILE to another path"
  if ! flock -n 9; then
    log "waiting for another scripts/rabbitmq-cluster.sh on this machine to finish"
    flock -w 300 9 || fail "waited 300 s for the lock $lock_file"
  fi
}

# --- processes ------------------------------------------------------------------------------
# Node N's VM, when its pid file names a live beam.smp started by this script for node N.
node_pid() {
  local f pid; f="$(beam_pidfile "$1")"
  [ -s "$f" ] || return 1
  pid="$(tr -dc 0-9 <"$f")"
  [ -n "$pid" ] && [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == beam* ]] || return 1
  # Its environment names this node's pid file: ours, not some other VM that reused the pid.
  tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "RABBITMQ_PID_FILE=$f" || return 1
  echo "$pid"
}
# Node N's VM found by its environment (its node name and data folder), whatever its pid file
# says: a kill must reach the running VM even when the pid file went stale under it.
node_vm_by_env() {
  local pid d; d="$(node_dir "$1")"
  for pid in $(pgrep -x beam.smp); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "RABBITMQ_MNESIA_BASE=$d/data" || continue
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "RABBITMQ_NODENAME=$(node_name "$1")" || continue
    echo "$pid"
    return 0
  done
  return 1
}
epmd_pid() {
  local pid
  [ -s "$dir/epmd.pid" ] || return 1
  pid="$(tr -dc 0-9 <"$dir/epmd.pid")"
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = epmd ] || return 1
  echo "$pid"
}
port_taken() { timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0"' "$1" 2>/dev/null; }
# The broker answers the AMQP protocol header (not only a TCP accept).
amqp_answers() { timeout "${2:-3}" bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" && printf "AMQP\x00\x00\x09\x01" >&3 && head -c 1 <&3 | grep -q .' "$1" 2>/dev/null; }

# The environment every Erlang VM of this cluster runs with, the CLI's included (into node_env_vars).
node_env() {
  local n="$1" d; d="$(node_dir "$n")"
  node_env_vars=(
    HOME="$dir/home" ERL_EPMD_PORT="$epmd_port" ERL_EPMD_ADDRESS=127.0.0.1 ERL_CRASH_DUMP="$d/log/erl_crash.dump"
    RABBITMQ_CONF_ENV_FILE="$d/rabbitmq-env.conf" RABBITMQ_NODENAME="$(node_name "$n")" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
    RABBITMQ_NODE_PORT="$(amqp_port "$n")" RABBITMQ_DIST_PORT="$(dist_port "$n")"
    RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" RABBITMQ_ADVANCED_CONFIG_FILE="$d/advanced.config"
    RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" RABBITMQ_MNESIA_BASE="$d/data"
    RABBITMQ_LOG_BASE="$d/log" RABBITMQ_PID_FILE="$d/beam.pid"
  )
}

# rabbitmqctl against node N (the package's script, with this cluster's cookie and epmd).
ctl() {
  local n="$1"; shift
  node_env "$n"
  env "${node_env_vars[@]}" "$rmq_bin/rabbitmqctl" -n "$(node_name "$n")" "$@" 9<&-
}

prepare() {
  mkdir -p "$dir/home"
  if [ "$(wc -c <"$dir/home/.erlang.cookie" 2>/dev/null || echo 0)" -lt 20 ]; then
    rm -f "$dir/home/.erlang.cookie"
    (umask 077 && od -An -tx1 -N20 /dev/urandom | tr -d ' \n' >"$dir/home/.erlang.cookie")
  fi
  chmod 400 "$dir/home/.erlang.cookie"
  local n d
  for n in "${NODES[@]}"; do
    d="$(node_dir "$n")"
    mkdir -p "$d/data" "$d/log"
    # Nothing from /etc/rabbitmq: no NODENAME, no listener on 5672, no plugins (management's 15672).
    : >"$d/rabbitmq-env.conf"
    echo '[].' >"$d/enabled_plugins"
    cat >"$d/rabbitmq.conf" <<EOF
# Written by scripts/rabbitmq-cluster.sh (rewritten on every start).
listeners.tcp.1 = 127.0.0.1:$(amqp_port "$n")
log.file.level = info
log.console = false
# As deploy/rabbitmq/rabbitmq.conf: a node cut off from the majority pauses instead of diverging.
cluster_partition_handling = pause_minority
# A shared development disk: alarm only when it is nearly full.
disk_free_limit.absolute = 200MB
EOF
  done
}

ensure_epmd() {
  epmd_pid >/dev/null && return 0
  port_taken "$epmd_port" && fail "port $epmd_port (this cluster's epmd) is taken by a process this script did not start; set RMQ_CLUSTER_BASE_PORT to another range"
  command -v epmd >/dev/null || fail "epmd (Erlang) is not installed: apt-get install rabbitmq-server"
  nohup setsid epmd -port "$epmd_port" -address 127.0.0.1 >>"$dir/epmd.log" 2>&1 </dev/null 9<&- &
  echo $! >"$dir/epmd.pid"
  local i
  for ((i = 0; i < 50; i++)); do port_taken "$epmd_port" && return 0; sleep 0.1; done
  fail "epmd did not listen on 127.0.0.1:$epmd_port (see $dir/epmd.log)"
}

# Node N's ports are free (it is not running: anything there is not ours).
check_ports() {
  local n="$1" p
  for p in "$(amqp_port "$n")" "$(dist_port "$n")"; do
    port_taken "$p" && fail "port $p (node $n) is taken by a process this script did not start; set RMQ_CLUSTER_BASE_PORT to another range"
  done
  return 0
}

# Start node N's VM in the background (without waiting for it).
launch() {
  local n="$1" d; d="$(node_dir "$n")"
  check_ports "$n"
  rm -f "$d/beam.pid"
  # -start_epmd false: never start a stray epmd of the machine's (ours is already up).
  node_env "$n"
  cd "$d"
  env "${node_env_vars[@]}" RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1} -start_epmd false" \
    nohup setsid "$rmq_bin/rabbitmq-server" >>"$d/console.log" 2>&1 </dev/null 9<&- &
  echo $! >"$d/wrapper.pid"
  cd "$root"
}

# Wait until node N answers AMQP (its VM pid file written, the listener up).
await_node() {
  local n="$1" port start=$SECONDS
  port="$(amqp_port "$n")"
  while ((SECONDS - start < boot_wait_s)); do
    if [ -s "$(beam_pidfile "$n")" ] && node_pid "$n" >/dev/null && amqp_answers "$port" 2; then return 0; fi
    if ! kill -0 "$(cat "$(node_dir "$n")/wrapper.pid" 2>/dev/null || echo 0)" 2>/dev/null && ! node_pid "$n" >/dev/null; then
      log "node $n exited while starting; the end of its log ($(node_dir "$n")/console.log):"
      tail -n 20 "$(node_dir "$n")/console.log" >&2 || true
      return 1
    fi
    sleep 0.2
  done
  log "node $n did not answer AMQP on 127.0.0.1:$port within $boot_wait_s s (its logs: $(node_dir "$n")/log/)"
  return 1
}

# Stop node N: SIGTERM to its VM (RabbitMQ shuts down in order), SIGKILL after 60 s.
stop_node() {
  local n="$1" pid i
  pid="$(node_pid "$n")" || { log "node $n is not running"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 600; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    log "node $n (pid $pid) did not stop within 60 s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$(beam_pidfile "$n")"
}

# Nodes node 1 counts as members of its cluster.
members_of_1() { ctl 1 -q eval 'rabbit_mnesia:cluster_nodes(all).' 2>/dev/null | grep -o 'svc-rmq[0-9]@localhost' || true; }

# Node N joins node 1's cluster (its own data, if any, is reset first: it is a member-to-be). As
# rabbitmqctl stop_app, reset, join_cluster and start_app do, in one CLI call instead of four.
join() {
  local n="$1"
  ctl "$n" -q eval "ok = rabbit:stop(), ok = rabbit_mnesia:reset(), ok = rabbit_mnesia:join_cluster('$(node_name 1)', disc), ok = rabbit:start()." >>"$(node_dir "$n")/console.log" 2>&1 && return 0
  log "node $n could not join $(node_name 1) (see $(node_dir "$n")/log/)"
  return 1
}

# `up` failed: stop the nodes it started (the others were running before), then fail.
abort_up() {
  local n
  for n in "$@"; do stop_node "$n"; done
  fail "the cluster did not come up; stopped what this run started (node(s) ${*:-none}); \`purge\` starts over from nothing"
}

up() {
  local lease="" started=() n t0=$SECONDS
  if [ "${1:-}" = --lease ]; then lease="${2:?--lease needs a process id}"; fi
  [ -x "$rmq_bin/rabbitmq-server" ] || fail "RabbitMQ is not installed ($rmq_bin/rabbitmq-server): apt-get install rabbitmq-server"
  prepare
  # Every port first: a port taken by someone else stops `up` before anything is started.
  for n in "${NODES[@]}"; do node_pid "$n" >/dev/null || check_ports "$n"; done
  ensure_epmd
  for n in "${NODES[@]}"; do
    node_pid "$n" >/dev/null && continue
    launch "$n"
    started+=("$n")
  done
  if [ "${#started[@]}" -gt 0 ]; then
    log "starting node(s) ${started[*]} side by side"
    local pids=() waited ok=1
    for n in "${started[@]}"; do await_node "$n" & pids+=($!); done
    for waited in "${pids[@]}"; do wait "$waited" || ok=0; done
    ((ok)) || abort_up "${started[@]}"
  fi
  # Cluster: whoever node 1 does not count as a member joins it (two joins at once can race on
  # the schema, so one after the other; each is a few seconds).
  local members; members="$(members_of_1)"
  [ -n "$members" ] || { log "node 1 did not answer rabbitmqctl (see $(node_dir 1)/log/)"; abort_up "${started[@]}"; }
  for n in 2 3; do
    grep -qx "$(node_name "$n")" <<<"$members" && continue
    log "node $n joins $(node_name 1)"
    join "$n" || abort_up "${started[@]}"
  done
  if [ -n "$lease" ]; then
    mkdir -p "$dir/leases"
    : >"$dir/leases/$lease"
    [ "${#started[@]}" -gt 0 ] && : >"$dir/leases/.started-by-a-lease"
  fi
  log "up in $((SECONDS - t0)) s: $(for n in "${NODES[@]}"; do printf '%s (pid %s) 127.0.0.1:%s  ' "$(node_name "$n")" "$(node_pid "$n")" "$(amqp_port "$n")"; done)"
  cluster_url
}

down() {
  local n pids=()
  for n in "${NODES[@]}"; do stop_node "$n" & pids+=($!); done
  for n in "${pids[@]}"; do wait "$n" || true; done
  local pid
  if pid="$(epmd_pid)"; then kill -TERM "$pid" 2>/dev/null || true; fi
  rm -f "$dir/epmd.pid" "$dir/leases/.started-by-a-lease"
  log "down (data kept in ${dir#"$root"/})"
}

# A test run is done with the cluster: when no other live run holds a lease and a leased `up`
# started it, stop it; a cluster that was up before (started by hand) is left running.
release() {
  local lease="${1:?release needs the process id given to up --lease}" f others=0
  rm -f "$dir/leases/$lease"
  for f in "$dir"/leases/*; do
    [ -e "$f" ] || continue
    if kill -0 "$(basename "$f")" 2>/dev/null; then others=$((others + 1)); else rm -f "$f"; fi
  done
  if ((others > 0)); then log "left running: $others other run(s) use it"; return 0; fi
  if [ -e "$dir/leases/.started-by-a-lease" ]; then down; else log "left running: it was up before the test run"; fi
}

status() {
  local n pid state
  for n in "${NODES[@]}"; do
    if pid="$(node_pid "$n")"; then
      amqp_answers "$(amqp_port "$n")" 2 && state="running, answers AMQP" || state="running, not answering AMQP yet"
      printf '%s\tpid %s\t127.0.0.1:%s (dist %s)\t%s\n' "$(node_name "$n")" "$pid" "$(amqp_port "$n")" "$(dist_port "$n")" "$state"
    else
      printf '%s\t-\t127.0.0.1:%s (dist %s)\tstopped\n' "$(node_name "$n")" "$(amqp_port "$n")" "$(dist_port "$n")"
    fi
  done
  if pid="$(epmd_pid)"; then printf 'epmd\tpid %s\t127.0.0.1:%s\n' "$pid" "$epmd_port"; else printf 'epmd\t-\t127.0.0.1:%s\tstopped\n' "$epmd_port"; fi
  cluster_url
}

cmd="${1:-}"
shift || true
case "$cmd" in
  up) take_lock; up "$@" ;;
  down) take_lock; down ;;
  purge)
    take_lock; down
    for n in "${NODES[@]}"; do rm -rf "$(node_dir "$n")"; done
    log "node data removed"
    ;;
  release) take_lock; release "$@" ;;
  kill)
    check_node_arg "${1:-}"
    if ! pid="$(node_pid "$1")"; then
      pid="$(node_vm_by_env "$1")" || fail "node $1 is not running (no live VM in $(beam_pidfile "$1"), none with its environment)"
      log "node $1: its pid file names no live VM; its VM found by environment (pid $pid)"
    fi
    kill -KILL "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    log "node $1 killed (SIGKILL to pid $pid)"
    ;;
  stop) check_node_arg "${1:-}"; take_lock; stop_node "$1"; log "node $1 stopped" ;;
  start)
    check_node_arg "${1:-}"
    take_lock
    if node_pid "$1" >/dev/null; then log "node $1 is already running"; exit 0; fi
    prepare; ensure_epmd
    t0=$(date +%s%N)
    launch "$1"
    await_node "$1" || exit 1
    log "node $1 answers AMQP after $((($(date +%s%N) - t0) / 1000000)) ms"
    ;;
  status) status ;;
  url) cluster_url ;;
  ctl) check_node_arg "${1:-}"; n="$1"; shift; ctl "$n" "$@" ;;
  *) fail "usage: $0 up [--lease PID] | down | kill N | stop N | start N | status | url | ctl N <rabbitmqctl args> | release PID | purge" ;;
esac
