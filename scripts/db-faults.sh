#!/usr/bin/env bash
# A private database to break: a PostgreSQL cluster of its own (initdb into .tools/db-faults/<name>/,
# on a free port) and a patched FerretDB over it (.tools/bin/ferretdb, on another free port), so
# the fault tests, `npm run chaos -- --db-faults` and a developer can kill FerretDB and restart
# PostgreSQL without touching the machine's shared servers (PostgreSQL on 5432, FerretDB on 27017).
#
#   scripts/db-faults.sh up [name]                 start (idempotent); the last line is its MONGODB_URL
#   scripts/db-faults.sh url [name]                print the MONGODB_URL of a running instance
#   scripts/db-faults.sh kill-ferretdb [name]      SIGKILL our FerretDB (by its pid)
#   scripts/db-faults.sh start-ferretdb [name]     start it again and wait until it answers ping
#   scripts/db-faults.sh restart-postgres [name] [seconds]
#                                                  pg_ctl stop -m fast, wait `seconds` (default 0), start
#   scripts/db-faults.sh stop-postgres [name]      pg_ctl stop -m fast
#   scripts/db-faults.sh start-postgres [name]     pg_ctl start (waits until it accepts connections)
#   scripts/db-faults.sh status [name]             pids and ports, one line
#   scripts/db-faults.sh down [name]               stop both by pid and delete the instance's directory
#
# `name` (default `dev`, or DB_FAULTS_NAME) keeps instances apart: each test run uses its own. Only
# the processes this script started are ever stopped, by the pids it recorded (FerretDB) or the
# cluster's own postmaster.pid (pg_ctl -D <our directory>); `down` deletes the cluster, so every
# database created in it goes with it. PostgreSQL refuses to run as root: when we are root, its
# commands run as the `postgres` OS user (runuser), otherwise as the calling user.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cmd="${1:-}"
name="${2:-${DB_FAULTS_NAME:-dev}}"
[[ "$name" =~ ^[A-Za-z0-9_-]{1,40}$ ]] || { echo "[db-faults] bad instance name '$name'" >&2; exit 2; }
dir="$root/.tools/db-faults/$name"
pgbin="${PG_BIN:-/usr/lib/postgresql/15/bin}"
ferret="$root/.tools/bin/ferretdb"

log() { printf '[db-faults %s] %s\n' "$name" "$*" >&2; }
fail() { log "$*"; exit 1; }

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
answers() { timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0"' "$1" 2>/dev/null; }
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 20000))
    answers "$p" || { echo "$p"; return 0; }
  done
  fail "no free port found"
}

# One OP_MSG `ping` to admin over /dev/tcp: true when the reply carries ok: 1.0.
le32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) $((($1 >> 16) & 255)) $((($1 >> 24) & 255)); }
mongo_pings() { # port
  local msg
  msg="$(le32 51)$(le32 1)$(le32 0)$(le32 2013)$(le32 0)\\x00$(le32 30)\\x10ping\\x00$(le32 1)\\x02\$db\\x00$(le32 6)admin\\x00\\x00"
  timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1
    printf "$1" >&3
    len=$(dd bs=1 count=4 <&3 2>/dev/null | od -An -tu4 | tr -dc 0-9)
    [ -n "$len" ] && [ "$len" -gt 4 ] && head -c $((len - 4)) <&3' "$1" "$msg" 2>/dev/null |
    od -An -tx1 | tr -d ' \n' | grep -q '6f6b00000000000000f03f'
}

pg_port() { cat "$dir/pg.port"; }
ferret_port() { cat "$dir/ferretdb.port"; }
url() { echo "mongodb://127.0.0.1:$(ferret_port)/svc"; }
pg_running() { [ -f "$dir/pg/data/postmaster.pid" ] && as_pg "$pgbin/pg_ctl" -D "$dir/pg/data" status >/dev/null 2>&1; }
# Whether the pid we recorded is alive and is our FerretDB binary.
ferret_pid() {
  [ -f "$dir/ferretdb.pid" ] || return 1
  local pid; pid="$(cat "$dir/ferretdb.pid")"
  [ -n "$pid" ] && [ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$ferret")" ] && echo "$pid"
}

start_pg() {
  pg_running && return 0
  as_pg "$pgbin/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/postgres.log" -w -t 60 -o "-p $(pg_port)" start >/dev/null 9>&- ||
    fail "PostgreSQL did not start (see $dir/pg/postgres.log)"
}
stop_pg() {
  pg_running || return 0
  as_pg "$pgbin/pg_ctl" -D "$dir/pg/data" -m fast -w -t 60 stop >/dev/null || fail "PostgreSQL did not stop (see $dir/pg/postgres.log)"
}

# WARNING: one FerretDB process per PostgreSQL database (the patch's write lock lives in the
# process): start_ferret never starts a second one while ours runs.
start_ferret() {
  ferret_pid >/dev/null && return 0
  [ -x "$ferret" ] || fail "$ferret is missing: run \`npm run services\` once (it builds the patched FerretDB)"
  local port; port="$(ferret_port)"
  answers "$port" && fail "something else listens on 127.0.0.1:$port; run \`$0 down $name\` and \`up\` again"
  mkdir -p "$dir/ferretdb-state"
  nohup setsid "$ferret" --handler=postgresql --postgresql-url="postgres://postgres@127.0.0.1:$(pg_port)/ferretdb" \
    --listen-addr="127.0.0.1:$port" --telemetry=disable --state-dir="$dir/ferretdb-state" \
    --debug-addr=127.0.0.1:0 --log-level=WARN >>"$dir/ferretdb.log" 2>&1 </dev/null 9>&- &
  echo $! >"$dir/ferretdb.pid"
  for _ in $(seq 1 100); do mongo_pings "$port" && return 0; sleep 0.1; done
  fail "FerretDB did not answer ping on 127.0.0.1:$port (see $dir/ferretdb.log)"
}
kill_ferret() {
  local pid
  pid="$(ferret_pid)" || return 0
  kill -KILL "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  rm -f "$dir/ferretdb.pid"
}

up() {
  if [ ! -f "$dir/pg/data/PG_VERSION" ]; then
    [ -x "$pgbin/initdb" ] || fail "$pgbin/initdb is missing (apt-get install postgresql-15, or set PG_BIN)"
    rm -rf "$dir"
    mkdir -p "$dir/pg"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir/pg"
    free_port >"$dir/pg.port"
    free_port >"$dir/ferretdb.port"
    as_pg "$pgbin/initdb" -D "$dir/pg/data" -U postgres -A trust -E UTF8 --no-sync >"$dir/pg/initdb.log" 2>&1 ||
      fail "initdb failed (see $dir/pg/initdb.log)"
    # Local TCP only; the socket in our directory (not the shared /var/run/postgresql).
    as_pg tee -a "$dir/pg/data/postgresql.conf" >/dev/null <<EOF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir/pg'
max_connections = 120
synchronous_commit = off
EOF
    start_pg
    as_pg "$pgbin/psql" -h 127.0.0.1 -p "$(pg_port)" -U postgres -d postgres -qc 'create database ferretdb' >/dev/null
    log "PostgreSQL cluster initialised in ${dir#"$root"/}/pg on 127.0.0.1:$(pg_port)"
  fi
  start_pg
  start_ferret
  log "up: PostgreSQL 127.0.0.1:$(pg_port) (postmaster $(head -1 "$dir/pg/data/postmaster.pid")), FerretDB 127.0.0.1:$(ferret_port) (pid $(ferret_pid))"
  url
}

down() {
  if [ -d "$dir" ]; then
    if [ -f "$dir/ferretdb.port" ]; then kill_ferret; fi
    if [ -f "$dir/pg/data/postmaster.pid" ]; then stop_pg; fi
    rm -rf "$dir"
    log "down: stopped and deleted"
  fi
  # The lock file goes too (we still hold it: a command waiting on it finds no instance).
  rm -f "$root/.tools/db-faults/.$name.lock"
}

need_up() { [ -f "$dir/pg.port" ] && [ -f "$dir/ferretdb.port" ] || fail "no instance '$name': run \`$0 up $name\` first"; }

# One command at a time per instance (a test's kill and a developer's status do not interleave).
# What outlives the script (the postmaster, FerretDB) is started with 9>&- so it does not keep it.
case "$cmd" in url | kill-ferretdb | start-ferretdb | stop-postgres | start-postgres | restart-postgres | status) need_up ;; esac
mkdir -p "$root/.tools/db-faults"
exec 9>"$root/.tools/db-faults/.$name.lock"
flock -w 120 9 || fail "another db-faults command holds the lock of '$name'"

case "$cmd" in
  up) up ;;
  down) down ;;
  url) need_up; url ;;
  kill-ferretdb) need_up; kill_ferret; log "FerretDB killed (SIGKILL)" ;;
  start-ferretdb) need_up; start_ferret; log "FerretDB up (pid $(ferret_pid))" ;;
  stop-postgres) need_up; stop_pg; log "PostgreSQL stopped" ;;
  start-postgres) need_up; start_pg; log "PostgreSQL up" ;;
  restart-postgres)
    need_up
    hold="${3:-0}"
    [[ "$hold" =~ ^[0-9]+(\.[0-9]+)?$ ]] || fail "seconds must be a number, not '$hold'"
    stop_pg
    sleep "$hold"
    start_pg
    log "PostgreSQL restarted (down ${hold} s)"
    ;;
  status)
    need_up
    echo "postgres 127.0.0.1:$(pg_port) $(pg_running && echo "up (postmaster $(head -1 "$dir/pg/data/postmaster.pid"))" || echo down); ferretdb 127.0.0.1:$(ferret_port) $(ferret_pid >/dev/null && echo "up (pid $(ferret_pid))" || echo down)"
    ;;
  *)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
