#!/usr/bin/env bash
# All three real services: Kafka (KRaft), PostgreSQL, Temporal dev server.
#
#   infra/services.sh install   install what is missing (no-op when installed)
#   infra/services.sh up        start all (Kafka in parallel with the others), then create the Kafka topics
#   infra/services.sh down      stop all (Temporal, Kafka, PostgreSQL)
#   infra/services.sh status    status of each; exit 0 only when all three run
#
# Env: see infra/kafka.sh, infra/postgres.sh, infra/temporal.sh; STEWARD_SERVICES_SERIAL=1 starts
# them one after the other.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

up() {
  local t0
  t0=$(now_ms)
  if [[ ${STEWARD_SERVICES_SERIAL:-0} == 1 ]]; then
    "$INFRA_DIR/kafka.sh" start
    "$INFRA_DIR/postgres.sh" start
    "$INFRA_DIR/temporal.sh" start
  else
    # Kafka is the slow one (JVM, ~3 s warm): start it in the background meanwhile.
    "$INFRA_DIR/kafka.sh" start &
    local kafka_job=$! rc=0
    "$INFRA_DIR/postgres.sh" start || rc=$?
    "$INFRA_DIR/temporal.sh" start || rc=$((rc ? rc : $?))
    wait "$kafka_job" || rc=$((rc ? rc : $?))
    ((rc == 0)) || die "a service did not start (see the messages above and $LOG_DIR)"
  fi
  "$INFRA_DIR/kafka.sh" topics
  log "all services up in $(($(now_ms) - t0)) ms; run folder $RUN_DIR"
}

down() {
  local rc=0
  "$INFRA_DIR/temporal.sh" stop || rc=1
  "$INFRA_DIR/kafka.sh" stop || rc=1
  "$INFRA_DIR/postgres.sh" stop || rc=1
  return $rc
}

status() {
  local rc=0
  "$INFRA_DIR/kafka.sh" status || rc=3
  "$INFRA_DIR/postgres.sh" status || rc=3
  "$INFRA_DIR/temporal.sh" status || rc=3
  return $rc
}

install() {
  "$INFRA_DIR/kafka.sh" install
  "$INFRA_DIR/postgres.sh" install
  "$INFRA_DIR/temporal.sh" install
}

case "${1:-}" in
  install) install ;;
  up | start) up ;;
  down | stop) down ;;
  restart) down && up ;;
  status) status ;;
  *) usage_die "install|up|down|restart|status" ;;
esac
