# The java recipe's run step: runs the class javac.sh compiled, with the program's arguments.
set -u
dir=${1%/*}
shift
read -r main <"$dir/java/main-class" || exit 1
# The heap: what the address-space limit leaves after the JVM's fixed ~350M (module image,
# class space, code cache, metaspace, CDS archive, thread stacks) when llmbox runs unprivileged
# (RLIMIT_AS); 256M under a memory cgroup, which only counts memory actually used.
as=$(ulimit -v)
case $as in
''|unlimited) heap=256 ;;
*) heap=$((as / 1024 - 352)); [ "$heap" -ge 16 ] || heap=16 ;;
esac
# shellcheck disable=SC2086 # JVM_FLAGS is a list of flags
exec /usr/bin/java -Xmx${heap}m $JVM_FLAGS -cp "$dir/java/classes" "$main" "$@"
