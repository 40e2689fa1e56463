#!/bin/bash
# Runs inside the fresh root made by .ci/fresh-root.sh, as root, with a clean environment, from a
# clean clone in /root/llmbox: every shell block of the README, in the README's order (the first is
# `make demo` and `make test`), each as a bash script that stops at its first failing command.
# `make test` runs spec/03-examples/readme_spec.lua, which checks the README's other blocks too.
# Leaves /root/fresh-counts ("passed failed skipped" of the specs) and /root/fresh-report.
set -uo pipefail
cd /root/llmbox
blocks=/root/readme-blocks
report=/root/fresh-report
mkdir -p "$blocks"
awk -v dir="$blocks" -f .ci/readme-blocks.awk README.md || exit 1
: >"$report"

installed() { dpkg-query -W -f='${Status}\n' | grep -c 'install ok installed'; }

status=0
for b in "$blocks"/*.sh; do
	[ -e "$b" ] || continue
	name=${b##*/}
	first=$(grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$b" | head -n 1)
	echo "== README block $name: $first"
	before=$(installed)
	start=$(date +%s)
	# PS4 stamps each command with the seconds since the block began (set inside: bash does not
	# take PS4 from the environment when it runs as root).
	bash -e -o pipefail -c 'PS4="+ [\${SECONDS}s] "; set -x; . "$0"' "$b" 2>&1 | tee "$b.log"
	rc=${PIPESTATUS[0]}
	took=$(($(date +%s) - start))
	after=$(installed)
	{
		echo "README block $name ($first ...): exit $rc in ${took} s; Debian packages $before -> $after"
		grep -E '^\+\+ \[[0-9]+s\] (command|make|luarocks|llmbox|LUA_PATH)' "$b.log" | sed 's/^/    /'
	} >>"$report"
	# which specs failed, as spec/run.sh lists them above its closing line
	grep -E '^(\[nobody\] )?(FAILED|ERROR) ' "$b.log" | sed 's/^/    /' >>"$report" || true
	# The specs' closing line, from `make test`.
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$b.log" | tail -n 1 || true)
	if [ -n "$line" ]; then
		echo "$line" | sed -E 's/^([0-9]+) passed, ([0-9]+) failed(, ([0-9]+) skipped)?.*/\1 \2 \4/' |
			awk '{ print $1, $2, ($3 == "" ? 0 : $3) }' >/root/fresh-counts
	fi
	if [ "$rc" != 0 ]; then
		status=1
		echo "README block $name failed: the blocks after it are not run" >>"$report"
		break
	fi
done
{
	echo "disk used by the fresh root after the README's commands: $(du -sxh / 2>/dev/null | cut -f1)"
	echo "node $(node --version 2>/dev/null || echo none), npm $(npm --version 2>/dev/null || echo none)"
} >>"$report"
exit "$status"
