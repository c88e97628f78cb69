#!/usr/bin/env bash
# scripts/ensure-chromium.sh — the browser for the e2e tests (make
# test-frontend): Debian's chromium package at /usr/bin/chromium (or
# $CHROMIUM_PATH). When it is missing, installs it with apt-get as root (or
# through passwordless sudo); otherwise fails saying what to run. Never
# downloads a browser any other way.
set -euo pipefail

chromium="${CHROMIUM_PATH:-/usr/bin/chromium}"
[[ -x $chromium ]] && exit 0

cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium fonts-liberation"
die() {
	echo "ensure-chromium: $chromium not found. The browser tests need Debian's Chromium: run (as root) '$cmd', or run .ci/run, or set CHROMIUM_PATH." >&2
	exit 1
}
[[ -n ${CHROMIUM_PATH:-} ]] && die # a path of one's own: not ours to install
command -v apt-get >/dev/null 2>&1 || die
if [[ $(id -u) -eq 0 ]]; then
	as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	as_root=(sudo -n)
else
	die
fi
echo "ensure-chromium: installing Debian's chromium with apt-get (takes a minute)" >&2
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update >&2 || die
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium fonts-liberation >&2 || die
[[ -x $chromium ]] || die
