#!/usr/bin/env bash
# Apache Kafka 4.x, KRaft single node (combined broker + controller), from Maven Central jars, with
# authentication and ACLs (ADR 0036): clients speak SASL SCRAM-SHA-512 on the one client listener; every
# Steward component has a principal of its own, created when the storage is formatted (--add-scram), with
# a random password in $RUN/secrets/kafka/<principal>.password (folder 0700, files 0600; never in the repo).
# The StandardAuthorizer denies what no ACL allows; each component may write its own command topic and
# read what it needs (kafka_acls below). The controller listener is bound to 127.0.0.1 and speaks
# SASL/PLAIN with a static user of its own (SCRAM cannot authenticate controllers: its credentials live
# in the metadata log the controllers serve).
#
#   infra/kafka.sh install        resolve the jars into $RUN/kafka/libs (no-op when present)
#   infra/kafka.sh start          install if needed, format storage once, start, wait until ready
#   infra/kafka.sh stop           SIGTERM, wait, then SIGKILL
#   infra/kafka.sh status         exit 0 and print the version when running (3 when not)
#   infra/kafka.sh topics [NAME:PARTITIONS ...]   create the Steward topics (idempotent, one JVM)
#   infra/kafka.sh list           list topics
#   infra/kafka.sh acls           (re)apply the components' ACLs (idempotent; `topics` does it too)
#   infra/kafka.sh add-executor ID   a principal, command topic and ACLs for executor ID (broker running)
#   infra/kafka.sh rotate PRINCIPAL  a new password for PRINCIPAL (steward-api, ...): set on the broker, then
#                                 written to its file; restart that component (docs/operator-guide.md)
#   infra/kafka.sh tls-paths      print the TLS listener's address and the CA file clients trust (KEY=VALUE)
#
# TLS (ADR 0039): a second client listener, SASL_SSL on 127.0.0.1:$STEWARD_KAFKA_TLS_PORT (the client port
# + 2), with the same principals and ACLs, its certificate signed by a CA the project generates on the first
# start (openssl; $RUN/secrets/kafka-tls: ca.pem for clients, the keys 0600). A client uses it with
# STEWARD_KAFKA_BOOTSTRAP at that port and STEWARD_KAFKA_CA_FILE=<that ca.pem> (steward.bus.kafka).
#
# Env: STEWARD_RUN_DIR, STEWARD_KAFKA_PORT (9092), STEWARD_KAFKA_CONTROLLER_PORT (9093),
#      STEWARD_KAFKA_VERSION (4.1.1), STEWARD_KAFKA_HEAP_OPTS ("-Xms256m -Xmx512m"),
#      STEWARD_KAFKA_JVM_OPTS (extra), STEWARD_JAVA (java binary), STEWARD_WAIT_TIMEOUT (90),
#      STEWARD_KAFKA_EXECUTORS ("local sim bench": the executors whose principals are created at format time),
#      STEWARD_KAFKA_TLS_PORT (the client port + 2).
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KAFKA_VERSION="${STEWARD_KAFKA_VERSION:-4.1.1}"
KAFKA_PORT="${STEWARD_KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${STEWARD_KAFKA_CONTROLLER_PORT:-9093}"
BOOTSTRAP="$BIND_HOST:$KAFKA_PORT"
KAFKA_TLS_PORT="${STEWARD_KAFKA_TLS_PORT:-$((KAFKA_PORT + 2))}"
TLS_DIR="$RUN_DIR/secrets/kafka-tls"
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
SECRETS="$RUN_DIR/secrets/kafka"
CLIENT_CONFIG="$CONF/admin-client.properties"
read -r -a EXECUTORS <<<"${STEWARD_KAFKA_EXECUTORS:-local sim bench}"
# the components' principals (steward.bus.identity.principal), the operator's first (the broker's super user)
PRINCIPALS=(steward-admin steward-api steward-ledger steward-scheduler steward-workflows)
for _ex in "${EXECUTORS[@]}"; do PRINCIPALS+=("steward-executor-$_ex"); done
DEFAULT_TOPICS=(steward.commands:6 steward.commands.scheduler:1 steward.commands.workflows:3 steward.events:1
  steward.deadletter:1)
for _ex in "${EXECUTORS[@]}"; do DEFAULT_TOPICS+=("steward.commands.executor.$_ex:3"); done
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

# ---------------------------------------------------------------- credentials
valid_id() { [[ $1 =~ ^[a-z0-9][a-z0-9-]{0,62}$ ]] || die "not a valid id (a-z, 0-9, -; at most 63): $1"; }

# secret NAME: the password of NAME, generated (32 random alphanumerics) the first time
secret() {
  local file="$SECRETS/$1.password"
  if [[ ! -s $file ]]; then
    (umask 077 && mkdir -p "$SECRETS" && chmod 700 "$RUN_DIR/secrets" "$SECRETS" &&
      { LC_ALL=C tr -dc 'A-Za-z0-9' </dev/urandom | head -c32 >"$file.tmp" || true; } && mv "$file.tmp" "$file")
  fi
  cat "$file"
}

write_client_config() { # the admin helper's SASL settings, 0600
  mkdir -p "$CONF"
  (umask 077 && cat >"$CLIENT_CONFIG" <<EOF
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="steward-admin" password="$(secret steward-admin)";
EOF
  )
  export STEWARD_KAFKA_CLIENT_CONFIG="$CLIENT_CONFIG"
}

# ---------------------------------------------------------------- TLS
# tls_material: the project's CA (10 years) and the broker's certificate for 127.0.0.1 and localhost (825
# days), P-256 keys, made once with openssl; the broker reads its key and chain as one PEM file (ssl.keystore.type=PEM)
tls_material() {
  local ca_key="$TLS_DIR/ca.key" ca="$TLS_DIR/ca.pem" key="$TLS_DIR/broker.key" csr="$TLS_DIR/broker.csr"
  local crt="$TLS_DIR/broker.pem" store="$TLS_DIR/broker-keystore.pem" ext="$TLS_DIR/broker.ext"
  [[ -s $store && -s $ca ]] && return 0
  command -v openssl >/dev/null || apt_install openssl
  (umask 077 && mkdir -p "$TLS_DIR")
  chmod 700 "$RUN_DIR/secrets" "$TLS_DIR"
  log "making the Kafka TLS listener's CA and certificate in $TLS_DIR (openssl)"
  (umask 077 &&
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 -days 3650 \
      -subj "/CN=Steward Kafka CA" -keyout "$ca_key" -out "$ca" &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 -subj "/CN=steward-kafka" \
      -keyout "$key" -out "$csr" &&
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n' >"$ext" &&
    openssl x509 -req -in "$csr" -CA "$ca" -CAkey "$ca_key" -CAcreateserial -days 825 -sha256 -extfile "$ext" \
      -out "$crt" &&
    openssl pkcs8 -topk8 -nocrypt -in "$key" -out "$store.tmp" && cat "$crt" >>"$store.tmp" &&
    mv "$store.tmp" "$store") >"$LOG_DIR/kafka-tls.log" 2>&1 || fail_with_log "could not make the TLS material" "$LOG_DIR/kafka-tls.log"
  rm -f "$csr" "$ext"
  chmod 644 "$ca"  # the CA's certificate is public: every client trusts it
}

cmd_tls_paths() {
  echo "STEWARD_KAFKA_TLS_BOOTSTRAP=$BIND_HOST:$KAFKA_TLS_PORT"
  echo "STEWARD_KAFKA_CA_FILE=$TLS_DIR/ca.pem"
}

# ---------------------------------------------------------------- config + storage
write_server_properties() {
  mkdir -p "$CONF" "$DATA"
  local admin_pw controller_pw
  admin_pw="$(secret steward-admin)"
  controller_pw="$(secret steward-controller)"
  # it holds the broker's own passwords: readable by this user only
  (umask 077 && cat >"$CONF/server.properties" <<EOF
# Generated by infra/kafka.sh on every start; edit the script, not this file.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=SASL_PLAINTEXT://$BIND_HOST:$KAFKA_PORT,SASL_SSL://$BIND_HOST:$KAFKA_TLS_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=SASL_PLAINTEXT://$BIND_HOST:$KAFKA_PORT,SASL_SSL://$BIND_HOST:$KAFKA_TLS_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=SASL_PLAINTEXT
listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:SASL_PLAINTEXT
log.dirs=$DATA

# authentication (ADR 0036): SCRAM-SHA-512 for every client and the broker itself; PLAIN (a static user)
# between broker and controller, on 127.0.0.1 only
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
sasl.mechanism.controller.protocol=PLAIN
listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="steward-admin" password="$admin_pw";
# the TLS client listener (ADR 0039): the same SCRAM users and ACLs, over TLS with the project's CA
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.ssl.keystore.type=PEM
listener.name.sasl_ssl.ssl.keystore.location=$TLS_DIR/broker-keystore.pem
listener.name.sasl_ssl.ssl.enabled.protocols=TLSv1.3,TLSv1.2
listener.name.controller.sasl.enabled.mechanisms=PLAIN
listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="steward-controller" password="$controller_pw" user_steward-controller="$controller_pw";
# authorisation: nothing without an ACL, except for the operator and the controller
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:steward-admin;User:steward-controller

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
  )
}

format_storage_once() {
  if [[ -f $DATA/meta.properties ]]; then
    [[ -f $DATA/.steward-scram ]] || die "$DATA was formatted without Steward's SCRAM users (before ADR 0036): \
stop Kafka and remove $DATA (the commands the ledger read are in the event store), then start again"
    return 0
  fi
  local cid_file="$KAFKA_DIR/cluster.id" cid
  # a Kafka Uuid: 16 random bytes, URL-safe base64 without padding (22 chars). One that starts with
  # "-" would be read by StorageTool as an option, so draw again until it does not.
  while [[ ! -s $cid_file || $(head -c1 "$cid_file") == "-" ]]; do
    head -c16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n' >"$cid_file"
  done
  cid="$(cat "$cid_file")"
  log "formatting KRaft storage in $DATA (cluster id $cid, ${#PRINCIPALS[@]} SCRAM users)"
  # the passwords reach the tool in a 0600 argument file (the java launcher expands @file), not on its
  # command line, which `ps` shows to every user
  local argfile="$CONF/format.args" p
  (umask 077 && for p in "${PRINCIPALS[@]}"; do
    printf -- '--add-scram\nSCRAM-SHA-512=[name=%s,password=%s]\n' "$p" "$(secret "$p")"
  done >"$argfile")
  if ! "$JAVA" -Xmx256m -Dlog4j2.configurationFile="$CONF/tools-log4j2.properties" -cp "$LIBS/*" \
    kafka.tools.StorageTool format --cluster-id "$cid" --config "$CONF/server.properties" --ignore-formatted \
    "@$argfile" >>"$LOG_DIR/kafka-format.log" 2>&1; then
    rm -f "$argfile"
    fail_with_log "kafka storage format failed" "$LOG_DIR/kafka-format.log"
  fi
  rm -f "$argfile"
  touch "$DATA/.steward-scram"
}

# ---------------------------------------------------------------- ACLs
# The components' ACLs (PRINCIPAL:OPERATION:RESOURCE:PATTERN:NAME); the operator is a super user.
# Each writes its own command topic only; the ledger reads every command topic (prefixed) and writes the
# events and dead-letter topics; the scheduler and the workflows read the events (the workflows' dispatcher
# as a consumer group).
component_acls() {
  local acls=(
    steward-api:WRITE:TOPIC:LITERAL:steward.commands
    steward-api:DESCRIBE:TOPIC:LITERAL:steward.commands
    steward-scheduler:WRITE:TOPIC:LITERAL:steward.commands.scheduler
    steward-scheduler:DESCRIBE:TOPIC:LITERAL:steward.commands.scheduler
    steward-scheduler:READ:TOPIC:LITERAL:steward.events
    steward-workflows:WRITE:TOPIC:LITERAL:steward.commands.workflows
    steward-workflows:DESCRIBE:TOPIC:LITERAL:steward.commands.workflows
    steward-workflows:READ:TOPIC:LITERAL:steward.events
    steward-workflows:READ:GROUP:LITERAL:steward-dispatcher
    steward-ledger:READ:TOPIC:PREFIXED:steward.commands
    steward-ledger:DESCRIBE:TOPIC:PREFIXED:steward.commands
    steward-ledger:READ:GROUP:LITERAL:steward-ledger
    steward-ledger:WRITE:TOPIC:LITERAL:steward.events
    steward-ledger:DESCRIBE:TOPIC:LITERAL:steward.events
    steward-ledger:WRITE:TOPIC:LITERAL:steward.deadletter
    steward-ledger:DESCRIBE:TOPIC:LITERAL:steward.deadletter
  )
  local ex
  for ex in "$@"; do
    acls+=("steward-executor-$ex:WRITE:TOPIC:LITERAL:steward.commands.executor.$ex"
      "steward-executor-$ex:DESCRIBE:TOPIC:LITERAL:steward.commands.executor.$ex")
  done
  printf '%s\n' "${acls[@]}"
}

cmd_acls() {
  require_running
  require_tools
  write_client_config
  local specs
  mapfile -t specs < <(component_acls "${EXECUTORS[@]}")
  admin_retried acls "${specs[@]}"
  touch "$DATA/.steward-acls"
}

# admin_retried CMD ARGS...: an idempotent admin call, tried up to 3 times: a broker just started on a loaded
# machine may drop the first request ("node 1 being disconnected", a request timed out)
admin_retried() {
  local try
  for try in 1 2 3; do
    admin "$BOOTSTRAP" "$@" && return 0
    ((try < 3)) || break
    warn "kafka admin $1 failed (try $try of 3); retrying in $((try * 2)) s"
    sleep $((try * 2))
  done
  die "kafka admin $1 failed 3 times on $BOOTSTRAP (log: $LOGFILE)"
}

cmd_add_executor() {
  local id="${1:-}"
  valid_id "$id"
  require_running
  require_tools
  write_client_config
  secret "steward-executor-$id" | admin "$BOOTSTRAP" scram "steward-executor-$id"
  admin_retried create "steward.commands.executor.$id:3"
  admin_retried acls "steward-executor-$id:WRITE:TOPIC:LITERAL:steward.commands.executor.$id" \
    "steward-executor-$id:DESCRIBE:TOPIC:LITERAL:steward.commands.executor.$id"
  log "executor $id: principal steward-executor-$id, topic steward.commands.executor.$id (the ledger reads it within STEWARD_LEDGER_TOPIC_REFRESH_S)"
}

cmd_rotate() {
  local user="${1:-}" file new
  [[ $user =~ ^steward-[a-z0-9-]+$ && $user != steward-controller ]] || die "rotate a component's principal (steward-api, ...), not: $user"
  [[ -s $SECRETS/$user.password ]] || die "no password file for $user in $SECRETS"
  require_running
  require_tools
  write_client_config
  file="$SECRETS/$user.password"
  new="$(LC_ALL=C tr -dc 'A-Za-z0-9' </dev/urandom | head -c32 || true)"
  # the broker first: until the file changes, the component's open connections stay, new ones fail
  printf '%s\n' "$new" | admin "$BOOTSTRAP" scram "$user"
  (umask 077 && printf '%s' "$new" >"$file.tmp" && mv "$file.tmp" "$file")
  [[ $user == steward-admin ]] && write_client_config && write_server_properties
  log "rotated $user; restart the component that uses it (steward down && steward up, or its pod)"
}

# ---------------------------------------------------------------- commands
cmd_start() {
  local pid
  pid="$(running_pid "$PIDFILE" "$PID_PATTERN")"
  already_running kafka "$pid" "$BOOTSTRAP" && return 0
  cmd_install
  check_port_free kafka "$BIND_HOST" "$KAFKA_PORT"
  check_port_free kafka-controller "$BIND_HOST" "$KAFKA_CONTROLLER_PORT"
  check_port_free kafka-tls "$BIND_HOST" "$KAFKA_TLS_PORT"
  tls_material  # (before the clock starts: the wait for readiness is the broker's alone)
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
  write_client_config
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
  if ((all)) && [[ -f $DATA/.steward-acls ]]; then
    log "topics present: ${specs[*]}"
    return 0
  fi
  require_tools
  write_client_config
  admin_retried create "${specs[@]}"
  cmd_acls
}

cmd_list() {
  require_running
  require_tools
  write_client_config
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
  acls) cmd_acls ;;
  add-executor) cmd_add_executor "${2:-}" ;;
  rotate) cmd_rotate "${2:-}" ;;
  tls-paths) cmd_tls_paths ;;
  *) usage_die "install|start|stop|restart|status|topics [NAME:PARTITIONS ...]|list|acls|add-executor ID|rotate PRINCIPAL|tls-paths" ;;
esac
