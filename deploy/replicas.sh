#!/usr/bin/env bash
# deploy/replicas.sh — N Threadline replicas on one Postgres behind HAProxy,
# locally, for `make run-replicas`: the project's Postgres (unless
# THREADLINE_DATABASE_URL names one), N processes of `bin/threadline serve`
# on consecutive ports, and HAProxy (deploy/haproxy.cfg) in front of them.
# Ctrl-C (or any process exiting) stops them all.
#
#   THREADLINE_REPLICAS        how many replicas (2)
#   THREADLINE_REPLICA_PORT    the first replica's port (8081; the next ones follow)
#   THREADLINE_LB_ADDR         where the balancer listens (127.0.0.1:8080)
#   THREADLINE_HAPROXY_INSTALL 0: never install HAProxy (exit 4 when it is missing)
# Every other THREADLINE_* setting passes through to each replica.
#
# HAProxy comes from Debian (apt-get install haproxy, as root or with sudo)
# when it is missing; only this script installs it, never `go test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

n="${THREADLINE_REPLICAS:-2}"
port="${THREADLINE_REPLICA_PORT:-8081}"
export THREADLINE_LB_ADDR="${THREADLINE_LB_ADDR:-127.0.0.1:8080}"
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "replicas.sh: THREADLINE_REPLICAS=$n is not a count" >&2; exit 2; }
[[ $port =~ ^[0-9]+$ ]] || { echo "replicas.sh: THREADLINE_REPLICA_PORT=$port is not a port" >&2; exit 2; }

say() { echo "replicas.sh: $*" >&2; }

if ! command -v haproxy >/dev/null; then
	if [[ ${THREADLINE_HAPROXY_INSTALL:-1} == 0 ]]; then
		say "HAProxy is not installed (THREADLINE_HAPROXY_INSTALL=0): apt-get install haproxy"
		exit 4
	fi
	as_root=()
	if [[ $EUID -ne 0 ]]; then
		command -v sudo >/dev/null || { say "HAProxy is missing and installing it needs root: apt-get install haproxy"; exit 4; }
		as_root=(sudo)
	fi
	say "installing HAProxy with apt-get"
	"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update >&2
	"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends haproxy >&2
fi
[[ -x bin/threadline ]] || go build -o bin/ ./cmd/threadline

if [[ -z ${THREADLINE_DATABASE_URL:-} ]]; then
	THREADLINE_DATABASE_URL="$(deploy/pg.sh start)"
fi
export THREADLINE_DATABASE_URL
# Migrate once, before the replicas race to do it.
bin/threadline migrate up >&2

run="$(mktemp -d "${TMPDIR:-/tmp}/threadline-replicas.XXXXXX")"
cfg="$run/haproxy.cfg"
cp deploy/haproxy.cfg "$cfg"
pids=()
stop() {
	trap - EXIT INT TERM HUP
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || :; done
	wait || :
	rm -rf "$run"
	say "stopped the replicas and the balancer"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

for ((i = 0; i < n; i++)); do
	addr="127.0.0.1:$((port + i))"
	echo "    server r$i $addr check" >>"$cfg"
	THREADLINE_ADDR="$addr" THREADLINE_TRUSTED_PROXIES="${THREADLINE_TRUSTED_PROXIES:-127.0.0.1/32}" \
		bin/threadline serve 2> >(sed -u "s/^/r$i /" >&2) &
	pids+=($!)
	say "replica r$i on http://$addr (pid $!)"
done
haproxy -W -db -f "$cfg" &
pids+=($!)
say "balancer on http://$THREADLINE_LB_ADDR (HAProxy, health check /readyz; config $cfg)"
say "API: http://$THREADLINE_LB_ADDR/api/v1"
status=0
wait -n "${pids[@]}" || status=$?
say "a process exited (status $status); stopping the rest"
exit "$status"
