# queue-manager: history-aware fair share, gradual quota shifts and experiment
# preemption for Kueue. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Where the control-plane binaries are cached (outside the repo, keyed by version).
export QM_CACHE_DIR ?= $(HOME)/.cache/queue-manager
# The operator image: `make image` builds and tags $(IMAGE); manifests/kustomization.yaml names the same
# image, and `make deploy IMAGE=...` (or REGISTRY=...) installs another one. Override the registry with
# e.g. `make image deploy REGISTRY=registry.example.com/platform`.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
REGISTRY ?= ghcr.io/queue-manager
IMAGE ?= $(REGISTRY)/queue-manager:$(VERSION)
export IMAGE

.PHONY: help install core lock lint test unit integration conformance differential bench demo journey controlplane ensure-controlplane ensure-prometheus ensure-postgres image dev-cluster-up dev-cluster-down kind-up deploy clean

help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}'

$(STAMP): pyproject.toml requirements-dev.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --require-hashes -r requirements-dev.lock
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(STAMP)

install: $(STAMP) core ## Create .venv: the locked dev dependencies (requirements-dev.lock), the project (.venv/bin/qm) and the compiled core

core: $(STAMP) ## Compile the simulator's hot modules with mypyc into build/core (fairshare/compiled.py; a no-op when current)
	@$(BIN)/python tools/build_core.py --optional

lock: $(STAMP) ## Re-pin requirements.lock (what `qm run` needs: the image) and requirements-dev.lock from pyproject.toml
	$(BIN)/uv pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes --custom-compile-command "make lock" -o requirements.lock -q
	$(BIN)/uv pip compile pyproject.toml --extra dev --universal --python-version 3.11 --generate-hashes --custom-compile-command "make lock" -o requirements-dev.lock -q

lint: $(STAMP) ## ruff, mypy --strict and the import-linter layer contracts
	$(BIN)/ruff check .
	$(BIN)/mypy --strict fairshare queue_manager simulations qm devcluster ledger
	$(BIN)/lint-imports

# Every test as the service ships (pure Python: the operator image has no compiled core), then the tests that
# need no control plane again with the compiled core (fairshare/compiled.py), which the differential tests in
# them check against the pure-Python reference.
# The unit tests run on up to 4 processes (pytest-xdist; a module's tests stay in one). The integration
# tests run on 2, each process with its own control planes (tests/integration/controlplanes.py), a module on
# one, the longest modules handed out first (tests/integration/conftest.py SLOW_FIRST): they mostly wait on
# the clusters, so 2 processes overlap the waits on 2 cores (the time: README).
XDIST := -n auto --maxprocesses 4 --dist loadfile
INTEGRATION := QM_CORE=python CI=true $(BIN)/pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=25 -m integration

test: $(STAMP) core lint ensure-controlplane ensure-prometheus ensure-postgres ## Lint, then EVERY test (integration included) in pure Python, then the unit tests with the compiled core (builds what is missing first)
	QM_CORE=python CI=true $(BIN)/pytest -q $(XDIST) -m 'not integration'
	$(INTEGRATION)
	CI=true $(BIN)/pytest -q $(XDIST) -m 'not integration'

integration: $(STAMP) ensure-controlplane ensure-prometheus ensure-postgres ## The integration tests alone (a real control plane, PostgreSQL, Prometheus), in pure Python
	$(INTEGRATION)

unit: $(STAMP) core ## The fast path: unit, conformance and hostile-input tests (no control plane)
	$(BIN)/pytest -q $(XDIST) -m 'not integration'

ensure-controlplane: $(STAMP) ## Build the control plane if it is not built yet (says so: it takes a while, once)
	@if ! $(BIN)/python -c 'import sys; from devcluster import Binaries; sys.exit(0 if Binaries.discover().has_nodes_support else 1)' 2>/dev/null; then \
	  echo "make: the control plane (etcd, kube-apiserver, Kueue, kube-controller-manager, kube-scheduler, KWOK) is not built in $(QM_CACHE_DIR);"; \
	  echo "make: building it now from its Go modules: about 18 min on 2 cores with warm Go caches, about 30 min cold (docs/controlplane.md); once, then cached"; \
	  bash tools/controlplane/build.sh; \
	fi

# Debian packages the tests run for real: PostgreSQL (the ledger's tests start a throwaway server) and
# Prometheus (its promtool runs the alert rules' tests).
# Installed with apt-get when run as root, else one line saying what to install.
define apt_ensure
	@if ! { $(2); } >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "make: $(3) missing: apt-get install $(1), about 1 min"; \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(1); \
	  else \
	    echo "make: $(3) missing: install Debian's $(1) package (as root: apt-get install -y $(1))"; exit 2; \
	  fi; \
	fi
endef

ensure-postgres: ## Install Debian's PostgreSQL binaries (the ledger's tests start a throwaway server) if they are missing
	$(call apt_ensure,postgresql,ls /usr/lib/postgresql/*/bin/initdb,PostgreSQL's binaries (the ledger's tests run a real server) are)

ensure-prometheus: ## Install Debian's Prometheus and promtool (alert-rule and telemetry tests) if they are missing
	$(call apt_ensure,prometheus,command -v promtool && command -v prometheus,Prometheus and promtool (the alert rules' tests) are)

conformance: $(STAMP) ## Run the scheduling-cycle corpus (tests/conformance, with the shared examples vendored in shared-examples/)
	$(BIN)/qm conformance tests/conformance

SEEDS ?= 0:300
differential: $(STAMP) core ensure-controlplane ## The model against the real Kueue on random states, both modes (SEEDS=0:300; MODES=classical,fair-sharing)
	$(BIN)/python -m tests.differential --seeds $(SEEDS) $(if $(MODES),--modes $(MODES)) $(if $(CASES),--save-cases $(CASES))

bench: $(STAMP) core ## Benchmarks (prints figures; not tests)
	@$(BIN)/python -m benchmarks $(BENCH)

journey: $(STAMP) ensure-controlplane ensure-postgres ## The platform engineer's journey on a local cluster, narrated: samples, qm plan, the shift, the ledger (docs/operator.md)
	QM_CORE=python $(BIN)/python -m tests.journey

demo: $(STAMP) core ## The main job: simulate the bundled frontier-shrink scenario and compare its variants
	$(BIN)/qm simulate simulations/scenarios/frontier-shrink.yaml --out out/frontier-shrink

controlplane: ## Build (or reuse) kube-apiserver, etcd and Kueue from their Go modules into $(QM_CACHE_DIR)
	bash tools/controlplane/build.sh

dev-cluster-up: $(STAMP) controlplane ## Start etcd + kube-apiserver + Kueue on loopback; prints the KUBECONFIG
	$(BIN)/qm dev-cluster up $(if $(NODES),--nodes $(NODES))

dev-cluster-down: $(STAMP) ## Stop the local control plane
	$(BIN)/qm dev-cluster down

image: ## Build and tag the operator image $(IMAGE) (base dependencies from requirements.lock only; needs Docker)
	@if ! command -v docker >/dev/null 2>&1; then \
	  echo "make image: docker is not installed here: cannot build $(IMAGE) (the Dockerfile builds anywhere Docker runs)" >&2; exit 2; \
	fi
	@if ! docker info >/dev/null 2>&1; then \
	  echo "make image: the Docker daemon is not reachable here (docker info fails): cannot build $(IMAGE)" >&2; exit 2; \
	fi
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) .
	@echo "make image: built $(IMAGE); push it with: docker push $(IMAGE)"

kind-up: ## Create a kind cluster with Kueue and the operator image $(IMAGE) (needs Docker; installs kind with go install)
	bash manifests/kind/up.sh

deploy: ## Install the operator (kubectl apply -k manifests/, image $(IMAGE)) and the sample policy into the current kubectl context
	bash manifests/kind/deploy.sh

clean: ## Remove the virtualenv, the compiled core and outputs (not the control-plane cache)
	rm -rf $(VENV) build out .mypy_cache .pytest_cache .ruff_cache
