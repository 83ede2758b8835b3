# mlkube: `make help` lists the targets.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

GO        ?= go
BIN       := $(CURDIR)/bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X github.com/mlkube/mlkube/operator.Version=$(VERSION)
# Tests run against a real kube-apiserver and etcd built from Go modules (hack/control-plane.sh).
ASSETS     = $(shell hack/control-plane.sh | tail -n 1)

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: generate
generate: ## Regenerate CRDs, RBAC and deepcopy code from the API types and markers (and the chart's copies).
	$(GO) tool controller-gen object paths=./operator/api/...
	$(GO) tool controller-gen crd:generateEmbeddedObjectMeta=true paths=./operator/api/... output:crd:artifacts:config=operator/config/crd/bases
	@# The apiserver ignores `format: int32`: every integer gets the bounds its Go type can hold.
	$(GO) run ./hack/crdbounds operator/config/crd/bases/*.yaml
	@# The rules every kind shares, stated once: its name (and generateName), its templates' label values.
	$(GO) run ./hack/crdrules operator/config/crd/bases/*.yaml
	@# What Go always writes in a pod template defaults to {}, so that a Go client's update is no change.
	$(GO) run ./hack/crddefaults operator/config/crd/bases/*.yaml
	@# How a job may change, and what no pod could carry: an admission policy, not CRD rules, so
	@# that status writes never pay for it (operator/admission).
	$(GO) run ./hack/admissionpolicy operator/config/admission/policy.yaml
	$(GO) tool controller-gen rbac:roleName=mlkube-operator paths=./operator/... output:rbac:artifacts:config=operator/config/rbac
	@# The Helm chart's CRDs and the operator's RBAC rules are copies of the above, never edited.
	hack/chart-files.sh

.PHONY: build
build: ## Build the operator into bin/.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/mlkube-operator ./operator/cmd/mlkube-operator

.PHONY: control-plane
control-plane: ## Build kube-apiserver, etcd and kubectl for the tests (cached per version).
	hack/control-plane.sh

.PHONY: test
test: ## Run every test against a real control plane (builds it first when missing).
	@command -v tmux >/dev/null || { echo "installing tmux (the dashboard's end-to-end tests drive it)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null; }
	@# -p 4: most packages wait on their own apiserver and etcd (the chaos tests on outages and
	@# lease expiry) more than they compute; on 2 cores the suite used 1.15 of them at go's
	@# default of one package per core, and took 293 s; at 4, 204 s (6: no better).
	@assets="$$(hack/control-plane.sh | tail -n 1)" && \
	  KUBEBUILDER_ASSETS="$$assets" MLKUBE_REQUIRE_ENVTEST=1 MLKUBE_REQUIRE_TMUX=1 $(GO) test -p 4 -count=1 ./...
	@# Every fuzzer for a few seconds: a count, not a duration, which Go 1.26 can fail on its own
	@# at the deadline (go.dev/issue/75804). `make fuzz` runs them longer.
	FUZZTIME=1000x hack/fuzz.sh

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 10s; docs/reliability.md).
	hack/fuzz.sh

.PHONY: lint
lint: ## gofmt and go vet.
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

.PHONY: run
run: build ## Run the operator: on the current kubeconfig's cluster, else on a local apiserver.
	hack/run-local.sh

.PHONY: install
install: ## Install the CRDs into the cluster of the current kubeconfig.
	kubectl apply --server-side -k operator/config/crd

.PHONY: check-generated
check-generated: generate ## Fail when generated files differ from what is committed.
	@git diff --exit-code --stat -- operator/ || { echo "generated files are stale: run 'make generate' and commit"; exit 1; }
	@untracked="$$(git ls-files --others --exclude-standard -- operator/)"; if [ -n "$$untracked" ]; then echo "generated files not committed: $$untracked"; exit 1; fi

.PHONY: up
up: ## A local kind cluster with the operator (offline node image unless NODE_IMAGE=...).
	hack/up.sh

.PHONY: down
down: ## Delete the local cluster.
	@# -trimpath, as hack/up.sh builds devctl: the build cache then serves it whatever the module
	@# cache (CI's first step has a new one each run).
	go run -trimpath ./devctl/cmd/devctl down

.PHONY: bench
bench: ## The operator at scale against the apiserver's floor (docs/performance.md).
	@hack/control-plane.sh >/dev/null && go run ./bench/operator

.PHONY: chaos
chaos: ## Faults at full size: 200 jobs under SIGKILLs, an apiserver restart, a leader failover (docs/reliability.md).
	@assets="$$(hack/control-plane.sh | tail -n 1)" && mkdir -p bin/chaos-logs && \
	  KUBEBUILDER_ASSETS="$$assets" MLKUBE_REQUIRE_ENVTEST=1 MLKUBE_CHAOS_JOBS=$${MLKUBE_CHAOS_JOBS:-200} \
	  MLKUBE_CHAOS_SPREAD=$${MLKUBE_CHAOS_SPREAD:-30} MLKUBE_CHAOS_LOGS=$(CURDIR)/bin/chaos-logs \
	  $(GO) test -count=1 -timeout 30m -v ./operator/chaos/

.PHONY: node-image
node-image: ## Build the offline kind node image (cached in Docker's image store).
	clusters/nodeimage/build.sh

.PHONY: e2e
e2e: ## End-to-end tests in a real kind cluster (starts a Docker engine when none answers).
	hack/e2e.sh
