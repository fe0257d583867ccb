#!/usr/bin/env bash
# Brings up the local services the project needs, idempotently and quickly when all is up.
#   - RabbitMQ on AMQP_URL (default amqp://guest:guest@127.0.0.1:5672)
#   - a MongoDB-compatible server on MONGODB_URL (default mongodb://127.0.0.1:27017/svc):
#     when nothing answers there, FerretDB v1.24.0 is built once into .tools/bin and run over
#     the local PostgreSQL.
# A guest on a shared machine: it starts a local server only when nothing listens on its port. A
# server that answers slowly or not at all is waited for (SERVICES_WAIT_SECONDS, default 60) and
# then reported, never stopped: a slow server is not a dead one, and other runs on the machine may
# be using it even when this checkout started it. The only server it ever stops is a FerretDB it
# started itself (by the pid and start time it wrote in .tools/state) that is an older build than
# the one the application needs. One run at a time per machine (a lock, below).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/.tools"
mkdir -p "$tools/bin" "$tools/log" "$tools/state"

AMQP_URL="${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672}"
MONGODB_URL="${MONGODB_URL:-mongodb://127.0.0.1:27017/svc}"
FERRETDB_VERSION="v1.24.0"
FERRETDB_PG_URL="${FERRETDB_POSTGRESQL_URL:-postgres://postgres@127.0.0.1:5432/ferretdb}"
wait_s="${SERVICES_WAIT_SECONDS:-60}"
lock_file="${SERVICES_LOCK_FILE:-${TMPDIR:-/tmp}/svc-workspace-services.lock}"
lock_wait_s="${SERVICES_LOCK_WAIT_SECONDS:-600}"

log() { printf '[services] %s\n' "$*" >&2; }
fail() { log "$*"; exit 1; }
[[ "$wait_s" =~ ^[0-9]+$ ]] || fail "SERVICES_WAIT_SECONDS must be a whole number of seconds, not '$wait_s'"
[[ "$lock_wait_s" =~ ^[0-9]+$ ]] || fail "SERVICES_LOCK_WAIT_SECONDS must be a whole number of seconds, not '$lock_wait_s'"

# --- one run at a time on this machine ---------------------------------------
# Every checkout on the machine (a CI clone beside a developer's) uses the same ports, so the lock
# is machine-wide, not per checkout. flock(1) holds it on fd 9 until the script exits; a killed
# holder leaves no stale lock. Whatever this script starts that outlives it (servers, apt's
# services) is started with 9<&- so it does not keep the lock.
take_lock() {
  command -v flock >/dev/null || { log "flock (util-linux) is missing: running without the machine-wide lock"; return 0; }
  [ -e "$lock_file" ] || (umask 000 && : >>"$lock_file") 2>/dev/null || true
  [ -r "$lock_file" ] || fail "cannot read the lock file $lock_file; set SERVICES_LOCK_FILE to another path"
  # Opened for reading only, and never written: it may be another user's file in a shared /tmp.
  exec 9<"$lock_file"
  if ! flock -n 9; then
    local waited=0 step
    while :; do
      ((waited < lock_wait_s)) || fail "waited $lock_wait_s s for the lock $lock_file, held by another scripts/services.sh (any checkout on this machine) that may be waiting for a slow server or building FerretDB; try again when it is done, or set SERVICES_LOCK_WAIT_SECONDS to wait longer"
      log "waiting for another scripts/services.sh to finish (the lock $lock_file): $waited/$lock_wait_s s"
      step=$((lock_wait_s - waited < 5 ? lock_wait_s - waited : 5))
      flock -w "$step" 9 && break
      waited=$((waited + step))
    done
  fi
}
take_lock

# Debian packages (when we are root). Two apt-gets at once fail on dpkg's lock: this runs under ours.
apt_install() {
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 9<&-
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null 9<&-
}

# --- ffmpeg (local video engine, posters) ----------------------------------
# Idempotent: nothing happens when ffmpeg is on PATH; installs Debian's package when we are root.
if ! command -v ffmpeg >/dev/null || ! command -v ffprobe >/dev/null; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    log "installing ffmpeg (apt-get; once)"
    apt_install ffmpeg
    log "ffmpeg installed: $(ffmpeg -version | head -1)"
  else
    log "ffmpeg is missing and we are not root: install the ffmpeg package (the local video engine needs it)"
  fi
fi

# --- tesseract (OCR of images for POST /extract-flowchart) -------------------
# Idempotent like ffmpeg: installs Debian's tesseract-ocr, the language data of every language in
# EXTRACT_OCR_LANGUAGES (default eng; "eng+deu" needs tesseract-ocr-deu) and a font the tests
# render text with, only when one is missing and we are root.
ocr_packages=()
ocr_langs=""
if command -v tesseract >/dev/null; then ocr_langs="$(tesseract --list-langs 2>/dev/null || true)"; else ocr_packages+=(tesseract-ocr); fi
for lang in $(printf '%s' "${EXTRACT_OCR_LANGUAGES:-eng}" | tr '+' ' '); do
  grep -qx "$lang" <<<"$ocr_langs" || ocr_packages+=("tesseract-ocr-${lang//_/-}")
done
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || ocr_packages+=(fonts-dejavu-core)
if [ "${#ocr_packages[@]}" -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    log "installing ${ocr_packages[*]} (apt-get; once)"
    apt_install "${ocr_packages[@]}"
    log "tesseract installed: $(tesseract --version 2>&1 | head -1)"
  else
    log "missing and we are not root: ${ocr_packages[*]} (OCR of images in POST /extract-flowchart needs them)"
  fi
fi

# --- espeak-ng (local speech engine for POST /speech) ------------------------
# Idempotent like ffmpeg: installs Debian's espeak-ng (its voice data comes with it) only when
# the binary is missing and we are root. The speech pool resamples its output with ffmpeg.
if ! command -v espeak-ng >/dev/null; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    log "installing espeak-ng (apt-get; once)"
    apt_install espeak-ng
    log "espeak-ng installed: $(espeak-ng --version | head -1)"
  else
    log "espeak-ng is missing and we are not root: install the espeak-ng package (the local speech engine needs it)"
  fi
fi

# --- chromium, promtool, docker-compose, fonts (console browser tests, alert rules, deploy/ checks, slides)
# Idempotent like ffmpeg: Debian's chromium (driven by playwright-core in the console tests), the
# prometheus package (promtool checks and unit-tests deploy/prometheus rules; a test scrapes the
# service with it), docker-compose (validates deploy/compose.yaml without a Docker engine) and
# fonts-inter (the slide typeface), each only when missing and we are root. Prometheus's package
# may try to start its own service; we never rely on it (tests run their own on a free port).
extra_packages=()
command -v chromium >/dev/null || extra_packages+=(chromium)
command -v promtool >/dev/null || extra_packages+=(prometheus)
command -v docker-compose >/dev/null || extra_packages+=(docker-compose)
[ -e /usr/share/fonts/opentype/inter/Inter-Regular.otf ] || [ -e /usr/share/fonts/truetype/inter/Inter-Regular.ttf ] || ls /usr/share/fonts/*/inter/ >/dev/null 2>&1 || extra_packages+=(fonts-inter)
if [ "${#extra_packages[@]}" -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    log "installing ${extra_packages[*]} (apt-get; once)"
    apt_install "${extra_packages[@]}"
    # The package's own prometheus service is not ours: when this install started it, stop it
    # through its init script (by the pidfile that script wrote; never by process name).
    if [[ " ${extra_packages[*]} " == *" prometheus "* ]] && [ -x /etc/init.d/prometheus ]; then
      /etc/init.d/prometheus stop >/dev/null 2>&1 || true
    fi
  else
    log "missing and we are not root: ${extra_packages[*]} (console browser tests, promtool checks, compose check, slide font)"
  fi
fi

# host:port of the first host in a URL such as scheme://user:pass@host:port/path
host_port() {
  local rest="${1#*://}"; rest="${rest#*@}"; rest="${rest%%/*}"; rest="${rest%%\?*}"; rest="${rest%%,*}"
  local host="${rest%%:*}" port="${rest##*:}"
  [ "$port" = "$rest" ] && port="$2"
  printf '%s %s' "$host" "$port"
}
is_local() { case "$1" in 127.0.0.1 | localhost | ::1) return 0 ;; *) return 1 ;; esac; }
# A pid file holds "<pid> <start time>" (field 22 of /proc/<pid>/stat): after a reboot or a
# wrap-around the same pid may be another process, which the start time tells apart.
start_time() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }
write_pidfile() { printf '%s %s\n' "$2" "$(start_time "$2")" >"$1"; }
# The pid in a pid file, if that process is still the one recorded.
live_pid() {
  [ -f "$1" ] || return 1
  local pid started
  read -r pid started <"$1" || return 1
  [ -n "$pid" ] && [ -n "$started" ] && [ "$(start_time "$pid")" = "$started" ] && echo "$pid"
}
answers() { timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null; }
# What a TCP connect to host port meets: "open", "refused" (nothing listens: the only case in which
# a local server may be started) or "silent" (no answer in 3 s: a firewall, or a server too busy
# to accept; something may be there, so nothing is started).
tcp_state() {
  local rc=0
  timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null || rc=$?
  case "$rc" in 0) echo open ;; 124) echo silent ;; *) echo refused ;; esac
}
wait_for() { # host port seconds what (a server this script just started)
  local i
  for ((i = 0; i < $3 * 5; i++)); do answers "$1" "$2" && return 0; sleep 0.2; done
  log "$4 did not answer on $1:$2 after $3 s"; return 1
}
# Runs a protocol check (a command whose last argument is its timeout in seconds) until it succeeds
# or SERVICES_WAIT_SECONDS have passed, with a progress line every 5 s. A healthy server answers the
# first, short attempt; after it, one attempt may take all the time that is left: a busy server
# answers late, and a late answer is an answer.
wait_answer() { # what command args...
  local what="$1"; shift
  local start=$SECONDS next=$((SECONDS + 5)) left pid
  "$@" $((wait_s < 2 ? 1 : 2)) && return 0
  while left=$((wait_s - (SECONDS - start))); ((left > 0)); do
    "$@" "$left" 9<&- &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
      sleep 0.1
      if ((SECONDS >= next)); then
        log "waiting for $what: $((SECONDS - start))/$wait_s s"
        next=$((SECONDS + 5))
      fi
    done
    wait "$pid" && return 0
    sleep 0.5
  done
  return 1
}
# "accepts connections" or "does not accept connections in time", for the messages below.
seen_as() { [ "$1" = open ] && echo "accepts connections" || echo "does not accept connections in time"; }

# An AMQP-level check: the broker must answer the protocol header, not just accept TCP.
amqp_answers() { # host port [seconds]
  timeout "${3:-6}" bash -c 'exec 3<>"/dev/tcp/$0/$1" && printf "AMQP\x00\x00\x09\x01" >&3 && head -c 1 <&3 | grep -q .' "$1" "$2" 2>/dev/null
}

# --- RabbitMQ -------------------------------------------------------------
read -r amqp_host amqp_port <<<"$(host_port "$AMQP_URL" 5672)"
rabbit_pidfile="$tools/state/rabbitmq-$amqp_port.pid"
start_rabbitmq() {
  command -v rabbitmq-server >/dev/null || fail "nothing listens on $amqp_host:$amqp_port and rabbitmq-server is not installed (apt-get install rabbitmq-server)"
  # A node that answers rabbitmqctl but not on the port is booting, or listens elsewhere: not ours.
  if command -v rabbitmqctl >/dev/null && timeout 15 rabbitmqctl -q ping >/dev/null 2>&1 9<&-; then
    log "a RabbitMQ node is running (rabbitmqctl ping answers) but nothing listens on $amqp_host:$amqp_port yet; waiting for it"
    wait_answer "RabbitMQ to answer AMQP on $amqp_host:$amqp_port" amqp_answers "$amqp_host" "$amqp_port" ||
      fail "a RabbitMQ node is running but has not answered AMQP on $amqp_host:$amqp_port for $wait_s s; it was not started by this script, so it is left alone: check it with \`rabbitmqctl status\` (its listeners) or point AMQP_URL at its port"
    return 0
  fi
  log "starting the local RabbitMQ (rabbitmq-server -detached)"
  rabbitmq-server -detached >/dev/null 2>&1 9<&- || true
  wait_for "$amqp_host" "$amqp_port" 60 RabbitMQ || exit 1
  for _ in $(seq 1 30); do amqp_answers "$amqp_host" "$amqp_port" && break; sleep 1; done
  amqp_answers "$amqp_host" "$amqp_port" || fail "RabbitMQ did not answer AMQP after starting"
  local pid
  pid="$(timeout 10 rabbitmqctl -q eval 'list_to_integer(os:getpid()).' 2>/dev/null 9<&- | tr -dc 0-9 || true)"
  if [ -n "$pid" ] && [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == beam* ]]; then
    write_pidfile "$rabbit_pidfile" "$pid"
    log "RabbitMQ is up (started by this script: pid $pid in ${rabbit_pidfile#"$root"/})"
  else
    log "RabbitMQ is up (its pid could not be read)"
  fi
}

amqp_state="$(tcp_state "$amqp_host" "$amqp_port")"
if [ "$amqp_state" = refused ]; then
  is_local "$amqp_host" || fail "nothing listens on $amqp_host:$amqp_port (AMQP_URL) and it is not local; not starting anything"
  start_rabbitmq
elif wait_answer "RabbitMQ to answer AMQP on $amqp_host:$amqp_port" amqp_answers "$amqp_host" "$amqp_port"; then
  log "RabbitMQ answers on $amqp_host:$amqp_port"
elif pid="$(live_pid "$rabbit_pidfile")"; then
  fail "RabbitMQ on $amqp_host:$amqp_port (pid $pid, started by this script) $(seen_as "$amqp_state") but has not answered AMQP for $wait_s s; a slow broker is not a dead one and other runs may be using it, so it is left alone: check it with \`rabbitmqctl status\`, wait longer (SERVICES_WAIT_SECONDS), or stop it yourself (kill $pid) and run this again to start a new one"
elif is_local "$amqp_host"; then
  fail "RabbitMQ on $amqp_host:$amqp_port $(seen_as "$amqp_state") but has not answered AMQP for $wait_s s; it was not started by this script, so it is left alone: check it with \`rabbitmqctl status\` or restart it yourself (rabbitmq-server -detached), or wait longer (SERVICES_WAIT_SECONDS)"
else
  fail "RabbitMQ on $amqp_host:$amqp_port (AMQP_URL) $(seen_as "$amqp_state") but has not answered AMQP for $wait_s s; check that broker, or wait longer (SERVICES_WAIT_SECONDS)"
fi

# --- MongoDB-compatible server ---------------------------------------------
# FerretDB is built from the Go module proxy with scripts/ferretdb/*.patch applied (atomic
# read-modify-write commands, no connection held across a write; see the patch's header).
# WARNING: the application refuses an unpatched FerretDB 1.x at start; keep these in step.
FERRETDB_BUILD="$FERRETDB_VERSION-svc.2"
ferret="$tools/bin/ferretdb"
read -r mongo_host mongo_port <<<"$(host_port "$MONGODB_URL" 27017)"
pidfile="$tools/state/ferretdb-$mongo_port.pid"

# One OP_MSG command ({<name>: 1, $db: "admin"}) over /dev/tcp; prints the reply's bytes.
# A real round trip through the server's command handler, not only a TCP accept.
le32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) $((($1 >> 16) & 255)) $((($1 >> 24) & 255)); }
mongo_command() { # host port name [seconds]
  local name="$3" doclen total msg
  doclen=$((26 + ${#name})); total=$((21 + doclen))
  msg="$(le32 $total)$(le32 1)$(le32 0)$(le32 2013)$(le32 0)\\x00$(le32 $doclen)\\x10$name\\x00$(le32 1)\\x02\$db\\x00$(le32 6)admin\\x00\\x00"
  timeout "${4:-5}" bash -c 'exec 3<>"/dev/tcp/$0/$1" || exit 1
    printf "$2" >&3
    len=$(dd bs=1 count=4 <&3 2>/dev/null | od -An -tu4 | tr -dc 0-9)
    [ -n "$len" ] && [ "$len" -gt 4 ] && head -c $((len - 4)) <&3' "$1" "$2" "$msg" 2>/dev/null
}
# The reply must carry ok: 1.0 (the BSON bytes "ok", NUL, then the double 1.0), not an error.
mongo_pings() { mongo_command "$1" "$2" ping "${3:-5}" | od -An -tx1 | tr -d ' \n' | grep -q '6f6b00000000000000f03f'; }
ferret_build_of() { mongo_command "$1" "$2" buildInfo | grep -ao 'v1\.[0-9]*\.[0-9]*[-a-z0-9.]*' | head -1; }
# Whether the process in our pid file is still the one we started, and is our FerretDB binary.
ours_running() {
  local pid
  pid="$(live_pid "$pidfile")" && [ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$ferret")" ]
}
stop_ours() {
  local pid; read -r pid _ <"$pidfile"
  log "stopping the FerretDB this script started (pid $pid): $1"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 25); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  rm -f "$pidfile"
}

mongo_state="$(tcp_state "$mongo_host" "$mongo_port")"
if [ "$mongo_state" != refused ]; then
  if wait_answer "ping on $mongo_host:$mongo_port" mongo_pings "$mongo_host" "$mongo_port"; then
    build="$(ferret_build_of "$mongo_host" "$mongo_port" || true)"
    if [ -n "$build" ] && [ "$build" != "$FERRETDB_BUILD" ] && ours_running; then
      stop_ours "it is FerretDB $build, not the patched $FERRETDB_BUILD"
    else
      log "MongoDB-compatible server answers ping on $mongo_host:$mongo_port${build:+ (FerretDB $build)}"
      exit 0
    fi
  elif ours_running; then
    fail "the FerretDB this script started on $mongo_host:$mongo_port (pid $(live_pid "$pidfile")) $(seen_as "$mongo_state") but has not answered ping for $wait_s s; a slow server is not a dead one and other runs may be using it, so it is left alone: check .tools/log/ferretdb.log, wait longer (SERVICES_WAIT_SECONDS), or stop it yourself and run this again"
  else
    fail "the MongoDB-compatible server on $mongo_host:$mongo_port $(seen_as "$mongo_state") but has not answered ping (ok: 1) for $wait_s s; it was not started by this script, so it is left alone: check it (its log; mongosh --eval 'db.runCommand({ ping: 1 })') or restart it yourself, point MONGODB_URL elsewhere, or wait longer (SERVICES_WAIT_SECONDS)"
  fi
fi
is_local "$mongo_host" || fail "nothing listens on $mongo_host:$mongo_port (MONGODB_URL) and it is not local; not starting anything"

if [ ! -x "$ferret" ] || [ "$("$ferret" --version 2>/dev/null | sed -n 's/^version: //p')" != "$FERRETDB_BUILD" ]; then
  command -v go >/dev/null || fail "Go is needed to build FerretDB"
  log "building FerretDB $FERRETDB_BUILD from the Go module proxy with scripts/ferretdb/*.patch (once; cached in .tools/bin)"
  dir="$(go mod download -json "github.com/FerretDB/FerretDB@$FERRETDB_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [ -n "$dir" ] && [ -d "$dir" ] || fail "go mod download gave no module directory"
  src="$tools/src/ferretdb"
  rm -rf "$src"; mkdir -p "$tools/src"
  cp -r "$dir" "$src"; chmod -R u+w "$src"
  for p in "$root"/scripts/ferretdb/*.patch; do
    (cd "$src" && patch -p1 --quiet --forward <"$p") || fail "patch $p did not apply"
  done
  # The module lacks the generated version file; without it the binary panics at start
  # ("Invalid build/version/version.txt file content", FerretDB issue #2982).
  echo "$FERRETDB_BUILD" >"$src/build/version/version.txt"
  (cd "$src" && go build -o "$ferret.new" ./cmd/ferretdb) >"$tools/log/ferretdb-build.log" 2>&1 || {
    log "plain build failed, retrying with -checklinkname=0 (see .tools/log/ferretdb-build.log)"
    (cd "$src" && go build -ldflags=-checklinkname=0 -o "$ferret.new" ./cmd/ferretdb) >>"$tools/log/ferretdb-build.log" 2>&1
  }
  mv "$ferret.new" "$ferret"
  rm -rf "$src"
  log "FerretDB built: $("$ferret" --version | head -1)"
fi

# FerretDB keeps its data in a PostgreSQL database of its own.
pg_db="${FERRETDB_PG_URL##*/}"; pg_db="${pg_db%%\?*}"
read -r pg_host pg_port <<<"$(host_port "$FERRETDB_PG_URL" 5432)"
pg_user="postgres"
pg_answers() { timeout "${3:-5}" psql -h "$1" -p "$2" -U "$pg_user" -d postgres -tAc 'select 1' 2>/dev/null | grep -q 1; }
if [ "$(tcp_state "$pg_host" "$pg_port")" = refused ]; then
  is_local "$pg_host" || fail "nothing listens on $pg_host:$pg_port (FERRETDB_POSTGRESQL_URL) and it is not local; not starting anything"
  log "nothing listens on $pg_host:$pg_port; starting the local PostgreSQL cluster (pg_ctlcluster)"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start >/dev/null 2>&1 9<&- || true
  wait_for "$pg_host" "$pg_port" 30 PostgreSQL || exit 1
fi
wait_answer "PostgreSQL to answer on $pg_host:$pg_port" pg_answers "$pg_host" "$pg_port" ||
  fail "PostgreSQL on $pg_host:$pg_port (FERRETDB_POSTGRESQL_URL) has not answered a query for $wait_s s; this script does not stop or restart it: check it (pg_lsclusters, its log)"
if ! psql -h "$pg_host" -p "$pg_port" -U "$pg_user" -d postgres -tAc "select 1 from pg_database where datname='$pg_db'" | grep -q 1; then
  log "creating PostgreSQL database $pg_db"
  psql -h "$pg_host" -p "$pg_port" -U "$pg_user" -d postgres -qc "create database \"$pg_db\"" >/dev/null
fi

# WARNING: one FerretDB process per PostgreSQL database: the patch's write lock lives in the
# process, so a second FerretDB over the same database would break single-document atomicity.
log "starting FerretDB $FERRETDB_BUILD on $mongo_host:$mongo_port (log: .tools/log/ferretdb.log)"
nohup setsid "$ferret" --handler=postgresql --postgresql-url="$FERRETDB_PG_URL" \
  --listen-addr="$mongo_host:$mongo_port" --telemetry=disable --state-dir="$tools/state" \
  --debug-addr="${FERRETDB_DEBUG_ADDR:-127.0.0.1:0}" --log-level=WARN >>"$tools/log/ferretdb.log" 2>&1 </dev/null 9<&- &
write_pidfile "$pidfile" $!
wait_for "$mongo_host" "$mongo_port" 30 FerretDB || exit 1
for _ in $(seq 1 25); do mongo_pings "$mongo_host" "$mongo_port" && break; sleep 0.2; done
mongo_pings "$mongo_host" "$mongo_port" || fail "FerretDB does not answer ping after starting"
log "FerretDB is up (answers ping)"
