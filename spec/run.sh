#!/bin/sh
# Runs every spec: all suites as the current user (root in CI), the conformance suite for the
# backends in $LLMBOX_CONFORMANCE_BACKENDS (default: bubblewrap; kubernetes: the cluster $KUBECONFIG
# names, else the stand-in, spec/support/k8s_standin.py), then the unprivileged subset
# (tag "unpriv") as `nobody` from a world-readable copy of the tree. LLMBOX_SPEC_RUNS (default "all,conformance,nobody")
# picks which of the three runs happen: CI runs all three in a fresh root (the conformance run
# there is bubblewrap's) and only the conformance runs on docker, podman and kubernetes on its own
# machine. Ends with one line
# "N passed, N failed, N skipped" over both runs; exits non-zero when anything failed.
set -u
cd "$(dirname "$0")/.."
top=$(pwd)
counts=$(mktemp)
# every failing spec, one line each, printed again above the closing line (see summary.lua)
failures=${LLMBOX_SPEC_FAILURES:-$(mktemp)}
: >"$failures"
total_pass=0 total_fail=0 total_skip=0 status=0

runs=",${LLMBOX_SPEC_RUNS:-all,conformance,nobody},"
wanted() { case $runs in *",$1,"*) return 0 ;; esac; return 1; }
for r in $(echo "$runs" | tr ',' ' '); do
	case $r in all | conformance | nobody) ;; *)
		echo "LLMBOX_SPEC_RUNS: '$r' is not a run; name some of all, conformance, nobody (comma-separated)" >&2
		exit 2 ;;
	esac
done

run_busted() { # label, then busted args
	label=$1; shift
	: >"$counts"
	echo "== $label"
	t0=$(date +%s)
	LLMBOX_SPEC_COUNTS="$counts" LLMBOX_SPEC_FAILURES="$failures" luajit /usr/bin/busted --output=spec/helpers/summary.lua "$@" || status=1
	echo "== $label: $(($(date +%s) - t0)) s"
	if [ -s "$counts" ]; then
		read -r p f e s <"$counts"
		total_pass=$((total_pass + p)); total_fail=$((total_fail + f + e)); total_skip=$((total_skip + s))
	else
		echo "$label: busted did not finish"; total_fail=$((total_fail + 1)); status=1
	fi
}

# The container engines the engine specs talk to: started here when installed but not running
# (as root), stopped at the end.
engines_state=$top/build/engines
spec/support/engines.sh start "$engines_state"
trap 'spec/support/engines.sh stop "$engines_state"' EXIT

if wanted all; then run_busted "specs as $(id -un)" spec; else echo "== specs as $(id -un): not asked for (LLMBOX_SPEC_RUNS)"; fi

# The runs after the first: the conformance suite (specs tagged #conformance) again for every
# other backend asked for — LLMBOX_CONFORMANCE_BACKENDS="bubblewrap,docker" (unset: bubblewrap;
# empty: none); one that cannot run here is skipped with the reason — and the unprivileged
# specs as nobody. They are independent of each other, so LLMBOX_SPEC_JOBS of them (default 2)
# run side by side, each with its own log, printed whole when it ends.
later=$(mktemp -d /tmp/llmbox-runs.XXXXXX)
n_later=0
add_run() { n_later=$((n_later + 1)); printf '%s\n' "$*" >"$later/$n_later.what"; }

# one run in the background's terms: its log, "p f e s" in DIR.counts, failures in DIR.failures
busted_into() { # dir, label, then busted args
	dir=$1 label=$2
	shift 2
	echo "== $label"
	t0=$(date +%s)
	LLMBOX_SPEC_COUNTS="$dir.counts" LLMBOX_SPEC_FAILURES="$dir.failures" luajit /usr/bin/busted \
		--output=spec/helpers/summary.lua "$@"
	echo "== $label: $(($(date +%s) - t0)) s"
}

standin_pid=
wanted conformance || LLMBOX_CONFORMANCE_BACKENDS=
for b in $(echo "${LLMBOX_CONFORMANCE_BACKENDS-bubblewrap}" | tr ',' ' '); do
	[ "$b" = native ] && [ -z "${LLMBOX_BACKEND:-}" ] && continue # the run above was native's
	extra=
	if [ "$b" = kubernetes ] && [ -z "${KUBECONFIG:-}" ]; then
		# no cluster named: the stand-in (spec/support/k8s_standin.py), whose pods are native
		# jails of this host; LLMBOX_K8S_STANDIN tells the specs where it differs from a cluster
		standin=$(mktemp -d /tmp/llmbox-standin.XXXXXX)
		/usr/bin/python3 spec/support/k8s_standin.py "$standin" >"$standin/log" 2>&1 &
		standin_pid=$!
		for _ in $(seq 200); do [ -e "$standin/kubeconfig" ] && break; sleep 0.05; done
		extra="KUBECONFIG=$standin/kubeconfig LLMBOX_K8S_STANDIN=1 LLMBOX_KUBERNETES_ISOLATION=cluster"
	fi
	# (one at a time: making the engines' test image is not to be done twice at once)
	if why=$(env $extra luajit spec/support/backend_usable.lua "$b"); then
		# backends that run images get the languages image (spec/support/langs_image.py)
		add_run conformance "$b" "${why:--}" $extra
	else
		echo "== conformance on the $b backend: skipped: $why"
		total_skip=$((total_skip + 1))
	fi
done

if ! wanted nobody; then
	echo "== unprivileged specs as nobody: not asked for (LLMBOX_SPEC_RUNS)"
elif [ "$(id -u)" = 0 ]; then
	add_run nobody
else
	echo "== unprivileged specs: already running unprivileged, covered above"
fi

run_later() { # index
	dir=$later/$1
	set -- $(cat "$dir.what")
	case $1 in
	conformance)
		b=$2 image=$3
		[ "$image" = - ] && image=
		shift 3
		(
			# (the stand-in's settings, for kubernetes)
			[ $# -gt 0 ] && export "$@"
			export LLMBOX_BACKEND="$b" LLMBOX_IMAGE="$image"
			busted_into "$dir" "conformance on the $b backend${image:+ (image $image)}" --tags=conformance spec
		)
		;;
	nobody)
		# nobody cannot read a clone under /root: copy what the specs need somewhere it can.
		tmp=$(mktemp -d /tmp/llmbox-unpriv.XXXXXX)
		cp -r build lua policies spec examples .busted .ci README.md "$tmp"/ 2>/dev/null
		chmod -R a+rX "$tmp"
		chmod 1777 "$tmp"
		touch "$tmp/counts" "$tmp/failures"
		chmod 666 "$tmp/counts" "$tmp/failures"
		echo "== unprivileged specs as nobody"
		t0=$(date +%s)
		(cd "$tmp" && setpriv --reuid=nobody --regid=nogroup --clear-groups \
			env HOME="$tmp" LLMBOX_SPEC_COUNTS="$tmp/counts" LLMBOX_SPEC_FAILURES="$tmp/failures" luajit \
			/usr/bin/busted --output=spec/helpers/summary.lua --tags=unpriv spec)
		echo "== unprivileged specs as nobody: $(($(date +%s) - t0)) s"
		[ -s "$tmp/counts" ] && cp "$tmp/counts" "$dir.counts"
		sed 's/^/[nobody] /' "$tmp/failures" >"$dir.failures"
		rm -rf "$tmp"
		;;
	esac >"$dir.log" 2>&1
	echo "== finished: $(head -n 1 "$dir.log" | sed 's/^== //')"
}

# A queue: each worker takes the next run nobody has taken (mkdir is the lock) when it is free,
# so a long run (list it first: kubernetes on the stand-in) does not hold up the ones after it.
jobs=${LLMBOX_SPEC_JOBS:-2}
k=1 workers=
while [ "$k" -le "$jobs" ] && [ "$k" -le "$n_later" ]; do
	(
		i=1
		while [ "$i" -le "$n_later" ]; do
			mkdir "$later/$i.taken" 2>/dev/null && run_later "$i"
			i=$((i + 1))
		done
	) &
	workers="$workers $!"
	k=$((k + 1))
done
[ "$n_later" -gt 0 ] && echo "== $n_later more runs, $jobs side by side (LLMBOX_SPEC_JOBS); each one's log follows when all are done"
# the workers only: the stand-in, a child too, runs until it is stopped below
for w in $workers; do wait "$w"; done
i=1
while [ "$i" -le "$n_later" ]; do
	dir=$later/$i
	cat "$dir.log"
	if [ -s "$dir.counts" ]; then
		read -r p f e s <"$dir.counts"
		total_pass=$((total_pass + p)); total_fail=$((total_fail + f + e)); total_skip=$((total_skip + s))
		[ $((f + e)) = 0 ] || status=1
	else
		echo "$(head -n 1 "$dir.log" | sed 's/^== //'): busted did not finish"
		total_fail=$((total_fail + 1)); status=1
	fi
	[ -s "$dir.failures" ] && cat "$dir.failures" >>"$failures"
	i=$((i + 1))
done
rm -rf "$later"
if [ -n "$standin_pid" ]; then
	kill "$standin_pid" 2>/dev/null
	wait "$standin_pid" 2>/dev/null
	rm -rf "$standin"
fi
# the languages image's root, made once for the engines that imported it (2 GB)
rm -f "$engines_state/langs-image.tar"

rm -f "$counts"
if [ -s "$failures" ]; then
	echo
	echo "== what failed"
	cat "$failures"
fi
[ -n "${LLMBOX_SPEC_FAILURES:-}" ] || rm -f "$failures"
echo
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
# .ci/run adds these to the fresh root's counts for its own closing line
[ -n "${LLMBOX_SPEC_TOTALS:-}" ] && echo "$total_pass $total_fail $total_skip" >"$LLMBOX_SPEC_TOTALS"
[ "$total_fail" = 0 ] && exit "$status" || exit 1
