#!/usr/bin/env bash
# A real Kubernetes API server on loopback, for the Kubernetes executor's integration tier (issue 26; docs/adr/
# 0051): etcd, kube-apiserver and kwok (fake nodes that "run" pods), each built once from the Go module proxy
# from the wrapper modules in infra/k8s/modules/ (their go.mod and go.sum pin every version), and kept outside
# the checkout ($STEWARD_K8S_CACHE), so a fresh clone on the same machine reuses them. No kubelet, no
# kube-scheduler, no controller manager: Steward's scheduler binds the pods, kwok plays the kubelets.
#
#   infra/k8s.sh install   build etcd, kube-apiserver, kubectl, kube-scheduler and kwok (nice'd; each only when missing or when its
#                          build module changed): about 20 minutes of 2 cores for kube-apiserver the first time
#   infra/k8s.sh install-etcd|install-kwok|install-apiserver|install-kubectl|install-scheduler   one of them
#   infra/k8s.sh start     install if needed, write certificates, token and kubeconfig, start etcd,
#                          kube-apiserver (RBAC, a static admin token) and kwok, wait until /readyz answers,
#                          create the kwok GPU nodes that are missing
#   infra/k8s.sh stop      stop kwok, kube-apiserver, etcd
#   infra/k8s.sh status    exit 0 and print the versions and the address when running (3 when not)
#   infra/k8s.sh env       print `export KUBECONFIG=...` for clients
#   infra/k8s.sh paths     print the binaries' locations (KEY=VALUE)
#
# Env: STEWARD_RUN_DIR, STEWARD_K8S_CACHE (${XDG_CACHE_HOME:-~/.cache}/steward/k8s), STEWARD_K8S_PORT (6443,
#      the API server's HTTPS port), STEWARD_ETCD_PORT (2379; the peer port is the next one),
#      STEWARD_KWOK_PORT (10247, kwok's own health/metrics), STEWARD_K8S_NODES (2 kwok GPU nodes made at start,
#      kwok-gpu-<i>), STEWARD_K8S_GPUS (8 each), STEWARD_K8S_GPU_MODEL, STEWARD_WAIT_TIMEOUT (90).
# Needs: go (1.25+), openssl. Reaches only the Go module proxy.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CACHE="${STEWARD_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/steward/k8s}"
BIN="$CACHE/bin"
BUILD_SRC="$INFRA_DIR/k8s/modules"
KUBE_VERSION=v1.35.4
API_PORT="${STEWARD_K8S_PORT:-6443}"
ETCD_PORT="${STEWARD_ETCD_PORT:-2379}"
ETCD_PEER_PORT=$((ETCD_PORT + 1))
KWOK_PORT="${STEWARD_KWOK_PORT:-10247}"
NODES="${STEWARD_K8S_NODES:-2}"
GPUS="${STEWARD_K8S_GPUS:-8}"
GPU_MODEL="${STEWARD_K8S_GPU_MODEL:-NVIDIA-H100-80GB-HBM3}"
K8S_DIR="$RUN_DIR/k8s"
PKI="$K8S_DIR/pki"
KUBECONFIG_FILE="$K8S_DIR/kubeconfig"
TOKEN_FILE="$K8S_DIR/admin.token"
STAGES="$K8S_DIR/kwok-stages.yaml"
K8S_PIDS="$K8S_DIR/pids"
ETCD_LOG="$LOG_DIR/etcd.log"
API_LOG="$LOG_DIR/kube-apiserver.log"
KWOK_LOG="$LOG_DIR/kwok.log"

fingerprint() { # MODULE_DIR: what a binary was built from
  # (a module without Go files of its own: the glob matches nothing, which is no error here)
  { cat "$1/go.mod" "$1/go.sum" && cat "$1"/*.go 2>/dev/null || true; } | sha256sum | cut -c1-16
}

# build NAME MODULE PACKAGE [LDFLAGS]: go build PACKAGE inside the wrapper module (-mod=readonly: exactly the
# versions its go.mod and go.sum pin, checked against the sum database) into $BIN/NAME, unless the binary
# there was built from the same module files.
build() {
  local name=$1 module=$2 package=$3 ldflags=${4:-} go t0 stamp
  stamp="$BIN/.$name"
  if [[ -x $BIN/$name && -f $stamp && "$(cat "$stamp")" == "$(fingerprint "$BUILD_SRC/$module")" ]]; then
    log "$name already built in $BIN/$name"
    return 0
  fi
  if ! go="$(find_go)"; then
    log "no Go toolchain found; installing Debian's golang-go"
    apt_install golang-go ca-certificates
    go="$(find_go)" || die "no Go toolchain: put go (1.25+) on PATH to build $name"
  fi
  mkdir -p "$BIN"
  t0=$(now_ms)
  log "building $name ($package) with $("$go" version | cut -d' ' -f3) from the Go module proxy (nice'd; log $LOG_DIR/k8s-build-$name.log)"
  if ! (cd "$BUILD_SRC/$module" && GOFLAGS="-buildvcs=false -mod=readonly" CGO_ENABLED=0 nice -n 10 "$go" build \
    -trimpath -ldflags "-s -w $ldflags" -o "$BIN/$name.tmp" "$package") >"$LOG_DIR/k8s-build-$name.log" 2>&1; then
    fail_with_log "go build of $package failed" "$LOG_DIR/k8s-build-$name.log"
  fi
  mv "$BIN/$name.tmp" "$BIN/$name"
  fingerprint "$BUILD_SRC/$module" >"$stamp"
  log "$name in $BIN/$name ($(du -h "$BIN/$name" | cut -f1), $(($(now_ms) - t0)) ms)"
}

install_etcd() { build etcd etcd .; }
install_kwok() { build kwok kwok sigs.k8s.io/kwok/cmd/kwok; }
# the version stamp Kubernetes' own build sets (kubectl and clients parse /version)
kube_ldflags() {
  local minor=${KUBE_VERSION#v1.}
  minor=${minor%%.*}
  printf '%s' "-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
}
install_apiserver() { build kube-apiserver apiserver k8s.io/kubernetes/cmd/kube-apiserver "$(kube_ldflags)"; }
# kubectl from the same module (the same pinned versions): the tests apply pods as users do
install_kubectl() { build kubectl apiserver k8s.io/kubernetes/cmd/kubectl "$(kube_ldflags)"; }
# kube-scheduler, the reference anchor of `steward bench k8s` (it binds the same pods on the same API server)
install_scheduler() { build kube-scheduler apiserver k8s.io/kubernetes/cmd/kube-scheduler "$(kube_ldflags)"; }

cmd_install() {
  install_etcd
  install_kwok
  install_apiserver
  install_kubectl
  install_scheduler
}

# write_pki: a CA, the API server's serving certificate (127.0.0.1, localhost) signed by it, the service
# account signing key; a static admin token (group system:masters) and a kubeconfig that trusts the CA.
write_pki() {
  mkdir -p "$PKI"
  chmod 700 "$K8S_DIR" "$PKI"
  if [[ ! -s $PKI/ca.crt ]]; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=steward-test-ca" \
      -keyout "$PKI/ca.key" -out "$PKI/ca.crt" 2>/dev/null
  fi
  if [[ ! -s $PKI/apiserver.crt ]]; then
    openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout "$PKI/apiserver.key" \
      -out "$PKI/apiserver.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc\n' >"$PKI/san.ext"
    openssl x509 -req -in "$PKI/apiserver.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 3650 \
      -extfile "$PKI/san.ext" -out "$PKI/apiserver.crt" 2>/dev/null
  fi
  if [[ ! -s $PKI/sa.key ]]; then
    openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
    openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  fi
  if [[ ! -s $TOKEN_FILE ]]; then
    (umask 077 && openssl rand -hex 24 >"$TOKEN_FILE")
  fi
  local token
  token="$(cat "$TOKEN_FILE")"
  (umask 077 && printf '%s,steward-admin,steward-admin,"system:masters"\n' "$token" >"$K8S_DIR/tokens.csv")
  (umask 077 && cat >"$KUBECONFIG_FILE" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: steward-test
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: steward-admin
  user:
    token: $token
contexts:
- name: steward-test
  context: {cluster: steward-test, user: steward-admin}
current-context: steward-test
EOF
  )
}

# write_stages: kwok's own stage definitions from its module (nodes: initialise and heartbeat; pods: running
# once bound), plus Steward's two (infra/k8s/kwok-stages.yaml: deleted when the grace ends, completion).
write_stages() {
  local go dir
  go="$(find_go)" || die "no Go toolchain to find kwok's module"
  dir="$(cd "$BUILD_SRC/kwok" && GOFLAGS=-mod=readonly "$go" list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
  [[ -d $dir/kustomize/stage ]] || die "kwok's stage definitions not found in $dir (run: infra/k8s.sh install)"
  {
    cat "$dir/kustomize/stage/node/fast/node-initialize.yaml"
    echo '---'
    cat "$dir/kustomize/stage/node/heartbeat/node-heartbeat.yaml"
    echo '---'
    cat "$dir/kustomize/stage/pod/fast/pod-ready.yaml"
    echo '---'
    cat "$INFRA_DIR/k8s/kwok-stages.yaml"
  } >"$STAGES"
}

api_ready() {
  curl -sf --max-time 2 --cacert "$PKI/ca.crt" -H "Authorization: Bearer $(cat "$TOKEN_FILE")" \
    "https://127.0.0.1:$API_PORT/readyz" >/dev/null
}

api() { # METHOD PATH [JSON]: a call to the API server as its admin; prints the answer
  curl -sS --max-time 10 --cacert "$PKI/ca.crt" -H "Authorization: Bearer $(cat "$TOKEN_FILE")" \
    -H 'Content-Type: application/json' -X "$1" "https://127.0.0.1:$API_PORT$2" ${3:+--data "$3"}
}

# ensure_nodes: $NODES kwok nodes with $GPUS GPUs each (`kwok-gpu-<i>`), the GPU operator's model label and
# Topograph's labels (one block per two nodes under one spine), unless they exist
ensure_nodes() {
  local i name res code
  res="{\"nvidia.com/gpu\":\"$GPUS\",\"cpu\":\"64\",\"memory\":\"512Gi\",\"pods\":\"110\"}"
  for ((i = 0; i < NODES; i++)); do
    name="kwok-gpu-$i"
    code="$(curl -s -o /dev/null -w '%{http_code}' --cacert "$PKI/ca.crt" \
      -H "Authorization: Bearer $(cat "$TOKEN_FILE")" "https://127.0.0.1:$API_PORT/api/v1/nodes/$name")"
    [[ $code == 404 ]] || continue
    api POST /api/v1/nodes "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$name\",
      \"annotations\":{\"kwok.x-k8s.io/node\":\"fake\"},\"labels\":{\"type\":\"kwok\",
      \"nvidia.com/gpu.product\":\"$GPU_MODEL\",\"network.topology.nvidia.com/spine\":\"spine0\",
      \"network.topology.nvidia.com/block\":\"block$((i / 2))\"}},
      \"status\":{\"allocatable\":$res,\"capacity\":$res}}" >/dev/null
  done
  ((NODES == 0)) || log "$NODES kwok node(s) with $GPUS GPU(s) each"
}

cmd_start() {
  cmd_install
  mkdir -p "$K8S_PIDS"
  local pid
  write_pki
  write_stages
  pid="$(running_pid "$K8S_PIDS/etcd.pid" "$BIN/etcd")"
  if ! already_running etcd "$pid" "127.0.0.1:$ETCD_PORT"; then
    check_port_free etcd 127.0.0.1 "$ETCD_PORT"
    rotate_log "$ETCD_LOG"
    start_daemon "$K8S_PIDS/etcd.pid" "$ETCD_LOG" "$BIN/etcd" --name steward --data-dir "$K8S_DIR/etcd" \
      --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
      --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
      --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
      --initial-cluster "steward=http://127.0.0.1:$ETCD_PEER_PORT" \
      --experimental-watch-progress-notify-interval 5s --quota-backend-bytes 2147483648
    pid="$(pid_from_file "$K8S_PIDS/etcd.pid")"
    wait_for_port etcd 127.0.0.1 "$ETCD_PORT" "$WAIT_TIMEOUT" "$pid" "$ETCD_LOG"
  fi
  pid="$(running_pid "$K8S_PIDS/kube-apiserver.pid" "$BIN/kube-apiserver")"
  if ! already_running kube-apiserver "$pid" "127.0.0.1:$API_PORT"; then
    check_port_free kube-apiserver 127.0.0.1 "$API_PORT"
    rotate_log "$API_LOG"
    # ServiceAccount admission is off: no controller manager creates the namespaces' default accounts
    start_daemon "$K8S_PIDS/kube-apiserver.pid" "$API_LOG" "$BIN/kube-apiserver" \
      --etcd-servers "http://127.0.0.1:$ETCD_PORT" --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
      --secure-port "$API_PORT" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
      --client-ca-file "$PKI/ca.crt" --token-auth-file "$K8S_DIR/tokens.csv" --authorization-mode RBAC \
      --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$PKI/sa.pub" \
      --service-account-signing-key-file "$PKI/sa.key" --service-cluster-ip-range 10.96.0.0/24 \
      --disable-admission-plugins ServiceAccount --enable-priority-and-fairness=false \
      --cert-dir "$PKI" --profiling=false
    pid="$(pid_from_file "$K8S_PIDS/kube-apiserver.pid")"
    wait_until kube-apiserver "$WAIT_TIMEOUT" "$pid" "$API_LOG" "ready" api_ready
  fi
  pid="$(running_pid "$K8S_PIDS/kwok.pid" "$BIN/kwok")"
  if ! already_running kwok "$pid" "127.0.0.1:$KWOK_PORT"; then
    check_port_free kwok 127.0.0.1 "$KWOK_PORT"
    rotate_log "$KWOK_LOG"
    # kwok plays the kubelet of the nodes annotated kwok.x-k8s.io/node=fake (a node without it is left
    # alone: a test sets its status by hand, e.g. NotReady)
    start_daemon "$K8S_PIDS/kwok.pid" "$KWOK_LOG" "$BIN/kwok" --kubeconfig "$KUBECONFIG_FILE" \
      --config "$STAGES" --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
      --server-address "127.0.0.1:$KWOK_PORT" --cidr 10.244.0.0/16 --node-ip 127.0.0.1
    pid="$(pid_from_file "$K8S_PIDS/kwok.pid")"
    wait_for_port kwok 127.0.0.1 "$KWOK_PORT" "$WAIT_TIMEOUT" "$pid" "$KWOK_LOG"
  fi
  ensure_nodes
  log "Kubernetes $KUBE_VERSION answering on https://127.0.0.1:$API_PORT (KUBECONFIG=$KUBECONFIG_FILE)"
}

cmd_stop() {
  stop_pid kwok "$K8S_PIDS/kwok.pid" "$BIN/kwok" 10
  stop_pid kube-apiserver "$K8S_PIDS/kube-apiserver.pid" "$BIN/kube-apiserver" 30
  stop_pid etcd "$K8S_PIDS/etcd.pid" "$BIN/etcd" 30
}

running_details() { echo "$KUBE_VERSION running (pid $1) on https://127.0.0.1:$API_PORT; KUBECONFIG=$KUBECONFIG_FILE"; }

cmd_status() {
  local pid ready=1
  pid="$(running_pid "$K8S_PIDS/kube-apiserver.pid" "$BIN/kube-apiserver" 2>/dev/null || true)"
  if [[ -n $pid ]] && api_ready && [[ -n "$(running_pid "$K8S_PIDS/kwok.pid" "$BIN/kwok")" ]]; then ready=0; fi
  service_status kube-apiserver "$pid" "$ready" "127.0.0.1:$API_PORT" "$API_LOG" running_details
}

cmd_paths() {
  echo "STEWARD_K8S_BIN=$BIN"
  echo "STEWARD_KUBECTL=$BIN/kubectl"
  echo "STEWARD_KUBE_SCHEDULER=$BIN/kube-scheduler"
  echo "KUBECONFIG=$KUBECONFIG_FILE"
}

# any_running: whether etcd, the API server or kwok of this run folder runs
any_running() {
  [[ -n "$(running_pid "$K8S_PIDS/kwok.pid" "$BIN/kwok" 2>/dev/null || true)" ||
    -n "$(running_pid "$K8S_PIDS/kube-apiserver.pid" "$BIN/kube-apiserver" 2>/dev/null || true)" ||
    -n "$(running_pid "$K8S_PIDS/etcd.pid" "$BIN/etcd" 2>/dev/null || true)" ]]
}

main() {
  local action="${1:-}"
  # a stop with nothing running has nothing to race: it does not wait for the lock, which an install holds for
  # the length of a Go build (`steward down` / `make down` beside `make tools` waited 300 s for it)
  if [[ $action == stop ]] && ! any_running; then
    cmd_stop
    return
  fi
  lock_if_changing k8s "$action"
  case "$action" in
    install) cmd_install ;;
    install-etcd) install_etcd ;;
    install-kwok) install_kwok ;;
    install-apiserver) install_apiserver ;;
    install-kubectl) install_kubectl ;;
    install-scheduler) install_scheduler ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    env) echo "export KUBECONFIG=$KUBECONFIG_FILE" ;;
    paths) cmd_paths ;;
    *) usage_die "install|start|stop|status|env|paths" ;;
  esac
}

# one line read before it runs: an edit of this file while it builds cannot change what runs next
main "$@"; exit
