# deploy/reachable.sh — sourced by deploy/pg.sh and deploy/failover.sh.
#
# make_reachable lets the postgres OS user traverse every directory above
# $BASE (run as root only): a directory closed to other users gets o+x
# (traverse only), and say (the caller's) names it.
make_reachable() {
	[[ $EUID -eq 0 ]] || return 0
	local d="" part
	local IFS=/
	for part in ${BASE#/}; do
		d="$d/$part"
		[[ -d $d ]] || break
		if ! runuser -u postgres -- test -x "$d" 2>/dev/null; then
			say "chmod o+x $d (so the postgres user can reach $BASE)"
			chmod o+x "$d"
		fi
	done
}
