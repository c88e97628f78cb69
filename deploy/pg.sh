#!/usr/bin/env bash
# deploy/pg.sh — the project's own PostgreSQL cluster for development and tests.
#
#   deploy/pg.sh start        install PostgreSQL if needed, create and start the
#                             cluster; prints the connection URL on stdout
#   deploy/pg.sh start --no-install
#                             the same, but never install: without PostgreSQL
#                             it fails with exit status 4 (also when
#                             THREADLINE_PG_INSTALL=0; go test uses this)
#   deploy/pg.sh stop         stop the cluster
#   deploy/pg.sh status       say whether it runs (exit 0 if it does)
#   deploy/pg.sh url          print the connection URL
#   deploy/pg.sh psql [args]  psql as the superuser, database postgres by default
#
# The cluster lives in $THREADLINE_PGDATA (default <repo>/.pgdata, git-ignored):
#   data/          the data directory (initdb)
#   sock/          the only unix socket directory
#   postgres.log   the server log
# It listens on that socket and on 127.0.0.1:$THREADLINE_PGPORT (default 54329),
# with trust authentication for user postgres. Run as root, the server runs as
# the postgres OS user; if a directory above the cluster is closed to other
# users, it adds o+x (traverse only) to that directory so the postgres user
# can reach it, and says so on stderr (set THREADLINE_PGDATA to a reachable
# place to avoid that). Nothing else outside the checkout changes. Only the
# URL goes to stdout; progress goes to stderr.
# Server binaries are looked for in $THREADLINE_PG_LIBDIR/<version>/bin (default
# /usr/lib/postgresql, Debian's layout).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
BASE="${THREADLINE_PGDATA:-$REPO/.pgdata}"
[[ $BASE == /* ]] || BASE="$PWD/$BASE"
BASE="${BASE%/}"
WANT_PORT="${THREADLINE_PGPORT:-54329}"
LIBDIR="${THREADLINE_PG_LIBDIR:-/usr/lib/postgresql}"
INSTALL="${THREADLINE_PG_INSTALL:-1}"
DATA="$BASE/data"
SOCK="$BASE/sock"
LOG="$BASE/postgres.log"
LOCK="$BASE/.lock"

say() { echo "pg.sh: $*" >&2; }
die() {
	say "error: $*"
	exit 1
}

[[ $WANT_PORT =~ ^[0-9]+$ ]] || die "THREADLINE_PGPORT=$WANT_PORT is not a port number"

# as_owner runs a command as the cluster's OS user, from a directory that user
# can enter, without the lock descriptor (a server started from here must not
# inherit it, or it would hold the lock for its whole life).
as_owner() {
	if [[ $EUID -eq 0 ]]; then
		(cd "$BASE" && runuser -u postgres -- "$@") 9>&-
	else
		(cd "$BASE" && "$@") 9>&-
	fi
}

as_root() {
	if [[ $EUID -eq 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		die "PostgreSQL is not installed and installing it needs root: run 'apt-get install postgresql' as root"
	fi
}

# bindir prints the server binaries' directory: the version the cluster was
# made with if it exists, else the newest installed; nothing if none is.
bindir() {
	if [[ -f $DATA/PG_VERSION ]]; then
		local v
		v="$(<"$DATA/PG_VERSION")"
		if [[ -x $LIBDIR/$v/bin/pg_ctl ]]; then
			echo "$LIBDIR/$v/bin"
		fi
		return 0
	fi
	local newest="" f
	for f in "$LIBDIR"/*/bin/pg_ctl; do
		[[ -x $f ]] && newest+="$f"$'\n'
	done
	newest="$(printf '%s' "$newest" | sort -V | tail -n 1)"
	[[ -n $newest ]] && dirname "$newest"
	return 0
}

install_postgres() {
	local pkg=postgresql
	if [[ -f $DATA/PG_VERSION ]]; then
		pkg="postgresql-$(<"$DATA/PG_VERSION")"
	fi
	say "PostgreSQL server binaries not found; installing $pkg with apt-get (takes a minute)"
	# The Debian package would create and start its own cluster on port 5432;
	# we only want the binaries. Honoured only if the file does not exist yet.
	if [[ ! -e /etc/postgresql-common/createcluster.conf ]]; then
		as_root mkdir -p /etc/postgresql-common
		echo 'create_main_cluster = false' | as_root tee /etc/postgresql-common/createcluster.conf >/dev/null
	fi
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update >&2 ||
		die "apt-get update failed"
	as_root env DEBIAN_FRONTEND=noninteractive UCF_FORCE_CONFFOLD=1 apt-get install -y \
		--no-install-recommends -o Dpkg::Options::=--force-confold "$pkg" >&2 ||
		die "apt-get install $pkg failed"
}

# shellcheck source=deploy/reachable.sh
. "$(dirname "${BASH_SOURCE[0]}")/reachable.sh"

is_initialized() { [[ -f $DATA/PG_VERSION ]]; }

is_running() {
	is_initialized || return 1
	local bin
	bin="$(bindir)"
	[[ -n $bin ]] || return 1
	as_owner "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

# port prints the running server's port (from postmaster.pid), else the wanted one.
port() {
	local p=""
	if [[ -r $DATA/postmaster.pid ]] && is_running; then
		p="$(sed -n 4p "$DATA/postmaster.pid" 2>/dev/null || true)"
	fi
	[[ $p =~ ^[0-9]+$ ]] || p="$WANT_PORT"
	echo "$p"
}

url() { echo "postgres://postgres@127.0.0.1:$(port)/postgres?sslmode=disable"; }

lock() {
	mkdir -p "$BASE"
	exec 9>>"$LOCK"
	if ! flock -w 600 9; then
		die "another deploy/pg.sh holds $LOCK for more than 10 minutes"
	fi
}

sql_quote() { printf "'%s'" "${1//\'/\'\'}"; }

write_config() {
	as_owner tee "$DATA/threadline.conf" >/dev/null <<EOF
# Written by deploy/pg.sh at every start: change the script, not this file.
listen_addresses = '127.0.0.1'
port = $WANT_PORT
unix_socket_directories = $(sql_quote "$SOCK")
unix_socket_permissions = 0777
max_connections = 300
shared_buffers = 256MB
# Durability stays on: it is what the benchmarks measure.
fsync = on
synchronous_commit = on
full_page_writes = on
max_wal_size = 2GB
timezone = 'UTC'
log_timezone = 'UTC'
log_line_prefix = '%m [%p] %q%u@%d '
EOF
	if ! grep -q "^include_if_exists = 'threadline.conf'" "$DATA/postgresql.conf"; then
		printf "\n# deploy/pg.sh settings\ninclude_if_exists = 'threadline.conf'\n" |
			as_owner tee -a "$DATA/postgresql.conf" >/dev/null
	fi
}

start() {
	local sockfile="$SOCK/.s.PGSQL.$WANT_PORT"
	if ((${#sockfile} > 107)); then
		die "socket path $sockfile is too long for a unix socket; set THREADLINE_PGDATA to a shorter folder"
	fi
	lock
	local bin
	bin="$(bindir)"
	if [[ -z $bin ]]; then
		if [[ $INSTALL == 0 ]]; then
			say "error: PostgreSQL is not installed (no $LIBDIR/*/bin/pg_ctl) and installing it was refused (--no-install or THREADLINE_PG_INSTALL=0)"
			exit 4
		fi
		install_postgres
		bin="$(bindir)"
		[[ -n $bin ]] || die "PostgreSQL server binaries still missing after apt-get install"
	fi
	if [[ $EUID -eq 0 ]]; then
		getent passwd postgres >/dev/null || die "no postgres OS user (is the postgresql package installed?)"
		chown postgres:postgres "$BASE"
		chmod 0755 "$BASE"
		make_reachable
	fi
	if ! is_initialized; then
		if [[ -d $DATA ]] && [[ -n $(ls -A "$DATA") ]]; then
			die "$DATA exists, is not empty and is not a cluster; remove it"
		fi
		say "creating cluster in $DATA ($("$bin/postgres" --version))"
		as_owner "$bin/initdb" -D "$DATA" -U postgres --auth=trust \
			--encoding=UTF8 --locale=C.UTF-8 --no-instructions >&2 ||
			die "initdb failed"
	fi
	if is_running; then
		say "already running on port $(port) ($DATA)"
		url
		return 0
	fi
	as_owner mkdir -p "$SOCK"
	as_owner touch "$LOG"
	write_config
	say "starting PostgreSQL on 127.0.0.1:$WANT_PORT and $SOCK (log: $LOG)"
	if ! as_owner "$bin/pg_ctl" -D "$DATA" -l "$LOG" -w -t 120 start >&2; then
		say "last lines of $LOG:"
		tail -n 20 "$LOG" >&2 || true
		die "PostgreSQL did not start (port $WANT_PORT taken? set THREADLINE_PGPORT)"
	fi
	local i
	for ((i = 0; i < 120; i++)); do
		if "$bin/pg_isready" -q -h "$SOCK" -p "$WANT_PORT" -U postgres -d postgres; then
			url
			return 0
		fi
		sleep 0.5
	done
	die "PostgreSQL started but is not accepting connections; see $LOG"
}

stop() {
	if ! is_initialized; then
		say "no cluster in $DATA"
		return 0
	fi
	lock
	if ! is_running; then
		say "not running"
		return 0
	fi
	as_owner "$(bindir)/pg_ctl" -D "$DATA" -m fast -w -t 120 stop >&2
}

status() {
	if is_running; then
		say "running on port $(port) ($DATA)"
		return 0
	fi
	say "not running ($DATA)"
	return 3
}

run_psql() {
	local bin psql
	bin="$(bindir)"
	psql="$bin/psql"
	[[ -n $bin && -x $psql ]] || psql="$(command -v psql || true)"
	[[ -n $psql ]] || die "psql not found; run deploy/pg.sh start first"
	is_running || die "not running; run deploy/pg.sh start first"
	PGHOST="$SOCK" PGPORT="$(port)" PGUSER=postgres PGDATABASE=postgres exec "$psql" "$@"
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
start)
	case "${1:-}" in
	"") ;;
	--no-install) INSTALL=0 ;;
	*) die "start: unknown option $1 (only --no-install)" ;;
	esac
	start
	;;
stop) stop ;;
status) status ;;
url) url ;;
psql) run_psql "$@" ;;
*)
	sed -n '2,24s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
	;;
esac
