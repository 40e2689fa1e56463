#!/bin/sh
# make bench: brings up Docker and Podman for their rows when this host can
# (bench/docker-setup.sh, bench/podman-setup.sh), runs bench/bench.lua, and stops what it started.
# BENCH_DOCKER=0 skips Docker (and Podman, which takes Docker's image); BENCH_PODMAN=0 skips
# Podman; BENCH_QUICK=1 runs fewer iterations.
cd "$(dirname "$0")/.." || exit 1
state=build/bench
mkdir -p "$state" bench/results
rm -f "$state/dockerd.pid"
if [ "${BENCH_DOCKER:-}" = 0 ]; then
	docker_state="skip BENCH_DOCKER=0"
else
	docker_state=$(bench/docker-setup.sh "$state")
fi
echo "bench: docker: $docker_state" >&2
rm -f "$state/podman.pid"
if [ "${BENCH_PODMAN:-}" = 0 ]; then
	podman_state="skip BENCH_PODMAN=0"
else
	# shellcheck disable=SC2046 # "ok IMAGE BIN": two words, the image and the docker client
	podman_state=$(bench/podman-setup.sh "$state" $(echo "$docker_state" | sed -n 's/^ok //p'))
fi
echo "bench: podman: $podman_state" >&2
# the kubernetes rows run against the stand-in (BENCH_K8S=0 skips them)
k8s_pid=
if [ "${BENCH_K8S:-1}" != 0 ] && [ -x /usr/bin/python3 ]; then
	k8s_dir=$(mktemp -d /tmp/llmbox-bench-k8s.XXXXXX)
	setsid /usr/bin/python3 spec/support/k8s_standin.py "$k8s_dir" >"$k8s_dir/log" 2>&1 &
	k8s_pid=$!
	i=0
	while [ ! -s "$k8s_dir/kubeconfig" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
	if [ -s "$k8s_dir/kubeconfig" ]; then
		export BENCH_K8S=1 KUBECONFIG="$k8s_dir/kubeconfig"
		echo "bench: kubernetes: the stand-in (spec/support/k8s_standin.py)" >&2
	else
		echo "bench: kubernetes: skipped: the stand-in did not start: $(cat "$k8s_dir/log")" >&2
		export BENCH_K8S=0
	fi
fi
BENCH_DOCKER="$docker_state" BENCH_PODMAN="$podman_state" build/bin/llmbox script bench/bench.lua bench/results
rc=$?
if [ -n "$k8s_pid" ]; then
	kill "$k8s_pid" 2>/dev/null
	rm -rf "$k8s_dir"
fi
for name in dockerd podman; do
	[ -s "$state/$name.pid" ] || continue
	pid=$(cat "$state/$name.pid")
	kill "$pid" 2>/dev/null
	i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 40 ]; do sleep 0.25; i=$((i + 1)); done
	rm -f "$state/$name.pid"
	echo "bench: stopped the $name this run started" >&2
done
exit $rc
