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
# Where `make run` serves the web app.
WEB_HOST ?= 127.0.0.1
WEB_PORT ?= 3000

.PHONY: build run test test-go test-frontend bench bench-load bench-go pg-start pg-stop

build:
	$(GO) build -o $(BIN) ./cmd/threadline

# Postgres (unless THREADLINE_DATABASE_URL is set already) + service + web app.
# The web app (frontend/scripts/web.sh: npm ci and next build when needed, then
# next start on $(WEB_PORT)) runs in the background and talks to the service
# at THREADLINE_ADDR; it runs in a process group of its own (setsid), which is
# stopped when the service exits, and the service is stopped when the web app
# exits (Ctrl-C stops both).
run: build
	@if [[ -z "$${THREADLINE_DATABASE_URL:-}" ]]; then \
		THREADLINE_DATABASE_URL="$$(deploy/pg.sh start)"; \
	fi; \
	export THREADLINE_DATABASE_URL; \
	export THREADLINE_BUILTIN_DELAY="$${THREADLINE_BUILTIN_DELAY:-$(RUN_BUILTIN_DELAY)}"; \
	addr="$${THREADLINE_ADDR:-127.0.0.1:8080}"; \
	api="$$addr"; [[ $$api == :* ]] && api="127.0.0.1$$api"; api="$${api/#0.0.0.0:/127.0.0.1:}"; \
	web_pid=; serve_pid=; \
	stop() { \
		trap - EXIT INT TERM HUP; \
		if [[ -n $$serve_pid ]]; then kill -TERM "$$serve_pid" 2>/dev/null || :; fi; \
		if [[ -n $$web_pid ]]; then kill -TERM -- "-$$web_pid" 2>/dev/null || :; fi; \
		wait || :; \
		echo "threadline: stopped the service and the web app" >&2; \
	}; \
	trap stop EXIT; trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 129' HUP; \
	THREADLINE_API_URL="http://$$api" PORT="$(WEB_PORT)" WEB_HOST="$(WEB_HOST)" \
		setsid frontend/scripts/web.sh & web_pid=$$!; \
	echo "threadline: serving with database $$THREADLINE_DATABASE_URL" >&2; \
	echo "threadline: API     http://$$api/api/v1" >&2; \
	echo "threadline: web app http://$(WEB_HOST):$(WEB_PORT)   <- open this (ready after npm ci/next build when they are needed)" >&2; \
	$(BIN) serve & serve_pid=$$!; \
	status=0; wait -n "$$serve_pid" "$$web_pid" || status=$$?; \
	if ! kill -0 "$$web_pid" 2>/dev/null; then \
		echo "threadline: the web app exited (is port $(WEB_PORT) taken? set WEB_PORT); stopping the service" >&2; \
		[[ $$status -ne 0 ]] || status=1; \
	fi; \
	exit "$$status"

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

# The frontend's tests: npm ci (from package-lock.json) when node_modules is
# missing or older than the lockfile, unit tests, then the browser tests
# (frontend/e2e/run.mjs: its own service, database and next build, in
# Debian's Chromium, which scripts/ensure-chromium.sh installs as root).
# E2E_REPEAT=n and E2E_FILTER=name pass through to the browser tests.
test-frontend:
	@command -v npm >/dev/null || { echo "test-frontend: node/npm not found: install Node >= 20.9 with npm (.ci/run does)" >&2; exit 1; }
	@node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 9) ? 0 : 1)' || \
		{ echo "test-frontend: Node $$(node --version) is too old: Next 16 needs >= 20.9" >&2; exit 1; }
	@cd frontend && \
	if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then \
		echo "test-frontend: npm ci" >&2; \
		npm ci --no-audit --no-fund; \
	fi
	cd frontend && npm test
	@frontend/scripts/ensure-chromium.sh
	cd frontend && npm run test:e2e

bench: build
	@if [[ -z "$${THREADLINE_DATABASE_URL:-}" ]]; then \
		THREADLINE_DATABASE_URL="$$(deploy/pg.sh start)"; \
	fi; \
	export THREADLINE_DATABASE_URL; \
	$(BIN) bench peer

# K = 100, 500, 1000 concurrent streams over loopback HTTP (BENCHMARKS.md).
bench-load: build
	@if [[ -z "$${THREADLINE_DATABASE_URL:-}" ]]; then \
		THREADLINE_DATABASE_URL="$$(deploy/pg.sh start)"; \
	fi; \
	export THREADLINE_DATABASE_URL; \
	$(BIN) bench load

# The hot-path benchmarks, 6 runs each for benchstat.
bench-go:
	@if [[ -z "$${THREADLINE_TEST_DATABASE_URL:-}" ]]; then \
		THREADLINE_TEST_DATABASE_URL="$$(deploy/pg.sh start)"; \
	fi; \
	export THREADLINE_TEST_DATABASE_URL; \
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./checkpoint/ ./store/ ./thread/

pg-start:
	@deploy/pg.sh start

pg-stop:
	@deploy/pg.sh stop
