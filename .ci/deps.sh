#!/bin/sh
# Installs the Debian packages named as arguments that are missing. Root installs them with
# apt-get; anyone else is told the exact command to run.
missing=""
for p in "$@"; do
	# nodejs from other sources (e.g. NodeSource) bundles npm and conflicts with Debian's package
	if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "llmbox: missing Debian packages:$missing" >&2
	echo "llmbox: run as root: apt-get install -y$missing" >&2
	exit 1
fi
echo "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null || { echo "apt-get update failed" >&2; exit 1; }
apt-get install -y -qq --no-install-recommends $missing >/dev/null || { echo "apt-get install failed:$missing" >&2; exit 1; }
