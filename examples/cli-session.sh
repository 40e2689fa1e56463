#!/bin/sh
# A CLI session: what a person at a shell does with llmbox. Run by spec/03-examples.
# Usage: examples/cli-session.sh [path/to/llmbox]
set -e
LLMBOX=${1:-llmbox}

# Run a snippet; the exit status is the program's.
"$LLMBOX" run -l python -c 'print(sum(range(10)))'

# Arguments after -- reach the program; --json gives one machine-readable object.
"$LLMBOX" run --json -l python -c 'import sys; print(sys.argv[1:])' -- alpha beta

# A shell command in a fresh sandbox.
"$LLMBOX" exec -- sh -c 'echo "I am $(id -un) in $(pwd)"'

# Ask the policy before running.
"$LLMBOX" check -l python -c 'import os; print(os.getcwd())'

# A timeout ends the run with status 124.
status=0
"$LLMBOX" run -q -t 1 -l python -c 'while True: pass' || status=$?
echo "timeout status: $status"
