#!/bin/bash
# make test-fresh: the README's commands, from a clean clone of HEAD, inside a fresh Debian 12 root.
#
# CI runs on a machine where earlier work already installed packages, so a green `make test` there
# does not prove that the README's two commands set up a new machine. This does: a
# `debootstrap --variant=minbase` tree (nothing but Debian's required packages, like a new
# machine's base system) is entered through a new mount namespace and pivot_root (a chroot could
# not create the user namespaces the jail needs), and .ci/fresh-inside.sh runs every shell block
# of the README there, in order: `make demo`, `make test`, then the others.
#
# The base tree is cached in $LLMBOX_FRESH_CACHE (default /var/cache/llmbox/fresh-root) and never
# written: the run's changes go to an overlay upper directory that is deleted afterwards, so
# nothing installed by one run is seen by the next. Needs root. Prints one closing line,
# "fresh root: N passed, N failed, N skipped" (the specs' counts inside the fresh root), and
# writes the counts to $LLMBOX_FRESH_COUNTS and the failing specs to $LLMBOX_FRESH_FAILURES when set.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)

if [ "$(id -u)" != 0 ]; then
	echo "make test-fresh: needs root (debootstrap, mount namespaces, pivot_root)" >&2
	exit 2
fi
./.ci/deps.sh debootstrap git

suite=bookworm
cache=${LLMBOX_FRESH_CACHE:-/var/cache/llmbox/fresh-root}
# The host's own Debian mirror, where it names one: a machine that reaches only its mirror.
mirror=${LLMBOX_FRESH_MIRROR:-$(.ci/mirror.sh "$suite")}

base=$cache/$suite-minbase
# Rebuilt after a month, so the base system does not drift far from what a new machine gets.
if [ -e "$base/.complete" ] && [ -z "$(find "$base/.complete" -mtime +30)" ]; then
	echo "fresh root: cached base tree $base ($(cat "$base/.complete"))"
else
	echo "fresh root: debootstrap --variant=minbase $suite from $mirror"
	rm -rf "$base" "$base.new"
	mkdir -p "$cache"
	started=$(date +%s)
	if ! debootstrap --variant=minbase "$suite" "$base.new" "$mirror" >"$cache/debootstrap.log" 2>&1; then
		tail -n 20 "$cache/debootstrap.log" >&2
		echo "fresh root: debootstrap failed (log: $cache/debootstrap.log)" >&2
		exit 1
	fi
	rm -rf "$base.new"/var/cache/apt/archives/*.deb
	date -u +"made %Y-%m-%d %H:%M UTC from $mirror" >"$base.new/.complete"
	mv "$base.new" "$base"
	echo "fresh root: base tree made in $(($(date +%s) - started)) s"
fi

# A private work directory on disk (the toolchains take a few GB: not a tmpfs /tmp).
work=$(mktemp -d "${LLMBOX_FRESH_WORK:-/var/tmp}/llmbox-fresh.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/upper" "$work/ovl" "$work/root"
# What a new user would have: a clean clone of the committed tree (not the working tree).
git clone -q --no-hardlinks "$top" "$work/clone"
echo "fresh root: testing $(git -C "$work/clone" log -1 --format='%h %s')"

# The environment is emptied, but for what this machine's own set-up gives every shell: where
# its CA bundle is and its proxies (see the CA certificates below).
machine_env=()
for v in NODE_EXTRA_CA_CERTS SSL_CERT_FILE SSL_CERT_DIR CURL_CA_BUNDLE REQUESTS_CA_BUNDLE PIP_CERT \
	GIT_SSL_CAINFO http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
	[ -n "${!v:-}" ] && machine_env+=("$v=${!v}")
done

# Everything below happens in a new mount namespace (and uts, for the hostname): the mounts go
# away with it. The pid namespace is the host's: llmbox names its cgroups after its pids.
status=0
unshare --mount --uts --propagation private /bin/bash -euo pipefail -c '
	work=$1
	r=$work/root
	mount -t overlay overlay -o "lowerdir=$2,upperdir=$work/upper,workdir=$work/ovl" "$r"
	# A new machine: its own /proc, the kernel'"'"'s /sys (cgroups included) and devices, a fresh
	# /dev/shm and /run, and a resolver configuration.
	mount -t proc -o nosuid,nodev,noexec proc "$r/proc"
	mount --rbind /sys "$r/sys"
	mount --rbind /dev "$r/dev"
	mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$r/dev/shm"
	mount -t tmpfs -o nosuid,nodev,mode=755 tmpfs "$r/run"
	cat /etc/resolv.conf >"$r/etc/resolv.conf"
	# The local CA certificates this machine trusts (a TLS-inspecting egress proxy, a company
	# CA): every machine here has them, and Debian'"'"'s ca-certificates adds them to the bundle
	# when `make test` installs it. Without them npm cannot reach its registry.
	if [ -d /usr/local/share/ca-certificates ]; then
		mkdir -p "$r/usr/local/share/ca-certificates"
		cp -rL /usr/local/share/ca-certificates/. "$r/usr/local/share/ca-certificates/"
	fi
	hostname llmbox-fresh
	echo llmbox-fresh >"$r/etc/hostname"
	mv "$work/clone" "$r/root/llmbox"
	mkdir "$r/.old-root"
	cd "$r"
	pivot_root . .old-root
	cd /
	umount -l /.old-root
	rmdir /.old-root
	exec /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash TERM=dumb \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin CI="${CI:-}" \
		"${@:3}" /bin/bash /root/llmbox/.ci/fresh-inside.sh
' fresh "$work" "$base" "${machine_env[@]}" || status=$?

counts=$work/upper/root/fresh-counts
if [ -s "$counts" ]; then
	read -r p f s <"$counts"
else
	p=0 f=1 s=0
	echo "fresh root: the specs did not finish"
fi
[ -n "${LLMBOX_FRESH_COUNTS:-}" ] && echo "$p $f $s" >"$LLMBOX_FRESH_COUNTS"
[ -s "$work/upper/root/fresh-report" ] && cat "$work/upper/root/fresh-report"
if [ -n "${LLMBOX_FRESH_FAILURES:-}" ]; then
	grep -E '^ +(\[nobody\] )?(FAILED|ERROR) ' "$work/upper/root/fresh-report" >"$LLMBOX_FRESH_FAILURES" || true
fi
echo "fresh root: $p passed, $f failed, $s skipped"
exit "$status"
