# Threadline. `make run` and `make test` need nothing but Go and root (or
# sudo) on Debian: deploy/pg.sh installs and starts the project's own Postgres.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

# Go from /usr/local/go when it is not on PATH already.
export PATH := $(PATH):/usr/local/go/bin

GO         ?= go
BIN        := bin/threadline
# Extra flags for `go test`, e.g. make test GOTESTFLAGS='-race -run TestX'.
GOTESTFLAGS ?=
# Per-token delay of the built-in model under `make run`.
RUN_BUILTIN_DELAY ?= 30ms

.PHONY: build run test test-go test-frontend bench pg-start pg-stop

build:
	$(GO) build -o $(BIN) ./cmd/threadline

# Postgres (unless THREADLINE_DATABASE_URL is set already) + service + web app.
# ---- FRONTEND (make run): the web app gets started at the marked line below,
# in the background before `exec`, and stopped when the service exits. --------
run: build
	@if [[ -z "$${THREADLINE_DATABASE_URL:-}" ]]; then \
		THREADLINE_DATABASE_URL="$$(deploy/pg.sh start)"; \
	fi; \
	export THREADLINE_DATABASE_URL; \
	export THREADLINE_BUILTIN_DELAY="$${THREADLINE_BUILTIN_DELAY:-$(RUN_BUILTIN_DELAY)}"; \
	: "---- FRONTEND: start the web app here ----"; \
	echo "threadline: serving with database $$THREADLINE_DATABASE_URL" >&2; \
	exec $(BIN) serve

# Every test: vet, Go tests against the project's own Postgres, then the
# frontend's tests.
test: test-go test-frontend

test-go:
	@if [[ -z "$${THREADLINE_TEST_DATABASE_URL:-}" ]]; then \
		THREADLINE_TEST_DATABASE_URL="$$(deploy/pg.sh start)"; \
	fi; \
	export THREADLINE_TEST_DATABASE_URL; \
	set -x; \
	$(GO) vet ./...; \
	$(GO) test -count=1 $(GOTESTFLAGS) ./...

# ---- FRONTEND TESTS: add the frontend's install + test commands here --------
test-frontend:
	@: "---- FRONTEND TESTS go here ----"

bench: build
	@if [[ -z "$${THREADLINE_DATABASE_URL:-}" ]]; then \
		THREADLINE_DATABASE_URL="$$(deploy/pg.sh start)"; \
	fi; \
	export THREADLINE_DATABASE_URL; \
	$(BIN) bench peer

pg-start:
	@deploy/pg.sh start

pg-stop:
	@deploy/pg.sh stop
