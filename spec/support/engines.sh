#!/bin/sh
# The container engines the specs talk to (spec/02-integration/engine_spec.lua and, later, the
# docker and podman backends): started for the spec run when they are installed (make test
# installs docker.io and podman) but not running, and stopped again afterwards.
#
#   spec/support/engines.sh start STATE_DIR   prints one line per engine: what it did
#   spec/support/engines.sh stop STATE_DIR    stops what `start` started
#
# Root only (an engine's socket is root's). dockerd gets no bridge and no iptables rules: the
# sandboxes never have a network, and a second dockerd (a fresh root shares the host's network
# namespace) must not touch the host's bridge or firewall. Podman's API service listens where
# its clients look for it, /run/podman/podman.sock.
#
# LLMBOX_ENGINES_LOOPBACK=no leaves out what listens on loopback ports (dockerd's TLS listener on
# 127.0.0.1:2376, the test registry on 127.0.0.1:5055): CI's conformance runs on this machine use
# neither, and run beside a fresh root that shares this network namespace and starts its own.
set -u
loopback=${LLMBOX_ENGINES_LOOPBACK:-yes}
cmd=${1:-}
state=${2:-}
[ -n "$cmd" ] && [ -n "$state" ] || { echo "usage: $0 start|stop STATE_DIR" >&2; exit 2; }
mkdir -p "$state"

answers() { # socket: does an Engine API answer there?
	[ -S "$1" ] && curl -sf --max-time 2 --unix-socket "$1" http://engine/_ping >/dev/null 2>&1
}

wait_for() { # name, socket, pidfile
	i=0
	until answers "$2"; do
		i=$((i + 1))
		if [ $i -gt 60 ] || ! kill -0 "$(cat "$3")" 2>/dev/null; then
			echo "engines: $1 did not come up within 30 s (see $state/$1.log)"
			return 1
		fi
		sleep 0.5
	done
	echo "engines: started $1"
}

tls_material() { # dir: a throwaway CA, a server certificate for 127.0.0.1, a client certificate
	rm -rf "$1" && mkdir -p "$1" && cd "$1" || return 1
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=llmbox test CA" -keyout ca-key.pem -out ca.pem &&
		openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server-key.pem -out server.csr &&
		printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext &&
		openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 \
			-extfile server.ext -out server-cert.pem &&
		openssl req -newkey rsa:2048 -nodes -subj "/CN=llmbox client" -keyout key.pem -out client.csr &&
		printf 'extendedKeyUsage=clientAuth\n' >client.ext &&
		openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 \
			-extfile client.ext -out cert.pem &&
		chmod 600 ./*key.pem
	rc=$?
	cd - >/dev/null || return 1
	return $rc
}

case $cmd in
start)
	if [ "$(id -u)" != 0 ]; then
		echo "engines: not root: using only engines that already run"
		exit 0
	fi
	if answers /var/run/docker.sock; then
		echo "engines: dockerd already running"
	elif command -v dockerd >/dev/null 2>&1; then
		# and on loopback TCP with TLS client certificates (spec/02-integration/engine_tls_spec.lua):
		# a CA, the server's certificate, and the client's as DOCKER_CERT_PATH wants them
		tcp=
		if [ "$loopback" = no ]; then
			echo "engines: dockerd gets no TCP listener (LLMBOX_ENGINES_LOOPBACK=no)"
		# (not when something else holds the port: a second dockerd, in a fresh root that
		# shares this network namespace, would not start at all)
		elif curl -s --max-time 2 -o /dev/null http://127.0.0.1:2376/ 2>/dev/null || [ $? != 7 ]; then
			echo "engines: 127.0.0.1:2376 is taken: dockerd gets no TCP listener"
			rm -rf "$state/tls"
		elif tls_material "$state/tls" >"$state/tls.log" 2>&1; then
			tcp="-H tcp://127.0.0.1:2376 --tlsverify --tlscacert=$state/tls/ca.pem --tlscert=$state/tls/server-cert.pem --tlskey=$state/tls/server-key.pem"
		else
			echo "engines: no TLS material for dockerd's TCP listener (see $state/tls.log)"
		fi
		# shellcheck disable=SC2086 # $tcp is several arguments
		dockerd --bridge=none --iptables=false --ip-masq=false -H unix:///var/run/docker.sock $tcp \
			>"$state/dockerd.log" 2>&1 &
		echo $! >"$state/dockerd.pid"
		wait_for dockerd /var/run/docker.sock "$state/dockerd.pid" || rm -f "$state/dockerd.pid"
	else
		echo "engines: dockerd is not installed"
	fi
	# the test registry (Debian's docker-registry) on loopback, for the image pull specs
	# (spec/02-integration/images_spec.lua); dockerd takes a loopback registry over plain
	# HTTP, Podman is told so by the registries.conf it starts with
	if [ "$loopback" = no ]; then
		echo "engines: no test registry (LLMBOX_ENGINES_LOOPBACK=no)"
	elif curl -sf --max-time 2 http://127.0.0.1:5055/v2/ >/dev/null 2>&1; then
		echo "engines: the test registry already running"
	elif command -v docker-registry >/dev/null 2>&1; then
		mkdir -p "$state/registry"
		printf 'version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:5055\n' \
			"$state/registry" >"$state/registry.yml"
		docker-registry serve "$state/registry.yml" >"$state/registry.log" 2>&1 &
		echo $! >"$state/registry.pid"
		i=0
		until curl -sf --max-time 2 http://127.0.0.1:5055/v2/ >/dev/null 2>&1; do
			i=$((i + 1))
			if [ $i -gt 40 ]; then echo "engines: the test registry did not come up (see $state/registry.log)"; break; fi
			sleep 0.25
		done
		[ $i -gt 40 ] || echo "engines: started the test registry on 127.0.0.1:5055"
	else
		echo "engines: docker-registry is not installed"
	fi
	if answers /run/podman/podman.sock; then
		echo "engines: the podman API service already running"
	elif command -v podman >/dev/null 2>&1; then
		mkdir -p /run/podman
		cat /etc/containers/registries.conf >"$state/registries.conf" 2>/dev/null
		printf '\n[[registry]]\nlocation = "localhost:5055"\ninsecure = true\n' >>"$state/registries.conf"
		CONTAINERS_REGISTRIES_CONF="$state/registries.conf" \
			podman system service --time=0 unix:///run/podman/podman.sock >"$state/podman.log" 2>&1 &
		echo $! >"$state/podman.pid"
		wait_for podman /run/podman/podman.sock "$state/podman.pid" || rm -f "$state/podman.pid"
	else
		echo "engines: podman is not installed"
	fi
	;;
stop)
	for name in dockerd podman registry; do
		[ -s "$state/$name.pid" ] || continue
		pid=$(cat "$state/$name.pid")
		kill "$pid" 2>/dev/null
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 40 ]; do sleep 0.25; i=$((i + 1)); done
		kill -9 "$pid" 2>/dev/null
		rm -f "$state/$name.pid"
		echo "engines: stopped $name"
	done
	;;
*)
	echo "usage: $0 start|stop STATE_DIR" >&2
	exit 2
	;;
esac
exit 0
