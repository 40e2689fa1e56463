#!/bin/sh
# Makes a Docker engine and a python3 image available for the benchmark, if this host can.
#
#   bench/docker-setup.sh STATE_DIR
#
# Prints one line on stdout: "ok IMAGE" or "skip REASON". When it had to start dockerd itself it
# writes the daemon's pid to STATE_DIR/dockerd.pid (bench/bench.lua stops it afterwards).
# There is no registry here: the image is built offline with debootstrap (minbase bookworm +
# python3) and `docker import`, once; Docker keeps it for the next run.
IMAGE=${BENCH_DOCKER_IMAGE:-llmbox-bench-python:latest}
STATE=${1:-/tmp}
mkdir -p "$STATE"
log="$STATE/docker-setup.log"
: >"$log"

docker_cmd=docker
[ -x /usr/bin/docker ] && docker_cmd=/usr/bin/docker   # Debian's client matches Debian's dockerd
command -v "$docker_cmd" >/dev/null 2>&1 || { echo "skip no docker client installed"; exit 0; }

if ! "$docker_cmd" info >/dev/null 2>&1; then
	if ! command -v dockerd >/dev/null 2>&1; then
		echo "skip no Docker engine reachable (docker info failed) and no dockerd binary to start"
		exit 0
	fi
	if [ "$(id -u)" != 0 ]; then
		echo "skip no Docker engine reachable and not root, so dockerd cannot be started"
		exit 0
	fi
	dockerd >"$STATE/dockerd.log" 2>&1 &
	echo $! >"$STATE/dockerd.pid"
	i=0
	until "$docker_cmd" info >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -gt 60 ] || ! kill -0 "$(cat "$STATE/dockerd.pid")" 2>/dev/null; then
			echo "skip dockerd did not come up within 30 s (see $STATE/dockerd.log)"
			exit 0
		fi
		sleep 0.5
	done
fi

if ! "$docker_cmd" image inspect "$IMAGE" >/dev/null 2>&1; then
	if ! command -v debootstrap >/dev/null 2>&1; then
		echo "skip image $IMAGE is missing and debootstrap is not installed to build it offline"
		exit 0
	fi
	root="$STATE/rootfs"
	rm -rf "$root"
	echo "building $IMAGE with debootstrap (once; a few minutes)" >&2
	if ! timeout 600 debootstrap --variant=minbase bookworm "$root" >>"$log" 2>&1; then
		rm -rf "$root"
		echo "skip debootstrap failed or took over 10 min (see $log)"
		exit 0
	fi
	if ! timeout 300 chroot "$root" sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-minimal && apt-get clean' >>"$log" 2>&1; then
		rm -rf "$root"
		echo "skip installing python3 into the image failed (see $log)"
		exit 0
	fi
	if ! tar -C "$root" -c . | "$docker_cmd" import - "$IMAGE" >>"$log" 2>&1; then
		rm -rf "$root"
		echo "skip docker import failed (see $log)"
		exit 0
	fi
	rm -rf "$root"
fi
if ! "$docker_cmd" run --rm --network none "$IMAGE" python3 -c 'print(1)' >>"$log" 2>&1; then
	echo "skip docker run of $IMAGE failed (see $log)"
	exit 0
fi
echo "ok $IMAGE $docker_cmd"
