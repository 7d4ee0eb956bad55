#!/usr/bin/env bash
# The OpenID provider of the demo and the tests: the OpenID-certified `oidc-provider` npm package run by
# node (infra/oidc/provider.mjs: Steward's clients, a login page, the demo's people). A lab's own provider
# replaces it in production (docs/operator-guide.md "Single sign-on").
#
#   infra/oidc.sh install   npm ci from infra/oidc/package-lock.json (no-op when installed)
#   infra/oidc.sh start     start in the background and wait until discovery answers
#   infra/oidc.sh stop      SIGTERM, wait, then SIGKILL
#   infra/oidc.sh status    exit 0 and print the issuer when running (3 when not)
#   infra/oidc.sh issuer    print the issuer URL
#
# Env: STEWARD_RUN_DIR, STEWARD_OIDC_PORT (9100), STEWARD_OIDC_USERS, STEWARD_OIDC_WEB_REDIRECTS,
#      STEWARD_OIDC_ID_TOKEN_TTL_S (see infra/oidc/provider.mjs), STEWARD_WAIT_TIMEOUT (90).
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

O_PORT="${STEWARD_OIDC_PORT:-9100}"
ISSUER="${STEWARD_OIDC_ISSUER:-http://$BIND_HOST:$O_PORT}"
O_DIR="$INFRA_DIR/oidc"
# its PID file in a folder of its own, like Slurm's: the integration tier empties $RUN/pids when a tier starts
# its stack, and a provider started by an earlier tier (the e2e sign-in test) must stay ours to restart
O_PIDS="$RUN_DIR/oidc"
mkdir -p "$O_PIDS"
PIDFILE="$O_PIDS/oidc.pid"
LOGFILE="$LOG_DIR/oidc.log"
PID_PATTERN="$O_DIR/provider.mjs"

cmd_install() {
  command -v node >/dev/null || apt_install nodejs npm
  if [[ -f $O_DIR/node_modules/oidc-provider/package.json ]] \
    && [[ $O_DIR/node_modules/.package-lock.json -nt $O_DIR/package-lock.json ]]; then
    log "oidc-provider present ($(node -p "require('$O_DIR/node_modules/oidc-provider/package.json').version"))"
    return 0
  fi
  log "installing oidc-provider from $O_DIR/package-lock.json"
  (cd "$O_DIR" && npm ci --no-audit --no-fund --loglevel=error >&2)
}

discovery() { curl -fsS --max-time 2 "$ISSUER/.well-known/openid-configuration"; }

cmd_start() {
  local pid t0
  pid="$(running_pid "$PIDFILE" "$PID_PATTERN")"
  already_running oidc "$pid" "$ISSUER" && return 0
  cmd_install
  check_port_free oidc "$BIND_HOST" "$O_PORT"
  t0=$(now_ms)
  rotate_log "$LOGFILE"
  STEWARD_OIDC_PORT="$O_PORT" STEWARD_OIDC_ISSUER="$ISSUER" start_daemon "$PIDFILE" "$LOGFILE" \
    node "$O_DIR/provider.mjs"
  pid="$(pid_from_file "$PIDFILE")"
  log "started oidc provider (pid $pid); waiting for $ISSUER"
  wait_until oidc "$WAIT_TIMEOUT" "$pid" "$LOGFILE" "serving discovery at $ISSUER" discovery
  log "oidc provider ready at $ISSUER in $(($(now_ms) - t0)) ms (log: $LOGFILE)"
}

cmd_stop() {
  stop_pid oidc "$PIDFILE" "$PID_PATTERN" 10
}

running_line() { echo "running (pid $1), issuer $ISSUER"; }

cmd_status() {
  local pid ready=1
  pid="$(running_pid "$PIDFILE" "$PID_PATTERN")"
  if [[ -n $pid ]] && discovery >/dev/null 2>&1; then ready=0; fi
  service_status oidc "$pid" "$ready" "$ISSUER" "$LOGFILE" running_line
}

lock_if_changing oidc "${1:-}"
case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  restart) cmd_stop && cmd_start ;;
  status) cmd_status ;;
  issuer) echo "$ISSUER" ;;
  *) usage_die "install|start|stop|restart|status|issuer" ;;
esac
