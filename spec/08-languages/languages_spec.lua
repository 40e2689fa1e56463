-- Every shipped language recipe, end to end on the native backend: real toolchains in real jails.
-- One session per language is shared by its cases (the JVM and the go tool start slowly).
-- Go is not tagged #unpriv: unprivileged, the memory limit is RLIMIT_AS, and the Go runtime
-- (the go tool as well as every Go program) needs ~800M of address space just to start.
local llmbox = require "llmbox"
local helpers = require "spec.helpers"

local ARGS, STDIN = { "a b", "--x" }, "hello"
local ARGS_OUT = "a b|--x\nHELLO\n"

local LANGS = {
    {
        lang = "javascript", ext = "js", unpriv = true,
        hello = 'console.log("hello, world")',
        echo = [[
const input = require("fs").readFileSync(0, "utf8");
console.log(process.argv.slice(2).join("|"));
console.log(input.toUpperCase());
]],
        exit3 = "process.exit(3)",
        broken = "let x = ;", broken_err = "SyntaxError",
        loop = 'console.log("looping"); while (true) {}',
    },
    {
        lang = "java", ext = "java", unpriv = true, compiled = true, loop_timeout = 4,
        -- the public class is not called Main: any name works
        hello = [[
public class Hello {
    public static void main(String[] args) {
        System.out.println("hello, world");
    }
}
]],
        echo = [[
import java.io.IOException;

public class Echo {
    public static void main(String[] args) throws IOException {
        String input = new String(System.in.readAllBytes());
        System.out.println(String.join("|", args));
        System.out.println(input.toUpperCase());
    }
}
]],
        exit3 = "public class Exit { public static void main(String[] a) { System.exit(3); } }",
        broken = [[
public class Broken {
    public static void main(String[] args) {
        int x = "not a number";
    }
}
]],
        broken_err = "Broken.java:3: error: incompatible types",
        loop = [[
public class Loop {
    public static void main(String[] args) {
        System.out.println("looping");
        System.out.flush();
        while (true) { }
    }
}
]],
    },
    {
        lang = "cpp", ext = "cpp", unpriv = true, compiled = true, loop_timeout = 3,
        hello = '#include <iostream>\nint main() { std::cout << "hello, world" << std::endl; }\n',
        echo = [[
#include <cctype>
#include <iostream>
#include <iterator>
#include <string>

int main(int argc, char **argv) {
    std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    for (int i = 1; i < argc; i++) std::cout << (i > 1 ? "|" : "") << argv[i];
    for (auto &c : input) c = std::toupper(static_cast<unsigned char>(c));
    std::cout << "\n" << input << std::endl;
}
]],
        exit3 = "int main() { return 3; }",
        broken = "int main() { return undeclared_thing; }",
        broken_err = "main.cpp:1:21: error:",
        loop = [[
#include <cstdio>
int main() {
    std::puts("looping");
    std::fflush(stdout);
    volatile unsigned long i = 0;
    for (;;) i++;
}
]],
    },
    {
        lang = "go", ext = "go", unpriv = true, compiled = true, loop_timeout = 3,
        hello = 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hello, world")\n}\n',
        echo = [[
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	input, _ := io.ReadAll(os.Stdin)
	fmt.Println(strings.Join(os.Args[1:], "|"))
	fmt.Println(strings.ToUpper(string(input)))
}
]],
        exit3 = 'package main\n\nimport "os"\n\nfunc main() { os.Exit(3) }\n',
        broken = "package main\n\nfunc main() {\n\tx := 1\n}\n",
        broken_err = "main.go:4:2: x declared but not used",
        loop = 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("looping")\n\tfor {\n\t}\n}\n',
    },
    {
        lang = "r", ext = "R", unpriv = true,
        hello = 'cat("hello, world\\n")',
        echo = [[
args <- commandArgs(trailingOnly = TRUE)
input <- paste(readLines(file("stdin"), warn = FALSE), collapse = "\n")
cat(paste(args, collapse = "|"), "\n", toupper(input), "\n", sep = "")
]],
        exit3 = "quit(status = 3)",
        broken = "x <- (1 + ", broken_err = "unexpected end of input",
        loop = 'cat("looping\\n"); flush(stdout()); while (TRUE) {}',
    },
    {
        lang = "ruby", ext = "rb", unpriv = true,
        hello = 'puts "hello, world"',
        echo = 'input = $stdin.read\nputs ARGV.join("|")\nputs input.upcase\n',
        exit3 = "exit 3",
        broken = "def f(\n", broken_err = "syntax error",
        loop = "$stdout.sync = true\nputs 'looping'\nloop {}\n",
    },
}

for _, L in ipairs(LANGS) do
    describe("language " .. L.lang .. " #conformance" .. (L.unpriv and " #unpriv" or ""), function()
        local s, missing
        setup(function()
            s = assert(llmbox.session({ lang = L.lang }))
            missing = helpers.missing_toolchain(s)
        end)
        teardown(function() if s then s:close() end end)
        -- busted's pending must be called from this file's own functions
        local function runs_here()
            if missing then pending(missing) end
            return not missing
        end

        it("runs hello world: exact stdout, nothing on stderr, exit 0", function()
            if not runs_here() then return end
            local r = assert(s:run(L.hello))
            assert.equal("", r.stderr)
            assert.equal("hello, world\n", r.stdout)
            assert.equal(0, r.exit_code)
            assert.is_nil(r.limit)
            assert.is_nil(r.phase)
            assert.is_true(r.duration_ms > 0)
        end)

        it("passes program arguments and stdin", function()
            if not runs_here() then return end
            local r = assert(s:run(L.echo, { args = ARGS, stdin = STDIN }))
            assert.equal("", r.stderr)
            assert.equal(ARGS_OUT, r.stdout)
            assert.equal(0, r.exit_code)
        end)

        it("reports the program's exit code", function()
            if not runs_here() then return end
            local r = assert(s:run(L.exit3))
            assert.equal(3, r.exit_code)
            assert.is_nil(r.phase)
        end)

        it(L.compiled and "returns compile errors on stderr with a non-zero exit"
            or "returns a syntax error on stderr with a non-zero exit", function()
            if not runs_here() then return end
            local r = assert(s:run(L.broken))
            assert.not_equal(0, r.exit_code)
            assert.is_nil(r.limit)
            assert.matches(L.broken_err, r.stderr, 1, true)
            if L.compiled then assert.equal("compile", r.phase) end
            -- and the session still runs good code afterwards
            r = assert(s:run(L.hello))
            assert.equal("hello, world\n", r.stdout)
        end)

        it("kills an endless loop at the timeout", function()
            if not runs_here() then return end
            local t = L.loop_timeout or 1
            local r = assert(s:run(L.loop, { timeout = t }))
            assert.equal("timeout", r.limit)
            assert.is_nil(r.phase) -- the loop itself ran out of time, not a compiler
            assert.equal("looping\n", r.stdout)
            assert.is_true(r.duration_ms < (t + 3) * 1000)
        end)

        it("runs FILE." .. L.ext .. " from the CLI, picking the language from the extension", function()
            if not runs_here() then return end
            local f = helpers.write(helpers.tmppath("." .. L.ext), L.echo)
            local st, out, err = helpers.cli({ "run", f, "--", "a b", "--x" })
            os.remove(f)
            assert.equal("", err)
            assert.equal("a b|--x\n\n", out)
            assert.equal(0, st)
        end)
    end)
end

describe("javascript modules #unpriv", function()
    it("runs ES modules and CommonJS alike, in either order in one session", function()
        local s = assert(llmbox.session({ lang = "js" }))
        local esm = 'import { basename } from "path";\nconsole.log(basename(import.meta.url), await Promise.resolve(1));'
        local cjs = 'const { basename } = require("path");\nconsole.log(basename(__filename), typeof module);'
        for _ = 1, 2 do
            local r = assert(s:run(esm))
            assert.equal("", r.stderr)
            assert.equal("main.js 1\n", r.stdout)
            r = assert(s:run(cjs))
            assert.equal("", r.stderr)
            assert.equal("main.js object\n", r.stdout)
        end
        s:close()
    end)
end)

describe("java class names #unpriv", function()
    it("runs the public class even after helper classes, and packaged classes", function()
        local s = assert(llmbox.session({ lang = "java" }))
        local r = assert(s:run([[
import java.util.*;

interface Shape { double area(); }
record Square(double side) implements Shape { public double area() { return side * side; } }
class Helper { static String name() { return "helper"; } }

public class Solution {
    public static class Nested { }
    public static void main(String[] args) {
        System.out.println(new Square(3).area() + " " + Helper.name());
    }
}
]]))
        assert.equal("", r.stderr)
        assert.equal("9.0 helper\n", r.stdout)
        r = assert(s:run([[
package com.example;

class Util { static int two() { return 2; } }

class App {
    public static void main(String[] args) { System.out.println("packaged " + Util.two()); }
}
]]))
        assert.equal("", r.stderr)
        assert.equal("packaged 2\n", r.stdout)
        s:close()
    end)
end)

describe("go caches", function()
    -- What the go tool may write on the host if its environment leaked: $HOME/.cache/go-build,
    -- $HOME/go, go-build* work directories in /tmp.
    local function listing()
        local home = os.getenv("HOME") or "/root"
        local p = io.popen("ls -a " .. helpers.shell_quote(home .. "/.cache") .. " " .. helpers.shell_quote(home .. "/go")
            .. " 2>/dev/null; ls -a /tmp | grep -i go")
        local out = p:read("*a")
        p:close()
        return out
    end

    it("stay inside the sandbox", function()
        local before = listing()
        local s = assert(llmbox.session({ lang = "go" }))
        local r = assert(s:run([[
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	b, _ := json.Marshal(map[string]int{"n": 1})
	fmt.Println(string(b))
	entries, _ := os.ReadDir("/sandbox")
	fmt.Println(len(entries))
}
]]))
        assert.equal("", r.stderr)
        assert.equal('{"n":1}\n0\n', r.stdout) -- and nothing in the workspace either
        s:close()
        assert.equal(before, listing())
    end)
end)

-- `make` compiles the Python recipe's files beside them (PEP 552 pycs, checked against the
-- source's hash) and every run writes them into the jail with the sources: the interpreter loads
-- llmbox's startup hook instead of compiling it at each start.
describe("python: llmbox's startup hook comes precompiled #unpriv", function()
    it("a run's sitecustomize has a pyc for this interpreter, checked against its source", function()
        local s = assert(llmbox.session({ lang = "python" }))
        local r = assert(s:run([[
import importlib.util, sitecustomize
pyc = open(sitecustomize.__spec__.cached, "rb").read()
src = open(sitecustomize.__file__, "rb").read()
print(pyc[:4] == importlib.util.MAGIC_NUMBER, int.from_bytes(pyc[4:8], "little"),
      pyc[8:16] == importlib.util.source_hash(src), sitecustomize.__file__)
]]))
        s:close()
        -- flags 3: hash-based and checked, so a source that changed is compiled, never shadowed
        assert.equal("True 3 True /tmp/llmbox/hooks/sitecustomize.py\n", r.stdout, r.stderr)
    end)

    it("the warm and interactive programs, which run as __main__, get no pyc written for nothing", function()
        local recipes = require "llmbox.recipes"
        local py = assert(recipes.get("python"))
        local layout = { workspace = "/sandbox", code = "/tmp/llmbox" }
        for _, program in ipairs({ py.warm, py.interactive }) do
            local pycs = {}
            for _, f in ipairs(recipes.warm_files(py, layout, program)) do
                local name = f.path:match("/__pycache__/([^.]+)%.")
                if name then pycs[name] = true end
            end
            local main = program.run[#program.run]:match("([^/]+)%.py$")
            assert.is_nil(pycs[main], main)
            assert.is_true(pycs.sitecustomize and pycs.llmbox_preload, main)
        end
    end)
end)
