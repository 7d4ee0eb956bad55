#!/usr/bin/env bash
# Tools that check the deployment descriptions (infra/k8s, infra/compose) without a cluster or Docker.
#
#   infra/tools.sh install            everything below (idempotent; what `make tools` runs, for `make test`)
#   infra/tools.sh install-helm       Helm 3 built from the Go module proxy (go install) into $TOOLS/bin
#   infra/tools.sh install-promlint   steward-promlint (infra/promlint: client_golang's promlint, the linter
#                                     `promtool check metrics` runs) built from the Go module proxy into $TOOLS/bin
#   infra/tools.sh install-schemas    the Kubernetes OpenAPI JSON schemas (PyPI package kubernetes-validate)
#                                     and the Compose specification's schema (vendored by check-jsonschema),
#                                     with jsonschema, into $TOOLS/python (pip --target, so the project's
#                                     venv stays exactly what pyproject.toml says)
#   infra/tools.sh paths              print the tool locations (KEY=VALUE) the tests look at
#   infra/tools.sh render [ARGS]      helm template infra/k8s/steward with ARGS (a shortcut for people)
#   infra/tools.sh lint-metrics URL.. steward-promlint on each metrics URL (exit 3 when it finds a problem)
#
# Env: STEWARD_TOOLS_DIR (<repo>/.venv/tools), STEWARD_HELM_VERSION (v3.22.0),
#      STEWARD_KUBE_VALIDATE_VERSION (1.37.0), STEWARD_CHECK_JSONSCHEMA_VERSION (0.39.0),
#      PYTHON (<repo>/.venv/bin/python, else python3).
# Needs: go (1.24+; Debian's golang-go is installed when none is found) for Helm; pip for the schemas.
# Both reach only the package registries (the Go module proxy, PyPI).
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TOOLS="${STEWARD_TOOLS_DIR:-$REPO_DIR/.venv/tools}"
HELM_VERSION="${STEWARD_HELM_VERSION:-v3.22.0}"
KV_VERSION="${STEWARD_KUBE_VALIDATE_VERSION:-1.37.0}"
CJ_VERSION="${STEWARD_CHECK_JSONSCHEMA_VERSION:-0.39.0}"
PY_STAMP="kv-$KV_VERSION-cj-$CJ_VERSION"
HELM="$TOOLS/bin/helm"
PROMLINT="$TOOLS/bin/steward-promlint"
PROMLINT_SRC="$INFRA_DIR/promlint"
PYDIR="$TOOLS/python"
CHART="$INFRA_DIR/k8s/steward"

find_python() {
  if [[ -n ${PYTHON:-} ]]; then
    printf '%s' "$PYTHON"
  elif [[ -x $REPO_DIR/.venv/bin/python ]]; then
    printf '%s' "$REPO_DIR/.venv/bin/python"
  else
    command -v python3
  fi
}

helm_version_of() { # BINARY -> "v3.x.y" or nothing
  "$1" version --template '{{ .Version }}' 2>/dev/null || true
}

cmd_install_helm() {
  if [[ -x $HELM && "$(helm_version_of "$HELM")" == "$HELM_VERSION" ]]; then
    log "helm $HELM_VERSION already in $HELM"
    return 0
  fi
  local go t0
  if ! go="$(find_go)"; then
    log "no Go toolchain found; installing Debian's golang-go (Go fetches a newer toolchain itself if Helm needs one)"
    apt_install golang-go ca-certificates
    go="$(find_go)" || die "no Go toolchain: put go (1.24+) on PATH to build helm"
  fi
  t0=$(now_ms)
  mkdir -p "$TOOLS/bin"
  log "building helm $HELM_VERSION with $("$go" version | cut -d' ' -f3) (go install, Go module proxy)"
  # -ldflags: what Helm's own Makefile stamps, so `helm version` names the release
  if ! GOBIN="$TOOLS/bin" GOFLAGS="-buildvcs=false" CGO_ENABLED=0 "$go" install \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >"$LOG_DIR/tools-helm.log" 2>&1; then
    fail_with_log "go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION failed" "$LOG_DIR/tools-helm.log"
  fi
  [[ -x $HELM ]] || die "go install succeeded but $HELM is missing"
  log "helm $(helm_version_of "$HELM") in $HELM ($(($(now_ms) - t0)) ms)"
}

promlint_fingerprint() { # the sources and the pinned module versions it was built from
  cat "$PROMLINT_SRC/go.mod" "$PROMLINT_SRC/go.sum" "$PROMLINT_SRC/main.go" | sha256sum | cut -c1-16
}

# Prometheus' own `promtool` is a large build (the whole server's module graph); `promtool check metrics`
# is client_golang's promlint run on the exposition, which this small program runs the same way.
cmd_install_promlint() {
  local stamp="$TOOLS/bin/.steward-promlint"
  if [[ -x $PROMLINT && -f $stamp && "$(cat "$stamp")" == "$(promlint_fingerprint)" ]]; then
    log "steward-promlint already in $PROMLINT"
    return 0
  fi
  local go t0
  if ! go="$(find_go)"; then
    log "no Go toolchain found; installing Debian's golang-go"
    apt_install golang-go ca-certificates
    go="$(find_go)" || die "no Go toolchain: put go (1.24+) on PATH to build steward-promlint"
  fi
  t0=$(now_ms)
  mkdir -p "$TOOLS/bin"
  log "building steward-promlint with $("$go" version | cut -d' ' -f3) (client_golang's promlint, Go module proxy)"
  # -mod=readonly: the versions go.mod and go.sum pin, checked against the sum database, nothing resolved anew
  if ! (cd "$PROMLINT_SRC" && GOFLAGS="-buildvcs=false -mod=readonly" CGO_ENABLED=0 "$go" build -trimpath \
    -ldflags "-s -w" -o "$PROMLINT.tmp" .) >"$LOG_DIR/tools-promlint.log" 2>&1; then
    fail_with_log "go build of infra/promlint failed" "$LOG_DIR/tools-promlint.log"
  fi
  mv "$PROMLINT.tmp" "$PROMLINT"
  promlint_fingerprint >"$stamp"
  log "steward-promlint in $PROMLINT ($(($(now_ms) - t0)) ms)"
}

kv_installed() {
  local py
  py="$(find_python)"
  [[ -f $PYDIR/.steward-$PY_STAMP ]] &&
    PYTHONPATH="$PYDIR" "$py" -c 'import kubernetes_validate, check_jsonschema, jsonschema, referencing' 2>/dev/null
}

cmd_install_schemas() {
  if kv_installed; then
    log "kubernetes-validate $KV_VERSION and check-jsonschema $CJ_VERSION already in $PYDIR"
    return 0
  fi
  local py t0
  py="$(find_python)"
  t0=$(now_ms)
  rm -rf "$PYDIR.tmp"
  log "installing kubernetes-validate $KV_VERSION and check-jsonschema $CJ_VERSION (schemas) into $PYDIR"
  if ! "$py" -m pip install -q --disable-pip-version-check --no-compile --target "$PYDIR.tmp" \
    "kubernetes-validate==$KV_VERSION" "check-jsonschema==$CJ_VERSION" >"$LOG_DIR/tools-schemas.log" 2>&1; then
    fail_with_log "pip install of the schema packages failed" "$LOG_DIR/tools-schemas.log"
  fi
  rm -rf "$PYDIR"
  mv "$PYDIR.tmp" "$PYDIR"
  touch "$PYDIR/.steward-$PY_STAMP"
  kv_installed || die "the schema packages installed in $PYDIR do not import with $py"
  log "kubernetes-validate $KV_VERSION and check-jsonschema $CJ_VERSION in $PYDIR ($(($(now_ms) - t0)) ms)"
}

cmd_paths() {
  echo "STEWARD_HELM=$HELM"
  echo "STEWARD_PROMLINT=$PROMLINT"
  echo "STEWARD_KUBE_SCHEMAS_PYTHONPATH=$PYDIR"
}

case "${1:-}" in
  install)
    cmd_install_helm
    cmd_install_promlint
    cmd_install_schemas
    ;;
  install-helm) cmd_install_helm ;;
  install-promlint) cmd_install_promlint ;;
  install-schemas) cmd_install_schemas ;;
  paths) cmd_paths ;;
  render)
    shift
    [[ -x $HELM ]] || die "no helm in $HELM (run: infra/tools.sh install-helm)"
    "$HELM" template steward "$CHART" --kube-version "${STEWARD_KUBE_VERSION:-1.33.0}" "$@"
    ;;
  lint-metrics)
    shift
    [[ -x $PROMLINT ]] || die "no steward-promlint in $PROMLINT (run: infra/tools.sh install-promlint)"
    "$PROMLINT" "$@"
    ;;
  *)
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
