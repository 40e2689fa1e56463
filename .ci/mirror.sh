#!/bin/sh
# Prints the Debian mirror this machine's apt uses (a machine may reach only its own mirror),
# else Debian's: what debootstrap is given by .ci/fresh-root.sh and the specs' Debian image
# (spec/support/debian_image.sh). $1: the suite (bookworm).
suite=${1:-bookworm}
mirror=$(sed -n -E 's/^URIs:[[:space:]]*(http[^[:space:]]*\/debian)\/?$/\1/p' \
	/etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
[ -n "$mirror" ] || mirror=$(sed -n -E 's/^deb[[:space:]]+(http[^[:space:]]*\/debian)\/?[[:space:]]+'"$suite"'[[:space:]].*/\1/p' \
	/etc/apt/sources.list 2>/dev/null | head -n 1)
echo "${mirror:-http://deb.debian.org/debian}"
