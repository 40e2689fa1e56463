#!/bin/sh
# `spec/support/debian_image.sh OUT.tar`: the specs' own Debian image, built offline from
# Debian's packages (no registry) with `debootstrap --variant=minbase --include=python3-minimal
# bookworm`, as a root filesystem tar (numeric owners) at OUT.tar. Root only (debootstrap, which
# `make test` installs). Kept
# in $LLMBOX_SPEC_IMAGE_CACHE (default /var/cache/llmbox/spec-images) and rebuilt after a month,
# as the fresh root's base tree is; a new machine builds it once (about a minute).
set -eu
out=$1
cache=${LLMBOX_SPEC_IMAGE_CACHE:-/var/cache/llmbox/spec-images}
image=$cache/bookworm-python3.tar
if [ ! -s "$image" ] || [ -n "$(find "$image" -mtime +30)" ]; then
	top=$(cd "$(dirname "$0")/../.." && pwd)
	mkdir -p "$cache"
	tmp=$(mktemp -d "$cache/.build.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	mirror=$("$top/.ci/mirror.sh" bookworm)
	if ! debootstrap --variant=minbase --include=python3-minimal bookworm "$tmp/root" "$mirror" \
		>"$tmp/debootstrap.log" 2>&1; then
		tail -n 20 "$tmp/debootstrap.log" >&2
		echo "debian_image.sh: debootstrap from $mirror failed" >&2
		exit 1
	fi
	rm -rf "$tmp/root/var/cache/apt/archives/"*.deb "$tmp/root/var/lib/apt/lists/"*
	tar --numeric-owner -C "$tmp/root" -cf "$tmp/image.tar" .
	mv "$tmp/image.tar" "$image"
fi
cp "$image" "$out"
