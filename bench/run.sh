#!/bin/sh
# make bench: brings up Docker for the docker row when this host can (bench/docker-setup.sh),
# runs bench/bench.lua, and stops dockerd again if it was started here.
# BENCH_DOCKER=0 skips Docker entirely; BENCH_QUICK=1 runs fewer iterations.
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
BENCH_DOCKER="$docker_state" build/bin/llmbox script bench/bench.lua bench/results
rc=$?
if [ -s "$state/dockerd.pid" ]; then
	pid=$(cat "$state/dockerd.pid")
	kill "$pid" 2>/dev/null
	i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 40 ]; do sleep 0.25; i=$((i + 1)); done
	rm -f "$state/dockerd.pid"
	echo "bench: stopped the dockerd this run started" >&2
fi
exit $rc
