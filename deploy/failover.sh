#!/usr/bin/env bash
# deploy/failover.sh — Postgres with a standby and automatic failover, from
# Debian's packages (pg_auto_failover: postgresql-<v>-auto-failover), on one
# machine over loopback: a monitor and two data nodes with synchronous
# replication. For trying failover and for its fault tests; a production
# layout puts each node on its own machine (docs/operations.md, "Failover").
#
#   deploy/failover.sh start       install pg_auto_failover if needed, create and
#                                  start the monitor and both nodes, wait until one
#                                  is primary and the other a synchronous
#                                  secondary; prints the service's multi-host URL
#   deploy/failover.sh url         print that URL
#   deploy/failover.sh state       the monitor's view of the nodes
#   deploy/failover.sh primary     print the name of the current primary (node1, node2)
#   deploy/failover.sh kill NODE   kill -9 every process of that node (its keeper
#                                  and its Postgres), as if its machine died
#   deploy/failover.sh revive NODE start a killed node again; it rejoins as a standby
#   deploy/failover.sh wait-sync   wait until a secondary is in sync again
#   deploy/failover.sh stop        stop everything (data stays)
#   deploy/failover.sh destroy     stop and remove the data
#
# Everything lives in $THREADLINE_FAILOVER_DIR (default <repo>/.pgfailover,
# git-ignored); the monitor listens on 127.0.0.1:$THREADLINE_FAILOVER_PORT
# (default 54360) and the nodes on the next two ports. Run as root, the
# processes run as the postgres OS user; a directory above the data that
# this user cannot enter gets o+x (traverse only), and the script says so.
# Only URLs and names go to stdout; progress goes to stderr.
#
# The monitor's health checks are set for a failover in a few seconds when
# a node's machine dies (THREADLINE_FAILOVER_FAST=0 keeps pg_auto_failover's
# defaults, about 30 s): fit for one machine, where a "network partition"
# cannot happen; see docs/operations.md before copying them.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
BASE="${THREADLINE_FAILOVER_DIR:-$REPO/.pgfailover}"
[[ $BASE == /* ]] || BASE="$PWD/$BASE"
BASE="${BASE%/}"
PORT0="${THREADLINE_FAILOVER_PORT:-54360}"
FAST="${THREADLINE_FAILOVER_FAST:-1}"
LIBDIR="${THREADLINE_PG_LIBDIR:-/usr/lib/postgresql}"
DB=threadline
LOCK="$BASE/.lock"

say() { echo "failover.sh: $*" >&2; }
die() {
	say "error: $*"
	exit 1
}

[[ $PORT0 =~ ^[0-9]+$ ]] || die "THREADLINE_FAILOVER_PORT=$PORT0 is not a port number"

node_port() { # node_port monitor|node1|node2
	case $1 in
	monitor) echo "$PORT0" ;;
	node1) echo $((PORT0 + 1)) ;;
	node2) echo $((PORT0 + 2)) ;;
	*) die "unknown node $1 (monitor, node1, node2)" ;;
	esac
}

# pgversion prints the newest installed PostgreSQL major version.
pgversion() {
	local v="" f
	for f in "$LIBDIR"/*/bin/pg_ctl; do
		[[ -x $f ]] && v="$(basename "$(dirname "$(dirname "$f")")")"
	done
	echo "$v"
}

install() {
	local v
	v="$(pgversion)"
	if [[ -z $v ]]; then
		[[ $EUID -eq 0 ]] || die "PostgreSQL is not installed; run: apt-get install postgresql"
		say "installing PostgreSQL"
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql >&2
		v="$(pgversion)"
	fi
	if ! command -v pg_autoctl >/dev/null || [[ ! -f $LIBDIR/$v/lib/pgautofailover.so ]]; then
		[[ $EUID -eq 0 ]] || die "pg_auto_failover is not installed; run: apt-get install postgresql-$v-auto-failover"
		say "installing postgresql-$v-auto-failover"
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "postgresql-$v-auto-failover" >&2 || {
			DEBIAN_FRONTEND=noninteractive apt-get update >&2
			DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "postgresql-$v-auto-failover" >&2
		} || die "apt-get install postgresql-$v-auto-failover failed"
	fi
	echo "$v"
}

# as_pg runs a command as the postgres OS user with pg_autoctl's
# directories under BASE, from BASE, without the lock descriptor.
as_pg() {
	local env=(XDG_CONFIG_HOME="$BASE/xdg/config" XDG_DATA_HOME="$BASE/xdg/data"
		XDG_RUNTIME_DIR="$BASE/xdg/run" PATH="$LIBDIR/$PGV/bin:$PATH" PG_CONFIG="$LIBDIR/$PGV/bin/pg_config")
	if [[ $EUID -eq 0 ]]; then
		(cd "$BASE" && runuser -u postgres -- env "${env[@]}" "$@") 9>&-
	else
		(cd "$BASE" && env "${env[@]}" "$@") 9>&-
	fi
}

# shellcheck source=deploy/reachable.sh
. "$(dirname "${BASH_SOURCE[0]}")/reachable.sh"

lock() {
	mkdir -p "$BASE"
	exec 9>>"$LOCK"
	flock -w 600 9 || die "another deploy/failover.sh holds $LOCK"
}

monitor_url() { echo "postgres://autoctl_node@127.0.0.1:$(node_port monitor)/pg_auto_failover?sslmode=disable"; }
admin() { "$LIBDIR/$PGV/bin/psql" -X -q -At "postgres://postgres@127.0.0.1:$(node_port monitor)/pg_auto_failover?sslmode=disable&connect_timeout=2" "$@"; }

url() {
	echo "postgres://postgres@127.0.0.1:$(node_port node1),127.0.0.1:$(node_port node2)/$DB?sslmode=disable&target_session_attrs=read-write&connect_timeout=2"
}

# running NODE: whether that node's pg_autoctl runs (its process group).
running() {
	local f="$BASE/$1.pgid"
	[[ -f $f ]] && kill -0 -- "-$(<"$f")" 2>/dev/null
}

# launch NODE ARGS...: start pg_autoctl in a session of its own, so that
# kill can end the node's every process at once.
launch() {
	local node=$1
	shift
	as_pg mkdir -p "$BASE/xdg/run"
	# The background shell must not hold the lock's descriptor or the
	# caller's output (a caller reading it to its end would wait for the
	# node's death), and the session starts above runuser, which would pass on a signal sent to
	# the caller's process group (a test runner's timeout).
	local env=(XDG_CONFIG_HOME="$BASE/xdg/config" XDG_DATA_HOME="$BASE/xdg/data"
		XDG_RUNTIME_DIR="$BASE/xdg/run" PATH="$LIBDIR/$PGV/bin:$PATH" PG_CONFIG="$LIBDIR/$PGV/bin/pg_config")
	local run=(env "${env[@]}")
	[[ $EUID -eq 0 ]] && run=(runuser -u postgres -- env "${env[@]}")
	rm -f "$BASE/$node.pgid"
	(
		cd "$BASE" || exit 1
		exec setsid "${run[@]}" bash -c 'read -r _ _ _ _ g _ < /proc/$$/stat; echo "$g" > "$0"; log=$1; shift; exec "$@" >>"$log" 2>&1' \
			"$BASE/$node.pgid" "$BASE/$node.log" "$@"
	) 9>&- </dev/null >>"$BASE/$node.log" 2>&1 &
	local i
	for ((i = 0; i < 50; i++)); do
		[[ -s $BASE/$node.pgid ]] && return 0
		sleep 0.1
	done
	die "pg_autoctl for $node did not start"
}

start_monitor() {
	running monitor && return 0
	if [[ ! -f $BASE/monitor/PG_VERSION ]]; then
		say "creating the monitor on 127.0.0.1:$(node_port monitor)"
		as_pg pg_autoctl create monitor --pgdata "$BASE/monitor" --pgport "$(node_port monitor)" \
			--hostname 127.0.0.1 --auth trust --no-ssl >>"$BASE/monitor.log" 2>&1 || die "pg_autoctl create monitor failed; see $BASE/monitor.log"
	fi
	(cd "$BASE" && launch monitor pg_autoctl run --pgdata "$BASE/monitor")
	local i
	for ((i = 0; i < 120; i++)); do
		admin -c 'select 1' >/dev/null 2>&1 && break
		sleep 0.5
	done
	admin -c 'select 1' >/dev/null || die "the monitor did not start; see $BASE/monitor.log"
	if [[ $FAST == 1 ]]; then
		local kv
		for kv in health_check_period=1000 health_check_timeout=1000 health_check_max_retries=1 \
			health_check_retry_delay=500 node_considered_unhealthy_timeout=2000 primary_demote_timeout=3000; do
			admin -c "ALTER SYSTEM SET pgautofailover.${kv%%=*} = ${kv#*=}"
		done
		admin -c 'SELECT pg_reload_conf()' >/dev/null
	fi
}

start_node() {
	local node=$1
	running "$node" && return 0
	if [[ -f $BASE/$node/PG_VERSION ]]; then
		launch "$node" pg_autoctl run --pgdata "$BASE/$node"
	else
		say "creating $node on 127.0.0.1:$(node_port "$node")"
		launch "$node" pg_autoctl create postgres --pgdata "$BASE/$node" --pgport "$(node_port "$node")" \
			--hostname 127.0.0.1 --name "$node" --auth trust --no-ssl --monitor "$(monitor_url)" --dbname "$DB" --run
	fi
}

# nodes prints name|reported state|assigned state, one node a line.
nodes() { admin -F '|' -c "SELECT nodename, reportedstate, goalstate FROM pgautofailover.node ORDER BY nodeid" 2>/dev/null; }

primary() { nodes | awk -F'|' '$2 == "primary" && $3 == "primary" {print $1}'; }

# wait_sync waits until one node is primary and the other secondary,
# nudging the base backup of a new standby: pg_basebackup waits for a
# spread checkpoint, which a CHECKPOINT on the primary ends at once.
wait_sync() {
	local i p
	for ((i = 0; i < 360; i++)); do
		if [[ $(nodes | awk -F'|' '($2 == "primary" || $2 == "secondary") && $2 == $3' | wc -l) == 2 ]]; then
			return 0
		fi
		p="$(nodes | awk -F'|' '$2 == "wait_primary" || $2 == "primary" {print $1}' | head -1)"
		if [[ -n $p ]] && ((i % 4 == 3)); then
			"$LIBDIR/$PGV/bin/psql" -X -q "postgres://postgres@127.0.0.1:$(node_port "$p")/postgres?sslmode=disable&connect_timeout=2" -c CHECKPOINT >/dev/null 2>&1 || true
		fi
		sleep 0.5
	done
	nodes >&2 || true
	die "the nodes did not reach primary + secondary in 3 minutes; see $BASE/*.log"
}

cmd_start() {
	PGV="$(install)"
	lock
	if [[ $EUID -eq 0 ]]; then
		getent passwd postgres >/dev/null || die "no postgres OS user"
		chown postgres:postgres "$BASE"
		make_reachable
	fi
	as_pg touch "$BASE/monitor.log" "$BASE/node1.log" "$BASE/node2.log"
	start_monitor
	start_node node1
	local i
	for ((i = 0; i < 240; i++)); do
		[[ -n $(nodes | awk -F'|' '$2 == "single" || $2 == "wait_primary" || $2 == "primary"') ]] && break
		sleep 0.5
	done
	start_node node2
	wait_sync
	say "primary: $(primary); $(url)"
	url
}

cmd_kill() {
	local node=$1
	node_port "$node" >/dev/null
	[[ -f $BASE/$node.pgid ]] || die "$node was never started"
	kill -9 -- "-$(<"$BASE/$node.pgid")" 2>/dev/null || true
	# Postgres children notice their postmaster's death and exit; wait for
	# the port to close so that nothing of the node answers any more.
	local i
	for ((i = 0; i < 100; i++)); do
		"$LIBDIR/$PGV/bin/pg_isready" -q -h 127.0.0.1 -p "$(node_port "$node")" -t 1 || return 0
		sleep 0.1
	done
	die "$node still answers after kill -9"
}

cmd_stop() {
	local node f
	for node in node2 node1 monitor; do
		f="$BASE/$node.pgid"
		running "$node" || continue
		kill -TERM -- "-$(<"$f")" 2>/dev/null || true
	done
	for node in node2 node1 monitor; do
		local i
		for ((i = 0; i < 100; i++)); do
			running "$node" || break
			sleep 0.2
		done
		running "$node" && kill -9 -- "-$(<"$BASE/$node.pgid")" 2>/dev/null || true
	done
	return 0
}

PGV="$(pgversion)"
case "${1:-}" in
start) cmd_start ;;
url) url ;;
state) nodes ;;
primary) primary ;;
kill) cmd_kill "${2:?usage: failover.sh kill node1|node2|monitor}" ;;
revive)
	lock
	start_node "${2:?usage: failover.sh revive node1|node2}"
	;;
wait-sync) wait_sync ;;
stop) cmd_stop ;;
destroy)
	cmd_stop
	rm -rf "$BASE"
	;;
*)
	sed -n '2,32p' "${BASH_SOURCE[0]}" >&2
	exit 2
	;;
esac
