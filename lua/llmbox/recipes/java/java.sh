# The java recipe's run step: runs the class javac.sh compiled, with the program's arguments.
# shellcheck shell=dash
set -u
dir=${1%/*}
shift
read -r main <"$dir/java/main-class" && read -r heap <"$dir/java/heap-mb" || exit 1
# shellcheck disable=SC2086 # JVM_FLAGS is a list of flags
exec /usr/bin/java -Xmx${heap}m $JVM_FLAGS -cp "$dir/java/classes" "$main" "$@"
