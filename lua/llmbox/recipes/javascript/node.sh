# The javascript recipe's launcher: exec node with the recipe's arguments. Under an
# address-space limit (RLIMIT_AS: llmbox unprivileged, no memory cgroup) V8 cannot reserve its
# 512M JIT code range and aborts, so below 1.5G node runs --jitless there (V8's interpreter only:
# slower, and no WebAssembly) with its heap sized to half the limit.
# shellcheck shell=dash
set -u
as=$(ulimit -v)
if [ "$as" != unlimited ] && [ "$as" -lt 1572864 ]; then
    set -- --jitless --no-expose-wasm --max-old-space-size=$((as / 2048)) "$@"
fi
exec /usr/bin/node "$@"
