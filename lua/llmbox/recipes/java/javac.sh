# The java recipe's compile step: javac "{file}" (/tmp/llmbox/Main.java), for a program whose
# public class may have any name. javac wants a public class in a file of the same name, so the
# code is compiled as <Class>.java next to Main.java (compiler errors name that file); the class
# to run is written to java/main-class for java.sh. Runs under /bin/sh (dash) inside the jail.
# shellcheck shell=dash
set -u
src=$1
dir=${src%/*}
out=$dir/java
rm -rf "$out" && mkdir -p "$out/classes" || exit 1

ident='[A-Za-z_$][A-Za-z0-9_$]*'
mods='((final|abstract|sealed|non-sealed|strictfp)[[:space:]]+)*'
kind='(class|record|enum|interface)'
# The public top-level class: one declared at the start of a line, preferably unindented.
# Top-level classes cannot be static, which keeps "public static class Nested" out.
public_class() {
    sed -n -E "s/^${1}public[[:space:]]+${mods}${kind}[[:space:]]+(${ident}).*/\\4/p" "$src" | head -n 1
}
pub=$(public_class '')
[ -n "$pub" ] || pub=$(public_class '[[:space:]]*')
# The classes that declare main(), each named by the last unindented class declared before it
# (the one it is nested in, for code laid out as usual); failing that, the first class.
with_main=$(awk -v decl="^(public[[:space:]]+)?${mods}${kind}[[:space:]]+${ident}" '
    $0 ~ decl { sub(/^(public[[:space:]]+)?(((final|abstract|sealed|non-sealed|strictfp)[[:space:]]+)*)(class|record|enum|interface)[[:space:]]+/, "")
                match($0, /^[A-Za-z_$][A-Za-z0-9_$]*/); cls = substr($0, 1, RLENGTH) }
    /static[[:space:]]+(final[[:space:]]+)?void[[:space:]]+main[[:space:]]*\(/ && cls != "" { print cls }
' "$src")
main=
if [ -n "$pub" ] && printf '%s\n' "$with_main" | grep -qx "$pub"; then main=$pub
elif [ -n "$with_main" ]; then main=$(printf '%s\n' "$with_main" | head -n 1)
elif [ -n "$pub" ]; then main=$pub
else main=$(sed -n -E "s/^[[:space:]]*${mods}${kind}[[:space:]]+(${ident}).*/\\3/p" "$src" | head -n 1)
fi
pkg=$(sed -n -E 's/^[[:space:]]*package[[:space:]]+([A-Za-z0-9_$.]+)[[:space:]]*;.*/\1/p' "$src" | head -n 1)

file=$src
if [ -n "$pub" ] && [ "$pub.java" != "${src##*/}" ]; then
    file=$dir/$pub.java
    cp "$src" "$file" || exit 1
fi
printf '%s\n' "${pkg:+$pkg.}${main:-Main}" >"$out/main-class"
# The heap (-Xmx, MB): 256, or less when an rlimit holds the run's memory (llmbox unprivileged,
# no cgroup): the address-space limit less the JVM's fixed ~350M of mappings (module image,
# class space, code cache, metaspace, CDS archive, thread stacks), or the data limit less ~100M.
heap=256
as=$(ulimit -v) && [ "$as" != unlimited ] && [ $((as / 1024 - 352)) -lt $heap ] && heap=$((as / 1024 - 352))
data=$(ulimit -d) && [ "$data" != unlimited ] && [ $((data / 1024 - 96)) -lt $heap ] && heap=$((data / 1024 - 96))
[ "$heap" -ge 16 ] || heap=16
echo "$heap" >"$out/heap-mb"
# shellcheck disable=SC2046,SC2086 # JVM_FLAGS is a list of flags
exec /usr/bin/javac $(printf ' -J%s' -Xmx${heap}m $JVM_FLAGS) -encoding UTF-8 -d "$out/classes" "$file"
