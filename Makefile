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

.PHONY: help install lint test unit integration conformance bench demo controlplane dev-cluster-up dev-cluster-down kind-up deploy clean

help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) ## Create .venv and install the project with its dev extras (.venv/bin/qm)

lint: $(STAMP) ## ruff, mypy --strict and the import-linter layer contracts
	$(BIN)/ruff check .
	$(BIN)/mypy --strict fairshare queue_manager simulations qm devcluster
	$(BIN)/lint-imports

test: $(STAMP) lint ## Lint, then the whole test suite (integration tests need `make controlplane`; with CI=true they must run)
	$(BIN)/pytest -q

unit: $(STAMP) ## Unit and conformance tests only
	$(BIN)/pytest -q -m 'not integration'

conformance: $(STAMP) ## Run the shared examples and the project's conformance corpus
	$(BIN)/qm conformance ../shared/conformance/examples tests/conformance

bench: $(STAMP) ## Benchmarks (prints figures; not tests)
	$(BIN)/python -m benchmarks $(BENCH)

demo: $(STAMP) ## The main job: simulate the bundled frontier-shrink scenario and compare its variants
	$(BIN)/qm simulate simulations/scenarios/frontier-shrink.yaml --out out/frontier-shrink

controlplane: ## Build (or reuse) kube-apiserver, etcd and Kueue from their Go modules into $(QM_CACHE_DIR)
	bash tools/controlplane/build.sh

dev-cluster-up: $(STAMP) controlplane ## Start etcd + kube-apiserver + Kueue on loopback; prints the KUBECONFIG
	$(BIN)/qm dev-cluster up $(if $(NODES),--nodes $(NODES))

dev-cluster-down: $(STAMP) ## Stop the local control plane
	$(BIN)/qm dev-cluster down

kind-up: ## Create a kind cluster with Kueue and the operator image (needs Docker; installs kind with go install)
	bash manifests/kind/up.sh

deploy: ## Install the operator (kubectl apply -k manifests/) and the sample policy into the current kubectl context
	bash manifests/kind/deploy.sh

clean: ## Remove the virtualenv and outputs (not the control-plane cache)
	rm -rf $(VENV) out .mypy_cache .pytest_cache .ruff_cache
