#!/usr/bin/env bash
# Apache Kafka 4.x, KRaft single node (combined broker + controller), from Maven Central jars.
#
#   infra/kafka.sh install        resolve the jars into $RUN/kafka/libs (no-op when present)
#   infra/kafka.sh start          install if needed, format storage once, start, wait until ready
#   infra/kafka.sh stop           SIGTERM, wait, then SIGKILL
#   infra/kafka.sh status         exit 0 and print the version when running (3 when not)
#   infra/kafka.sh topics [NAME:PARTITIONS ...]   create the Steward topics (idempotent, one JVM)
#   infra/kafka.sh list           list topics
#
# Env: STEWARD_RUN_DIR, STEWARD_KAFKA_PORT (9092), STEWARD_KAFKA_CONTROLLER_PORT (9093),
#      STEWARD_KAFKA_VERSION (4.1.1), STEWARD_KAFKA_HEAP_OPTS ("-Xms256m -Xmx512m"),
#      STEWARD_KAFKA_JVM_OPTS (extra), STEWARD_JAVA (java binary), STEWARD_WAIT_TIMEOUT (90).
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KAFKA_VERSION="${STEWARD_KAFKA_VERSION:-4.1.1}"
KAFKA_PORT="${STEWARD_KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${STEWARD_KAFKA_CONTROLLER_PORT:-9093}"
BOOTSTRAP="$BIND_HOST:$KAFKA_PORT"
KAFKA_DIR="$RUN_DIR/kafka"
LIBS="$KAFKA_DIR/libs"
TOOLS="$KAFKA_DIR/tools"
CONF="$KAFKA_DIR/config"
DATA="$KAFKA_DIR/data"
PIDFILE="$PID_DIR/kafka.pid"
LOGFILE="$LOG_DIR/kafka.log"
POM="$INFRA_DIR/kafka/pom.xml"
ADMIN_SRC="$INFRA_DIR/kafka/StewardKafkaAdmin.java"
STAMP="$LIBS/.steward-installed"
PID_PATTERN="$CONF/server.properties"
DEFAULT_TOPICS=(steward.commands:6 steward.events:1 steward.deadletter:1)
REQUIRED_CLASSES=(kafka.Kafka kafka.tools.StorageTool org.apache.kafka.tools.TopicCommand
  org.apache.logging.slf4j.SLF4JServiceProvider org.apache.logging.log4j.core.LoggerContext)

# ---------------------------------------------------------------- java
java_major() { # JAVA_BIN -> major version number
  "$1" -version 2>&1 | sed -n 's/.*version "\([0-9]*\)[."].*/\1/p' | head -n1
}

find_java() {
  local cand
  for cand in "${STEWARD_JAVA:-}" "${JAVA_HOME:+$JAVA_HOME/bin/java}" "$(command -v java || true)" \
    /usr/lib/jvm/java-17-openjdk-amd64/bin/java /usr/lib/jvm/temurin-25-jdk-amd64/bin/java; do
    [[ -n $cand && -x $cand ]] || continue
    local major
    major="$(java_major "$cand")"
    if [[ -n $major ]] && ((major >= 17)); then
      JAVA="$cand"
      return 0
    fi
  done
  return 1
}

ensure_java() {
  find_java && return 0
  log "no Java 17+ found; installing openjdk-17-jdk-headless"
  apt_install openjdk-17-jdk-headless
  find_java || die "Java 17+ is required (set STEWARD_JAVA)"
}

# javac next to the chosen java, if any (a JRE has none: then the helper runs from source)
find_javac() {
  local jc
  jc="$(dirname "$(readlink -f "$JAVA")")/javac"
  if [[ -x $jc ]]; then JAVAC="$jc"; else JAVAC=""; fi
}

# ---------------------------------------------------------------- install
install_fingerprint() {
  printf '%s %s %s\n' "$KAFKA_VERSION" "$(sha256sum "$POM" | cut -c1-16)" "$(sha256sum "$ADMIN_SRC" | cut -c1-16)"
}

is_installed() {
  [[ -f $STAMP && "$(cat "$STAMP")" == "$(install_fingerprint)" ]] && compgen -G "$LIBS/kafka_2.13-*.jar" >/dev/null
}

kafka_jar_version() {
  local jar
  jar="$(compgen -G "$LIBS/kafka_2.13-*.jar" | head -n1 || true)"
  jar="${jar##*/kafka_2.13-}"
  printf '%s' "${jar%.jar}"
}

# admin CMD ARGS...: runs the StewardKafkaAdmin helper in one JVM.
admin() {
  if [[ -f $TOOLS/StewardKafkaAdmin.class ]]; then
    "$JAVA" -Xmx128m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Dlog4j2.configurationFile="$CONF/tools-log4j2.properties" \
      -cp "$LIBS/*:$TOOLS" StewardKafkaAdmin "$@"
  else
    "$JAVA" -Xmx128m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Dlog4j2.configurationFile="$CONF/tools-log4j2.properties" \
      -cp "$LIBS/*" "$ADMIN_SRC" "$@"
  fi
}

write_log4j_configs() {
  mkdir -p "$CONF"
  cat >"$CONF/log4j2.properties" <<'EOF'
# Broker logging: everything to stdout, which kafka.sh sends to $RUN/logs/kafka.log
status = warn
name = steward-kafka
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.reqchannel.name = kafka.network.RequestChannel$
logger.reqchannel.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = WARN
logger.appinfo.name = org.apache.kafka.common.utils.AppInfoParser
logger.appinfo.level = WARN
EOF
  cat >"$CONF/tools-log4j2.properties" <<'EOF'
# Command-line tools (StorageTool, the admin helper): warnings and errors to stderr only
status = error
name = steward-kafka-tools
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
EOF
}

cmd_install() {
  ensure_java
  if is_installed; then
    log "kafka $(kafka_jar_version) already installed in $LIBS"
    return 0
  fi
  if [[ -n "$(running_pid "$PIDFILE" "$PID_PATTERN")" ]]; then
    die "kafka is running with other jars than this version/pom wants: run infra/kafka.sh stop first"
  fi
  command -v mvn >/dev/null || apt_install maven
  local t0 tmp
  t0=$(now_ms)
  tmp="$KAFKA_DIR/libs.tmp"
  rm -rf "$tmp"
  mkdir -p "$KAFKA_DIR"
  log "resolving org.apache.kafka:kafka_2.13:$KAFKA_VERSION + kafka-tools + log4j2 from Maven Central"
  if ! mvn -q -B -Dstyle.color=never -f "$POM" dependency:copy-dependencies -DincludeScope=runtime \
    -Dkafka.version="$KAFKA_VERSION" -DoutputDirectory="$tmp" >"$LOG_DIR/kafka-install.log" 2>&1; then
    fail_with_log "mvn could not resolve Kafka $KAFKA_VERSION" "$LOG_DIR/kafka-install.log"
  fi
  rm -rf "$LIBS"
  mv "$tmp" "$LIBS"
  write_log4j_configs
  find_javac
  rm -rf "$TOOLS"
  if [[ -n $JAVAC ]]; then
    mkdir -p "$TOOLS"
    "$JAVAC" -nowarn -d "$TOOLS" -cp "$LIBS/*" "$ADMIN_SRC" >>"$LOG_DIR/kafka-install.log" 2>&1 ||
      fail_with_log "could not compile $ADMIN_SRC" "$LOG_DIR/kafka-install.log"
  fi
  # the broker, the storage tool, the topic tool and the log4j2 binding must all be on the classpath
  local missing=()
  local c
  for c in "${REQUIRED_CLASSES[@]}"; do
    # no unzip/jar needed: entry names are stored uncompressed in each jar's central directory
    grep -qaF "${c//.//}.class" "$LIBS"/*.jar 2>/dev/null || missing+=("$c")
  done
  ((${#missing[@]} == 0)) || die "classes missing from $LIBS: ${missing[*]}"
  install_fingerprint >"$STAMP"
  log "installed kafka $(kafka_jar_version) ($(compgen -G "$LIBS/*.jar" | wc -l) jars, $(du -sh "$LIBS" | cut -f1)) in $(($(now_ms) - t0)) ms"
}

# ---------------------------------------------------------------- config + storage
write_server_properties() {
  mkdir -p "$CONF" "$DATA"
  cat >"$CONF/server.properties" <<EOF
# Generated by infra/kafka.sh on every start; edit the script, not this file.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$BIND_HOST:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://$BIND_HOST:$KAFKA_PORT,CONTROLLER://$BIND_HOST:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$BIND_HOST:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$DATA

# sized for a 2-core machine and tests
num.network.threads=2
num.io.threads=4
background.threads=4
num.recovery.threads.per.data.dir=1
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=false
delete.topic.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# after a kill -9 the restarted broker must wait out its old registration: keep that short
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=4000
log.retention.hours=168
log.segment.bytes=104857600
log.retention.check.interval.ms=300000
EOF
}

format_storage_once() {
  if [[ -f $DATA/meta.properties ]]; then
    return 0
  fi
  local cid_file="$KAFKA_DIR/cluster.id" cid
  # a Kafka Uuid: 16 random bytes, URL-safe base64 without padding (22 chars). One that starts with
  # "-" would be read by StorageTool as an option, so draw again until it does not.
  while [[ ! -s $cid_file || $(head -c1 "$cid_file") == "-" ]]; do
    head -c16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n' >"$cid_file"
  done
  cid="$(cat "$cid_file")"
  log "formatting KRaft storage in $DATA (cluster id $cid)"
  "$JAVA" -Xmx256m -Dlog4j2.configurationFile="$CONF/tools-log4j2.properties" -cp "$LIBS/*" \
    kafka.tools.StorageTool format --cluster-id "$cid" --config "$CONF/server.properties" --ignore-formatted \
    >>"$LOG_DIR/kafka-format.log" 2>&1 || fail_with_log "kafka storage format failed" "$LOG_DIR/kafka-format.log"
}

# ---------------------------------------------------------------- commands
cmd_start() {
  local pid
  pid="$(running_pid "$PIDFILE" "$PID_PATTERN")"
  already_running kafka "$pid" "$BOOTSTRAP" && return 0
  cmd_install
  check_port_free kafka "$BIND_HOST" "$KAFKA_PORT"
  check_port_free kafka-controller "$BIND_HOST" "$KAFKA_CONTROLLER_PORT"
  local t0
  t0=$(now_ms)
  write_log4j_configs
  write_server_properties
  format_storage_once
  rotate_log "$LOGFILE"
  # shellcheck disable=SC2086
  start_daemon "$PIDFILE" "$LOGFILE" "$JAVA" ${STEWARD_KAFKA_HEAP_OPTS:--Xms256m -Xmx512m} \
    -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
    -Djava.awt.headless=true -Dkafka.logs.dir="$LOG_DIR" -Dlog4j2.configurationFile="$CONF/log4j2.properties" \
    ${STEWARD_KAFKA_JVM_OPTS:-} -cp "$LIBS/*" kafka.Kafka "$CONF/server.properties"
  pid="$(pid_from_file "$PIDFILE")"
  log "started kafka (pid $pid); waiting for $BOOTSTRAP"
  wait_for_port kafka "$BIND_HOST" "$KAFKA_PORT" "$WAIT_TIMEOUT" "$pid" "$LOGFILE"
  local left=$((WAIT_TIMEOUT - (($(now_ms) - t0) / 1000)))
  ((left > 5)) || left=5
  if ! admin "$BOOTSTRAP" ready "$left" >/dev/null; then
    pid_alive "$pid" || fail_with_log "kafka exited during startup" "$LOGFILE"
    fail_with_log "kafka answers on $BOOTSTRAP but is not ready within ${WAIT_TIMEOUT}s" "$LOGFILE"
  fi
  log "kafka $(kafka_jar_version) ready on $BOOTSTRAP in $(($(now_ms) - t0)) ms (log: $LOGFILE)"
}

cmd_stop() {
  stop_pid kafka "$PIDFILE" "$PID_PATTERN" "${STEWARD_KAFKA_STOP_TIMEOUT:-30}"
}

running_line() {
  echo "$(kafka_jar_version) running (pid $1) on $BOOTSTRAP, controller $BIND_HOST:$KAFKA_CONTROLLER_PORT"
}

cmd_status() {
  local pid ready=1
  pid="$(running_pid "$PIDFILE" "$PID_PATTERN")"
  if [[ -n $pid ]] && port_open "$BIND_HOST" "$KAFKA_PORT"; then ready=0; fi
  service_status kafka "$pid" "$ready" "$BOOTSTRAP" "$LOGFILE" running_line
}

require_running() {
  [[ -n "$(running_pid "$PIDFILE" "$PID_PATTERN")" ]] || port_open "$BIND_HOST" "$KAFKA_PORT" ||
    die "kafka is not running on $BOOTSTRAP (run: infra/kafka.sh start)"
}

require_tools() {
  find_java || die "Java 17+ not found"
  is_installed || die "kafka is not installed (run: infra/kafka.sh install)"
}

cmd_topics() {
  require_running
  local specs=("$@")
  ((${#specs[@]})) || specs=("${DEFAULT_TOPICS[@]}")
  # fast path, no JVM: every partition folder of every topic is already in the (single) log dir
  local spec name n p all=1
  for spec in "${specs[@]}"; do
    name="${spec%%:*}"
    n="${spec#*:}"
    n="${n%%:*}"
    [[ $n =~ ^[0-9]+$ ]] || n=1
    [[ -d $DATA/$name-$n ]] && all=0 # more partitions than asked: let the helper report it
    for ((p = 0; p < n; p++)); do [[ -d $DATA/$name-$p ]] || all=0; done
  done
  if ((all)); then
    log "topics present: ${specs[*]}"
    return 0
  fi
  require_tools
  admin "$BOOTSTRAP" create "${specs[@]}"
}

cmd_list() {
  require_running
  require_tools
  admin "$BOOTSTRAP" list
}

lock_if_changing kafka "${1:-}"
case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  restart) cmd_stop && cmd_start ;;
  status) cmd_status ;;
  topics) shift; cmd_topics "$@" ;;
  list) cmd_list ;;
  *) usage_die "install|start|stop|restart|status|topics [NAME:PARTITIONS ...]|list" ;;
esac
