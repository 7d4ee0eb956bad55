# Steward: the two commands a newcomer runs are `make demo` and `make test` (both idempotent).
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STEWARD := $(VENV)/bin/steward
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: setup compile tools services up sso down demo test lint typecheck unit integration e2e bench-cycle schema clean web web-test chromium

## setup: the Python environment, its compiled hot modules, and the real services' software (Kafka jars,
## PostgreSQL, Temporal CLI, Slurm and munge from Debian for the Slurm executor's tests, the OpenID provider
## from infra/oidc/package-lock.json)
setup: $(STAMP) compile
	bash infra/services.sh install
	bash infra/slurm.sh install
	bash infra/oidc.sh install

## compile: the hot pure modules (policy, simulator, domain, the ledger's per-event code) compiled with mypyc
## (ADR 0020, steward.native); rebuilt only when a compiled source changed (~1 min); until then, or with
## STEWARD_PURE=1, the .py sources run; first the records' `__init__`s are generated from their fields (ADR 0042)
compile: $(STAMP)
	@command -v gcc >/dev/null || STEWARD_SVC=compile bash -c '. infra/lib.sh && apt_install gcc libc6-dev'
	$(PY) infra/generate_inits.py
	$(PY) infra/compile_native.py

## tools: what checks the deployment descriptions (Helm built from the Go proxy, Kubernetes schemas) and the
## Kubernetes executor's test cluster (etcd, kube-apiserver, kwok: infra/k8s.sh, built once, cached outside the
## checkout); only the tests need them, so `make demo` on a fresh machine does not wait for a Go build
tools: setup
	bash infra/tools.sh install
	bash infra/k8s.sh install

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@

## web: the UI (web/), built into web/dist from the committed lockfile; the API serves it at /
WEB_SRC := $(shell find web/src -type f 2>/dev/null) web/index.html web/vite.config.ts web/tsconfig.json web/codegen.ts \
	$(wildcard schema/graphql/schema.graphql)

web: web/dist/index.html

web/node_modules/.ci-stamp: web/package-lock.json web/package.json
	cd web && npm ci --no-audit --no-fund
	touch $@

web/dist/index.html: web/node_modules/.ci-stamp $(WEB_SRC)
	cd web && npm run build

web-test: web/node_modules/.ci-stamp
	cd web && npm test

## chromium: Debian's browser for the e2e tests (Playwright drives it through executable_path)
chromium:
	@test -x /usr/bin/chromium || { apt-get update -qq && apt-get install -y -qq chromium; }

## up / down: the whole stack (Kafka, PostgreSQL, Temporal, ledger, scheduler, API, worker, executor)
up: setup web
	$(STEWARD) up

## sso: the demo's OpenID provider (oidc-provider from npm, infra/oidc.sh); then STEWARD_OIDC_ISSUER=http://127.0.0.1:9100 make up
sso:
	bash infra/oidc.sh start

down:
	@if [ -x $(STEWARD) ]; then $(STEWARD) down; else bash infra/services.sh down; fi
	@bash infra/oidc.sh stop 2>/dev/null || true

## demo: set everything up, start the stack (with the demo's contract timings), replay a slice of the
## Philly trace at 120x on 40 simulated nodes + 1 local node; keeps running until `make down`
## (options: make demo DEMO_ARGS="--speed 60 --start-day 28 --hours 24")
demo: setup web
	STEWARD_DEMO_T0=$${STEWARD_DEMO_T0:-$$(date +%s.%N)} $(PY) -m steward.demo $(DEMO_ARGS)

# the whole stack with the Slurm executor replaces the stack's processes and needs a store with no other nodes:
# it runs in a slot of its own (its own run folder, ports and services), after the rest of the suite
SLURM_STACK_TEST := tests/integration/test_slurm_stack.py
# the same for the Kubernetes executor's whole-stack test (issue 26)
K8S_STACK_TEST := tests/integration/test_kubernetes_stack.py
# the chaos test kills the stack's processes, restarts its PostgreSQL, Kafka and Temporal and registers the soak's
# nodes and allocation: a slot of its own too, so that no other test shares what it breaks (ADR 0061)
CHAOS_TEST := tests/integration/test_chaos.py
# two clusters behind two node agents (issue 25, ADR 0068) registers its own clusters and needs a store with no
# other nodes (routing sees every registered cluster): a slot of its own too
TWO_CLUSTERS_TEST := tests/integration/test_two_clusters_stack.py

## test: set everything up and run every tier (lint, types, unit, property, integration, e2e)
## (the suite runs the compiled build; the unit and property tests of the compiled policy, domain, store and ledger
## also run on the pure sources)
test: setup tools web web-test chromium lint typecheck
	STEWARD_EXPECT_NATIVE=1 $(PY) -m pytest -q -p no:cacheprovider tests --ignore=$(SLURM_STACK_TEST) --ignore=$(K8S_STACK_TEST) \
		--ignore=$(CHAOS_TEST) --ignore=$(TWO_CLUSTERS_TEST)
	STEWARD_TEST_SLOT=3 STEWARD_EXPECT_NATIVE=1 $(PY) -m pytest -q -p no:cacheprovider $(SLURM_STACK_TEST)
	STEWARD_TEST_SLOT=4 STEWARD_EXPECT_NATIVE=1 $(PY) -m pytest -q -p no:cacheprovider $(K8S_STACK_TEST)
	STEWARD_TEST_SLOT=5 STEWARD_EXPECT_NATIVE=1 $(PY) -m pytest -q -p no:cacheprovider $(CHAOS_TEST)
	STEWARD_TEST_SLOT=6 STEWARD_EXPECT_NATIVE=1 $(PY) -m pytest -q -p no:cacheprovider $(TWO_CLUSTERS_TEST)
	STEWARD_PURE=1 $(PY) -m pytest -q -p no:cacheprovider tests/unit/policy tests/property/test_policy_properties.py \
		tests/unit/domain tests/unit/store tests/unit/ledger tests/unit/test_written_inits.py tests/property/test_fast_domain.py \
		tests/property/test_fast_decode.py tests/property/test_fast_canonical.py tests/property/test_copytext.py

## lint: ruff, and the import contracts of pyproject.toml (the layers and no circles: docs/architecture.md)
lint:
	$(VENV)/bin/ruff check services workflows tests bench migrations infra
	PYTHONPATH=services:workflows $(VENV)/bin/lint-imports --no-cache
	$(PY) infra/generate_inits.py --check

typecheck:
	$(VENV)/bin/mypy

unit: compile
	$(PY) -m pytest -q tests/unit tests/property

integration: setup
	$(PY) -m pytest -q tests/integration

e2e: setup web chromium
	$(PY) -m pytest -q tests/e2e

clean: down
	bash infra/postgres.sh purge
	rm -rf .run
