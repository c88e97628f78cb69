# Threadline. Each target is a line or two; the work is in small scripts:
# deploy/ runs things (pg.sh, run.sh), .ci/ checks things.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build
export PATH := $(PATH):/usr/local/go/bin

GO ?= go

.PHONY: build run run-replicas test check test-go test-fuzz test-frontend test-failover \
	bench bench-load bench-search bench-go pg-start pg-stop

# bin/threadline (the service) and bin/threadline-bench (the benchmarks).
build:
	$(GO) build -o bin/ ./cmd/...

# Postgres + service (127.0.0.1:8080) + web app (127.0.0.1:3000), built-in model.
run: build
	deploy/run.sh

# Two replicas on one Postgres behind HAProxy (deploy/haproxy.cfg).
run-replicas: build
	deploy/replicas.sh

# Every test: static checks, Go tests (race detector on the concurrent
# packages), a short fuzz run, the failover fault test, then the web app's
# unit and browser tests.
test: check test-go test-fuzz test-failover test-frontend

# go vet, go mod tidy -diff, staticcheck, gocyclo (no function over 24); tsc --noEmit and ESLint on the web app.
check:
	.ci/check

test-go:
	.ci/test-go

test-fuzz:
	.ci/test-fuzz

test-frontend:
	.ci/test-frontend

# A Postgres primary killed under streaming runs (deploy/failover.sh).
test-failover:
	.ci/test-failover

# The peer workload (BENCHMARKS.md) and the concurrent-streams load.
bench: build
	.ci/with-pg bin/threadline-bench peer

bench-load: build
	.ci/with-pg bin/threadline-bench load --k 100,500,1000,1500,2000 --with-floor

bench-search: build
	.ci/with-pg bin/threadline-bench search

# The hot-path Go benchmarks, 6 runs each for benchstat.
bench-go:
	.ci/with-pg $(GO) test -run '^$$' -bench . -benchmem -count 6 ./checkpoint/ ./store/ ./thread/...

pg-start:
	@deploy/pg.sh start

pg-stop:
	@deploy/pg.sh stop
