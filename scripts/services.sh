#!/usr/bin/env bash
# Brings up the local services the project needs, idempotently and quickly when all is up.
#   - RabbitMQ on AMQP_URL (default amqp://guest:guest@127.0.0.1:5672)
#   - a MongoDB-compatible server on MONGODB_URL (default mongodb://127.0.0.1:27017/svc):
#     when nothing answers there, FerretDB v1.24.0 is built once into .tools/bin and run over
#     the local PostgreSQL.
# Servers that already answer (a real MongoDB 7, a RabbitMQ cluster) are left alone.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/.tools"
mkdir -p "$tools/bin" "$tools/log" "$tools/state"

AMQP_URL="${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672}"
MONGODB_URL="${MONGODB_URL:-mongodb://127.0.0.1:27017/svc}"
FERRETDB_VERSION="v1.24.0"
FERRETDB_PG_URL="${FERRETDB_POSTGRESQL_URL:-postgres://postgres@127.0.0.1:5432/ferretdb}"

log() { printf '[services] %s\n' "$*" >&2; }

# --- ffmpeg (local video engine, posters) ----------------------------------
# Idempotent: nothing happens when ffmpeg is on PATH; installs Debian's package when we are root.
if ! command -v ffmpeg >/dev/null || ! command -v ffprobe >/dev/null; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    log "installing ffmpeg (apt-get; once)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ffmpeg >/dev/null
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
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${ocr_packages[@]}" >/dev/null
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
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends espeak-ng >/dev/null
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
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${extra_packages[@]}" >/dev/null
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
answers() { timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }
wait_for() { # host port seconds what
  local i
  for ((i = 0; i < $3 * 5; i++)); do answers "$1" "$2" && return 0; sleep 0.2; done
  log "$4 did not answer on $1:$2 after $3 s"; return 1
}

# An AMQP-level check: the broker must answer the protocol header, not just accept TCP.
# (We have seen a local RabbitMQ 3.10 accept connections and never answer them.)
amqp_answers() {
  timeout 6 bash -c "exec 3<>/dev/tcp/$1/$2 && printf 'AMQP\\x00\\x00\\x09\\x01' >&3 && head -c 1 <&3 | grep -q ." 2>/dev/null
}

# --- RabbitMQ -------------------------------------------------------------
# A wedged local broker is restarted through rabbitmqctl (stop_app/start_app, then shutdown),
# and only as a last resort by the pid that the broker itself reports: never by a process name.
restart_local_rabbitmq() {
  log "RabbitMQ accepts connections but does not answer AMQP; restarting the local broker (rabbitmqctl stop_app/start_app)"
  if timeout 30 rabbitmqctl -q stop_app >/dev/null 2>&1 && timeout 30 rabbitmqctl -q start_app >/dev/null 2>&1; then
    for _ in $(seq 1 15); do amqp_answers "$amqp_host" "$amqp_port" && return 0; sleep 1; done
  fi
  local pid
  pid="$(timeout 10 rabbitmqctl -q eval 'list_to_integer(os:getpid()).' 2>/dev/null | tr -dc 0-9 || true)"
  log "stop_app/start_app did not help; shutting the broker down (rabbitmqctl shutdown${pid:+, pid $pid})"
  if ! timeout 30 rabbitmqctl -q shutdown >/dev/null 2>&1 && [ -n "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  fi
  sleep 1
}
read -r amqp_host amqp_port <<<"$(host_port "$AMQP_URL" 5672)"
if answers "$amqp_host" "$amqp_port" && ! amqp_answers "$amqp_host" "$amqp_port"; then
  case "$amqp_host" in
    127.0.0.1|localhost) restart_local_rabbitmq ;;
    *) log "RabbitMQ at $amqp_host:$amqp_port does not answer AMQP"; exit 1 ;;
  esac
fi
if amqp_answers "$amqp_host" "$amqp_port"; then
  log "RabbitMQ answers on $amqp_host:$amqp_port"
else
  case "$amqp_host" in
    127.0.0.1|localhost) ;;
    *) log "RabbitMQ at $amqp_host:$amqp_port does not answer and is not local; not starting anything"; exit 1 ;;
  esac
  command -v rabbitmq-server >/dev/null || { log "rabbitmq-server is not installed (apt-get install rabbitmq-server)"; exit 1; }
  log "starting the local RabbitMQ (rabbitmq-server -detached)"
  rabbitmq-server -detached >/dev/null 2>&1 || true
  wait_for "$amqp_host" "$amqp_port" 60 RabbitMQ
  for _ in $(seq 1 30); do amqp_answers "$amqp_host" "$amqp_port" && break; sleep 1; done
  amqp_answers "$amqp_host" "$amqp_port" || { log "RabbitMQ did not answer AMQP after starting"; exit 1; }
  log "RabbitMQ is up"
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
mongo_command() { # host port name
  local name="$3" doclen total msg
  doclen=$((26 + ${#name})); total=$((21 + doclen))
  msg="$(le32 $total)$(le32 1)$(le32 0)$(le32 2013)$(le32 0)\\x00$(le32 $doclen)\\x10$name\\x00$(le32 1)\\x02\$db\\x00$(le32 6)admin\\x00\\x00"
  timeout 5 bash -c 'exec 3<>"/dev/tcp/$0/$1" || exit 1
    printf "$2" >&3
    len=$(dd bs=1 count=4 <&3 2>/dev/null | od -An -tu4 | tr -dc 0-9)
    [ -n "$len" ] && [ "$len" -gt 4 ] && head -c $((len - 4)) <&3' "$1" "$2" "$msg" 2>/dev/null
}
# The reply must carry ok: 1.0 (the BSON bytes "ok", NUL, then the double 1.0), not an error.
mongo_pings() { mongo_command "$1" "$2" ping | od -An -tx1 | tr -d ' \n' | grep -q '6f6b00000000000000f03f'; }
ferret_build_of() { mongo_command "$1" "$2" buildInfo | grep -ao 'v1\.[0-9]*\.[0-9]*[-a-z0-9.]*' | head -1; }
# Whether the process in our pid file is alive and is our FerretDB binary.
ours_running() {
  [ -f "$pidfile" ] || return 1
  local pid; pid="$(cat "$pidfile")"
  [ -n "$pid" ] && [ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$ferret")" ]
}
stop_ours() {
  local pid; pid="$(cat "$pidfile")"
  log "stopping the FerretDB this script started (pid $pid): $1"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 25); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  rm -f "$pidfile"
}

if answers "$mongo_host" "$mongo_port"; then
  # Three chances over about 20 s: a busy server is slow, a wedged one never answers.
  if ! mongo_pings "$mongo_host" "$mongo_port" && ! { sleep 2; mongo_pings "$mongo_host" "$mongo_port"; } && ! { sleep 5; mongo_pings "$mongo_host" "$mongo_port"; }; then
    if ours_running; then
      stop_ours "it accepts connections but does not answer ping (wedged)"
    else
      log "the server on $mongo_host:$mongo_port accepts connections but does not answer ping (ok: 1), and this script did not start it; restart it"
      exit 1
    fi
  else
    build="$(ferret_build_of "$mongo_host" "$mongo_port" || true)"
    if [ -n "$build" ] && [ "$build" != "$FERRETDB_BUILD" ] && ours_running; then
      stop_ours "it is FerretDB $build, not the patched $FERRETDB_BUILD"
    else
      log "MongoDB-compatible server answers ping on $mongo_host:$mongo_port${build:+ (FerretDB $build)}"
      exit 0
    fi
  fi
fi
case "$mongo_host" in
  127.0.0.1|localhost) ;;
  *) log "MongoDB at $mongo_host:$mongo_port does not answer and is not local; not starting anything"; exit 1 ;;
esac

if [ ! -x "$ferret" ] || [ "$("$ferret" --version 2>/dev/null | sed -n 's/^version: //p')" != "$FERRETDB_BUILD" ]; then
  command -v go >/dev/null || { log "Go is needed to build FerretDB"; exit 1; }
  log "building FerretDB $FERRETDB_BUILD from the Go module proxy with scripts/ferretdb/*.patch (once; cached in .tools/bin)"
  dir="$(go mod download -json "github.com/FerretDB/FerretDB@$FERRETDB_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [ -n "$dir" ] && [ -d "$dir" ] || { log "go mod download gave no module directory"; exit 1; }
  src="$tools/src/ferretdb"
  rm -rf "$src"; mkdir -p "$tools/src"
  cp -r "$dir" "$src"; chmod -R u+w "$src"
  for p in "$root"/scripts/ferretdb/*.patch; do
    (cd "$src" && patch -p1 --quiet --forward <"$p") || { log "patch $p did not apply"; exit 1; }
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
if ! answers "$pg_host" "$pg_port"; then
  log "PostgreSQL does not answer on $pg_host:$pg_port; trying to start the local cluster"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start >/dev/null 2>&1 || true
  wait_for "$pg_host" "$pg_port" 30 PostgreSQL
fi
pg_user="postgres"
if ! psql -h "$pg_host" -p "$pg_port" -U "$pg_user" -d postgres -tAc "select 1 from pg_database where datname='$pg_db'" | grep -q 1; then
  log "creating PostgreSQL database $pg_db"
  psql -h "$pg_host" -p "$pg_port" -U "$pg_user" -d postgres -qc "create database \"$pg_db\"" >/dev/null
fi

# WARNING: one FerretDB process per PostgreSQL database: the patch's write lock lives in the
# process, so a second FerretDB over the same database would break single-document atomicity.
log "starting FerretDB $FERRETDB_BUILD on $mongo_host:$mongo_port (log: .tools/log/ferretdb.log)"
nohup setsid "$ferret" --handler=postgresql --postgresql-url="$FERRETDB_PG_URL" \
  --listen-addr="$mongo_host:$mongo_port" --telemetry=disable --state-dir="$tools/state" \
  --debug-addr="${FERRETDB_DEBUG_ADDR:-127.0.0.1:0}" --log-level=WARN >>"$tools/log/ferretdb.log" 2>&1 </dev/null &
echo $! >"$pidfile"
wait_for "$mongo_host" "$mongo_port" 30 FerretDB
for _ in $(seq 1 25); do mongo_pings "$mongo_host" "$mongo_port" && break; sleep 0.2; done
mongo_pings "$mongo_host" "$mongo_port" || { log "FerretDB does not answer ping after starting"; exit 1; }
log "FerretDB is up (answers ping)"
