#!/usr/bin/env bash
# PostgreSQL from Debian's `postgresql` package, with its own cluster in the run folder.
#
#   infra/postgres.sh install   apt-get install postgresql, only when no server binaries exist
#   infra/postgres.sh start     initdb once, start on 127.0.0.1, create roles and databases (idempotent)
#   infra/postgres.sh stop      pg_ctl stop -m fast
#   infra/postgres.sh status    exit 0 and print the version and URLs when running (3 when not)
#   infra/postgres.sh urls      print the SQLAlchemy URLs
#   infra/postgres.sh psql [ARGS]   psql as the postgres superuser over the socket
#   infra/postgres.sh purge     remove a data folder kept outside the run folder (see below; `make clean`)
#
# Where the data lives: $RUN/postgres. Run as root, the server runs as the `postgres` OS user, which must reach
# that folder; when the checkout is in a folder only its owner can enter (/root), `start` keeps the cluster in
# /var/tmp/steward-<uid>/<hash of the run folder> instead (0700, the postgres user's) and makes $RUN/postgres a
# link to it, which every later command follows (ADR 0064).
#
# Env: STEWARD_RUN_DIR, STEWARD_PG_PORT (55432), STEWARD_PG_OWNER_PASSWORD (steward_owner),
#      STEWARD_PG_APP_PASSWORD (steward_app), STEWARD_PG_BIN (a .../bin folder with pg_ctl),
#      STEWARD_WAIT_TIMEOUT (90).
# Roles: steward_owner (owns databases steward and steward_test; run migrations as it),
#        steward_app (the application; gets table rights from the migrations' GRANTs).
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PG_PORT="${STEWARD_PG_PORT:-55432}"
OWNER_PW="${STEWARD_PG_OWNER_PASSWORD:-steward_owner}"
APP_PW="${STEWARD_PG_APP_PASSWORD:-steward_app}"
PG_LINK="$RUN_DIR/postgres"
PIDFILE="$PID_DIR/postgres.pid"
# the cluster's folder outside the run folder, when the postgres OS user cannot reach the run folder (ADR 0064)
PG_AWAY_BASE="${STEWARD_PG_AWAY_BASE:-/var/tmp}/steward-$(id -u)"
PG_AWAY="$PG_AWAY_BASE/$(printf '%s' "$RUN_DIR" | sha256sum | cut -c1-16)"

set_pg_paths() { # PG_DIR and what is in it: $RUN/postgres, or where its link points
  if [[ -L $PG_LINK ]]; then PG_DIR="$(readlink "$PG_LINK")"; else PG_DIR="$PG_LINK"; fi
  DATA="$PG_DIR/data"
  SOCK="$PG_DIR/sock"
  # the server runs as the `postgres` OS user: its log is in a folder of that user's alone (mode 0700), as every
  # service's (infra/lib.sh), out of the jobs' reach
  PG_LOG_DIR="$PG_DIR/logs"
  LOGFILE="$PG_LOG_DIR/postgres.log"
  # A Unix socket path is limited to 107 bytes: fall back to a short folder under /tmp.
  if ((${#SOCK} + 20 > 107)); then
    SOCK="/tmp/steward-pg-$(printf '%s' "$RUN_DIR" | sha256sum | cut -c1-10)"
  fi
}
set_pg_paths

# ---------------------------------------------------------------- binaries
find_pg_bin() {
  if [[ -n ${STEWARD_PG_BIN:-} ]]; then
    [[ -x $STEWARD_PG_BIN/pg_ctl ]] || die "STEWARD_PG_BIN=$STEWARD_PG_BIN has no pg_ctl"
    PG_BIN="$STEWARD_PG_BIN"
    return 0
  fi
  local d
  PG_BIN=""
  # the newest major version wins
  while IFS= read -r d; do
    if [[ -x $d/initdb && -x $d/pg_ctl && -x $d/postgres ]]; then PG_BIN="$d"; fi
  done < <(compgen -G '/usr/lib/postgresql/*/bin' | sort -V)
  [[ -n $PG_BIN ]]
}

# as_pg CMD...: runs CMD as the `postgres` OS user (PostgreSQL refuses to run as root).
as_pg() {
  if [[ $(id -u) -eq 0 ]]; then
    (cd / && runuser -u postgres -- "$@")
  else
    "$@"
  fi
}

psql_admin() { # psql as the superuser over the socket, on database postgres unless -d is given
  as_pg "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PG_PORT" -U postgres "$@"
}

cmd_install() {
  if find_pg_bin; then
    log "postgresql already installed ($PG_BIN)"
    return 0
  fi
  local t0
  t0=$(now_ms)
  # Debian's package would also create (and try to start) a 'main' cluster on 5432: we do not need it.
  if [[ $(id -u) -eq 0 && -d /etc && ! -e /etc/postgresql-common/createcluster.d/steward.conf ]]; then
    mkdir -p /etc/postgresql-common/createcluster.d
    printf '# written by steward infra/postgres.sh: the project runs its own cluster\ncreate_main_cluster = false\n' \
      >/etc/postgresql-common/createcluster.d/steward.conf
  fi
  apt_install postgresql
  find_pg_bin || die "postgresql installed but no /usr/lib/postgresql/*/bin/pg_ctl found"
  log "installed postgresql ($PG_BIN) in $(($(now_ms) - t0)) ms"
}

# ---------------------------------------------------------------- cluster
# keep_data_reachable: as root, when the postgres OS user cannot reach the run folder (a checkout under /root,
# or any folder only its owner may enter), put the cluster in $PG_AWAY (created 0700 for the postgres user under
# a base only root may change) and link $RUN/postgres to it. A cluster already in the run folder stays there.
keep_data_reachable() {
  [[ $(id -u) -eq 0 && ! -L $PG_LINK ]] || return 0
  id postgres >/dev/null 2>&1 || die "no 'postgres' OS user (is the postgresql package installed?)"
  as_pg test -x "$RUN_DIR" && return 0
  if [[ -f $PG_LINK/data/PG_VERSION ]]; then
    die "the postgres OS user cannot reach $PG_LINK, which holds a cluster: make every parent folder of" \
      "STEWARD_RUN_DIR traversable (chmod o+x), or move $PG_LINK/data to $PG_AWAY/data and link $PG_LINK to $PG_AWAY"
  fi
  install -d -m 0711 -o root -g root "$PG_AWAY_BASE"
  [[ -O $PG_AWAY_BASE && ! -L $PG_AWAY_BASE ]] || die "$PG_AWAY_BASE is not root's own folder; remove it"
  install -d -m 0700 -o postgres -g postgres "$PG_AWAY"
  rmdir "$PG_LINK" 2>/dev/null || true # an empty folder left by an earlier try
  [[ ! -e $PG_LINK ]] || die "$PG_LINK is in the way (the postgres OS user cannot reach it); remove it"
  ln -s "$PG_AWAY" "$PG_LINK"
  log "the postgres OS user cannot reach $RUN_DIR: the cluster lives in $PG_AWAY ($PG_LINK links to it)"
  set_pg_paths
}

prepare_dirs() {
  keep_data_reachable
  mkdir -p "$PG_DIR" "$SOCK" "$PG_LOG_DIR"
  chmod 700 "$PG_LOG_DIR"
  if [[ $(id -u) -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || die "no 'postgres' OS user (is the postgresql package installed?)"
    chown postgres:postgres "$PG_DIR" "$SOCK" "$PG_LOG_DIR"
    if [[ -d $DATA ]]; then chown -R postgres:postgres "$DATA"; fi
    if ! as_pg test -w "$PG_DIR"; then
      die "the postgres OS user cannot reach $PG_DIR: every parent folder of STEWARD_RUN_DIR must be" \
        "traversable by others (chmod o+x), e.g. not under /root"
    fi
  fi
  chmod 700 "$SOCK"
  touch "$LOGFILE"
  if [[ $(id -u) -eq 0 ]]; then chown postgres:postgres "$LOGFILE"; fi
}

initdb_once() {
  [[ -f $DATA/PG_VERSION ]] && return 0
  log "initdb $DATA"
  as_pg "$PG_BIN/initdb" -D "$DATA" -U postgres -E UTF8 --locale=C --auth-local=trust \
    --auth-host=scram-sha-256 >>"$LOG_DIR/postgres-initdb.log" 2>&1 ||
    fail_with_log "initdb failed" "$LOG_DIR/postgres-initdb.log"
  # shellcheck disable=SC2016 # $1 is for the inner sh
  as_pg sh -c 'cat >>"$1"' _ "$DATA/postgresql.conf" <<'EOF'

# Steward: settings written by infra/postgres.sh on every start
include_if_exists = 'steward.conf'
EOF
}

write_config() {
  local conf
  conf="# Generated by infra/postgres.sh on every start.
listen_addresses = '$BIND_HOST'
port = $PG_PORT
unix_socket_directories = '$SOCK'
password_encryption = 'scram-sha-256'
max_connections = 100
shared_buffers = 128MB
timezone = 'UTC'
log_timezone = 'UTC'
logging_collector = off
log_line_prefix = '%m [%p] %q%u@%d '
"
  # shellcheck disable=SC2016 # $1 is for the inner sh
  as_pg sh -c 'cat >"$1"' _ "$DATA/steward.conf" <<<"$conf"
  # local socket: trust (the socket folder is 0700, so only the postgres OS user and root reach it);
  # TCP on 127.0.0.1: passwords (SCRAM).
  # shellcheck disable=SC2016 # $1 is for the inner sh
  as_pg sh -c 'cat >"$1"' _ "$DATA/pg_hba.conf" <<'EOF'
# Generated by infra/postgres.sh on every start.
# TYPE  DATABASE  USER  ADDRESS        METHOD
local   all       all                  trust
host    all       all   127.0.0.1/32   scram-sha-256
EOF
}

server_pid() { # the live postmaster PID, or nothing
  local pid=""
  [[ -f $DATA/postmaster.pid ]] && pid="$(head -n1 "$DATA/postmaster.pid" | tr -dc '0-9')"
  if [[ -n $pid ]] && pid_alive "$pid" "$DATA"; then
    printf '%s' "$pid"
  fi
}

# After a crash (kill -9) the old postmaster may still exist for a moment (exiting, or a zombie not yet
# reaped); PostgreSQL would then refuse to start because its lock file names a live PID.
wait_stale_postmaster() {
  [[ -f $DATA/postmaster.pid ]] || return 0
  local old
  old="$(head -n1 "$DATA/postmaster.pid" | tr -dc '0-9')"
  [[ -n $old ]] || return 0
  wait_gone "$old" 10 || warn "a previous postmaster (pid $old) still exists; trying to start anyway"
}

provision() {
  psql_admin -d postgres -v owner_pw="$OWNER_PW" -v app_pw="$APP_PW" <<'EOF'
SELECT 'CREATE ROLE steward_owner' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'steward_owner') \gexec
SELECT 'CREATE ROLE steward_app' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'steward_app') \gexec
ALTER ROLE steward_owner WITH LOGIN NOSUPERUSER CREATEDB NOCREATEROLE PASSWORD :'owner_pw';
ALTER ROLE steward_app WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'app_pw';
SELECT 'CREATE DATABASE steward OWNER steward_owner' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'steward') \gexec
SELECT 'CREATE DATABASE steward_test OWNER steward_owner' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'steward_test') \gexec
ALTER DATABASE steward OWNER TO steward_owner;
ALTER DATABASE steward_test OWNER TO steward_owner;
GRANT CONNECT, TEMPORARY ON DATABASE steward, steward_test TO steward_app;
EOF
}

urlencode() {
  local s=$1 out="" c i
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    case $c in
      [a-zA-Z0-9._~-]) out+=$c ;;
      *) out+=$(printf '%%%02X' "'$c") ;;
    esac
  done
  printf '%s' "$out"
}

cmd_urls() {
  local o a
  o="$(urlencode "$OWNER_PW")"
  a="$(urlencode "$APP_PW")"
  echo "owner (migrations): postgresql+psycopg://steward_owner:$o@$BIND_HOST:$PG_PORT/steward"
  echo "app:                postgresql+psycopg://steward_app:$a@$BIND_HOST:$PG_PORT/steward"
  echo "tests (owner):      postgresql+psycopg://steward_owner:$o@$BIND_HOST:$PG_PORT/steward_test"
  echo "tests (app):        postgresql+psycopg://steward_app:$a@$BIND_HOST:$PG_PORT/steward_test"
}

cmd_start() {
  find_pg_bin || cmd_install
  local pid t0
  t0=$(now_ms)
  pid="$(server_pid)"
  if ! already_running postgres "$pid" "$BIND_HOST:$PG_PORT"; then
    check_port_free postgres "$BIND_HOST" "$PG_PORT"
    prepare_dirs
    initdb_once
    write_config
    rotate_log "$LOGFILE"
    if [[ $(id -u) -eq 0 ]]; then chown postgres:postgres "$LOGFILE"; fi
    wait_stale_postmaster
    log "starting postgres ($PG_BIN) on $BIND_HOST:$PG_PORT"
    # 9>&-: the server must not inherit the lock_service fd
    if ! as_pg "$PG_BIN/pg_ctl" -D "$DATA" -l "$LOGFILE" -w -t "$WAIT_TIMEOUT" -s start >/dev/null 9>&-; then
      fail_with_log "postgres failed to start (pg_ctl start, timeout ${WAIT_TIMEOUT}s)" "$LOGFILE"
    fi
    pid="$(server_pid)"
    [[ -n $pid ]] || fail_with_log "postgres exited during startup" "$LOGFILE"
  fi
  printf '%s\n' "$pid" >"$PIDFILE"
  provision || fail_with_log "creating the Steward roles and databases failed" "$LOGFILE"
  log "postgres ready on $BIND_HOST:$PG_PORT in $(($(now_ms) - t0)) ms (log: $LOGFILE)"
  cmd_urls
}

pg_ctl_stop() { # a fast shutdown (sessions rolled back, a checkpoint), immediate when that fails
  as_pg "$PG_BIN/pg_ctl" -D "$DATA" -m fast -w -t 60 -s stop && return 0
  warn "fast shutdown failed; trying immediate"
  as_pg "$PG_BIN/pg_ctl" -D "$DATA" -m immediate -w -t 30 -s stop
}

cmd_stop() {
  find_pg_bin || { log "postgres is not installed"; return 0; }
  stop_service postgres "$PIDFILE" "$(server_pid)" "${STEWARD_PG_STOP_TIMEOUT:-10}" pg_ctl_stop
}

cmd_purge() { # the cluster's folder outside the run folder (the link's target), after a stop
  [[ -L $PG_LINK ]] || return 0
  [[ -z $(server_pid) ]] || die "postgres is running; infra/postgres.sh stop first"
  case "$PG_DIR" in
    "$PG_AWAY_BASE"/*) rm -rf -- "$PG_DIR" ;;
    *) die "$PG_LINK points to $PG_DIR, which this script did not make; remove it yourself" ;;
  esac
  rm -f -- "$PG_LINK"
  log "removed $PG_DIR"
}

running_line() {
  echo "$("$PG_BIN/postgres" --version | sed 's/.*(PostgreSQL) \([^ ]*\).*/\1/') running (pid $1)" \
    "on $BIND_HOST:$PG_PORT, socket $SOCK"
}

cmd_status() {
  if ! find_pg_bin; then
    echo "postgres not installed"
    return 3
  fi
  local pid ready=1
  pid="$(server_pid)"
  if [[ -n $pid ]] && "$PG_BIN/pg_isready" -q -h "$BIND_HOST" -p "$PG_PORT"; then ready=0; fi
  service_status postgres "$pid" "$ready" "$BIND_HOST:$PG_PORT" "$LOGFILE" running_line
}

lock_if_changing postgres "${1:-}"
case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  restart) cmd_stop && cmd_start ;;
  status) cmd_status ;;
  urls) cmd_urls ;;
  purge) cmd_purge ;;
  psql) shift; find_pg_bin || die "postgres not installed"; psql_admin "$@" ;;
  *) usage_die "install|start|stop|restart|status|urls|purge|psql [ARGS]" ;;
esac
