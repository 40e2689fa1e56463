#!/bin/sh
# Makes Podman's API service and the benchmark's python3 image available for the podman rows, if
# this host can.
#
#   bench/podman-setup.sh STATE_DIR IMAGE DOCKER_BIN
#
# IMAGE is the image bench/docker-setup.sh made in Docker; it is loaded into Podman's store from
# there (there is no registry here), once. Prints one line on stdout: "ok PODMAN_IMAGE
# PODMAN_BIN" or "skip REASON". When it had to start the API service itself it writes its pid
# to STATE_DIR/podman.pid (bench/run.sh stops it afterwards).
STATE=${1:-/tmp}
IMAGE=$2
DOCKER_BIN=$3
PIMAGE=localhost/${IMAGE##*/}
SOCK=/run/podman/podman.sock
mkdir -p "$STATE"
log="$STATE/podman-setup.log"
: >"$log"

command -v podman >/dev/null 2>&1 || { echo "skip podman is not installed"; exit 0; }
if [ -z "$IMAGE" ] || [ -z "$DOCKER_BIN" ]; then
	echo "skip no Docker image to load (the docker rows were skipped)"
	exit 0
fi
answers() { [ -S "$SOCK" ] && curl -sf --max-time 2 --unix-socket "$SOCK" http://podman/_ping >/dev/null 2>&1; }
if ! answers; then
	if [ "$(id -u)" != 0 ]; then
		echo "skip Podman's API service is not running at $SOCK and not root, so it cannot be started"
		exit 0
	fi
	mkdir -p /run/podman
	podman system service --time=0 "unix://$SOCK" >"$STATE/podman.log" 2>&1 &
	echo $! >"$STATE/podman.pid"
	i=0
	until answers; do
		i=$((i + 1))
		if [ $i -gt 60 ] || ! kill -0 "$(cat "$STATE/podman.pid")" 2>/dev/null; then
			echo "skip Podman's API service did not come up within 30 s (see $STATE/podman.log)"
			exit 0
		fi
		sleep 0.5
	done
fi
if ! podman image exists "$PIMAGE" 2>>"$log"; then
	if ! "$DOCKER_BIN" save "$IMAGE" 2>>"$log" | podman load >>"$log" 2>&1 ||
		! podman tag "$IMAGE" "$PIMAGE" >>"$log" 2>&1; then
		echo "skip loading $IMAGE into Podman failed (see $log)"
		exit 0
	fi
fi
echo "ok $PIMAGE $(command -v podman)"
