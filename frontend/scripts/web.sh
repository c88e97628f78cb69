#!/usr/bin/env bash
# scripts/web.sh — the web app for `make run`: installs (npm ci) when
# node_modules is missing or older than package-lock.json, builds when there
# is no build or a source is newer than it, then runs `next start` in the
# foreground (exec: its PID is this script's).
#
#   THREADLINE_API_URL  the service (default: http://$THREADLINE_ADDR, else
#                       http://127.0.0.1:8080)
#   PORT                the web app's port (default 3000)
#   WEB_HOST            the address to listen on (default 127.0.0.1)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ -z "${THREADLINE_API_URL:-}" ]]; then
	addr="${THREADLINE_ADDR:-127.0.0.1:8080}"
	[[ $addr == :* ]] && addr="127.0.0.1$addr"
	addr="${addr/#0.0.0.0:/127.0.0.1:}"
	export THREADLINE_API_URL="http://$addr"
fi
export NEXT_TELEMETRY_DISABLED=1

if [[ ! -d node_modules/next || ! -f node_modules/.package-lock.json ]] ||
	[[ package-lock.json -nt node_modules/.package-lock.json ]]; then
	echo "web.sh: npm ci" >&2
	npm ci --no-audit --no-fund >&2
fi
if [[ ! -f .next/BUILD_ID ]] ||
	[[ -n "$(find app components lib next.config.ts tsconfig.json package-lock.json -newer .next/BUILD_ID -print -quit)" ]]; then
	echo "web.sh: next build" >&2
	npm run build >&2
fi
echo "web.sh: web app at http://${WEB_HOST:-127.0.0.1}:${PORT:-3000} (service: $THREADLINE_API_URL)" >&2
exec node node_modules/next/dist/bin/next start -p "${PORT:-3000}" -H "${WEB_HOST:-127.0.0.1}"
