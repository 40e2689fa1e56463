#!/bin/sh
# make soak: WORKERS parallel workers x RUNS sandboxes each, then checks the host is clean.
# Usage: spec/support/soak.sh [WORKERS] [RUNS]
set -eu
cd "$(dirname "$0")/../.."
workers=${1:-8} runs=${2:-500}
exec luajit spec/support/soak_check.lua "$workers" "$runs"
