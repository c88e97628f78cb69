#!/usr/bin/env bash
# deploy/run.sh — the whole thing on one machine, for `make run`: the
# project's Postgres (unless THREADLINE_DATABASE_URL names one), the service
# (bin/threadline serve) and the web app (frontend/scripts/web.sh). The web
# app stays up when the service exits: the service is restarted with a
# backoff, and the app shows it unavailable meanwhile. Ctrl-C stops both.
#
#   THREADLINE_ADDR            the service's address (127.0.0.1:8080)
#   THREADLINE_BUILTIN_DELAY   per-token delay of the built-in model (30ms here)
#   THREADLINE_BUILTIN_MODE    what the built-in model answers (demo here)
#   WEB_HOST, WEB_PORT         where the web app listens (127.0.0.1:3000)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ -z "${THREADLINE_DATABASE_URL:-}" ]]; then
	THREADLINE_DATABASE_URL="$(deploy/pg.sh start)"
fi
export THREADLINE_DATABASE_URL
export THREADLINE_BUILTIN_DELAY="${THREADLINE_BUILTIN_DELAY:-30ms}"
export THREADLINE_BUILTIN_MODE="${THREADLINE_BUILTIN_MODE:-demo}"
web_host="${WEB_HOST:-127.0.0.1}" web_port="${WEB_PORT:-3000}"
api="${THREADLINE_ADDR:-127.0.0.1:8080}"
[[ $api == :* ]] && api="127.0.0.1$api"
api="${api/#0.0.0.0:/127.0.0.1:}"

say() { echo "threadline: $*" >&2; }

web_pid= serve_pid= stopping=
stop() {
	stopping=1
	trap - EXIT INT TERM HUP
	[[ -z $serve_pid ]] || kill -TERM "$serve_pid" 2>/dev/null || :
	[[ -z $web_pid ]] || kill -TERM -- "-$web_pid" 2>/dev/null || :
	wait || :
	say "stopped the service and the web app"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# The web app in a process group of its own, so that stopping it stops next.
THREADLINE_API_URL="http://$api" PORT="$web_port" WEB_HOST="$web_host" \
	setsid frontend/scripts/web.sh &
web_pid=$!
say "database $THREADLINE_DATABASE_URL"
say "API      http://$api/api/v1"
say "web app  http://$web_host:$web_port   <- open this (ready after npm ci/next build when they are needed)"

# The service, restarted when it exits; the web app's exit ends everything.
backoff=1
while :; do
	started=$SECONDS
	bin/threadline serve &
	serve_pid=$!
	status=0
	wait -n "$serve_pid" "$web_pid" || status=$?
	if ! kill -0 "$web_pid" 2>/dev/null; then
		say "the web app exited (is port $web_port taken? set WEB_PORT); stopping the service"
		exit 1
	fi
	[[ -z $stopping ]] || exit "$status"
	serve_pid=
	# A service that ran a while starts again at once; one that keeps failing
	# (a port taken, the database gone) waits longer each time, up to 30 s.
	(( SECONDS - started < 10 )) || backoff=1
	say "the service exited ($status); the web app stays up; restarting the service in ${backoff}s"
	sleep "$backoff"
	backoff=$(( backoff * 2 > 30 ? 30 : backoff * 2 ))
done
