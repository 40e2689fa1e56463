# Writes the README's fenced code blocks to files, so the commands it shows are the commands that
# are tested (spec/03-examples/readme_spec.lua, .ci/fresh-inside.sh). Usage:
#   awk -v dir=DIR -f .ci/readme-blocks.awk README.md
# Block N (counting only blocks with a language tag) goes to DIR/NN.KIND.LANG, where KIND comes
# from an HTML comment on the line before the fence, invisible to readers:
#   <!-- readme-test: fresh -->       sh: run only inside a fresh root (it installs system-wide)
#   <!-- readme-test: file PATH -->   the block is a copy of PATH, which must say the same
#   <!-- readme-test: policy -->      lua: a policy file, which must load
# and is "run" otherwise. A marker's argument goes to DIR/NN.arg. Blocks without a language tag
# (command synopses, diagrams) are not written. Plain awk: a fresh Debian root has mawk only.
BEGIN { n = 0; inblock = 0; kind = ""; arg = "" }
{
	if (inblock) {
		if ($0 ~ /^```[ \t]*$/) {
			inblock = 0
			if (out != "") close(out)
			next
		}
		if (out != "") print > out
		next
	}
	if ($0 ~ /^<!-- readme-test: [a-z-]+( [^ ]+)? -->[ \t]*$/) {
		kind = $3
		arg = ($4 == "-->") ? "" : $4
		next
	}
	if ($0 ~ /^```/) {
		inblock = 1
		lang = substr($0, 4)
		sub(/[ \t]+$/, "", lang)
		out = ""
		if (lang != "") {
			n++
			out = sprintf("%s/%02d.%s.%s", dir, n, kind == "" ? "run" : kind, lang)
			printf "" > out
			if (arg != "") {
				print arg > sprintf("%s/%02d.arg", dir, n)
				close(sprintf("%s/%02d.arg", dir, n))
			}
		}
		kind = ""
		arg = ""
		next
	}
	if ($0 !~ /^[ \t]*$/) { kind = ""; arg = "" }
}
END {
	if (inblock) {
		print "readme-blocks: an unclosed code fence in the README" > "/dev/stderr"
		exit 1
	}
}
