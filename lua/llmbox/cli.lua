-- The command line. Exit codes (documented in the README and --help):
--   the program's own exit status (128 + N when it died from signal N),
--   124  the wall-clock timeout fired,
--   125  llmbox itself failed: bad usage, bad policy, or the sandbox could not be created,
--   126  the code was refused by an enforcing policy check (run), or is unsafe (check: 1).
local json = require "llmbox.json"
local cli_args = require "llmbox.cli.args"
local output = require "llmbox.cli.output"

local io, ipairs, tostring, tonumber = io, ipairs, tostring, tonumber
local format, concat = string.format, table.concat
local util = require "llmbox.util"
local now_ms = util.now_ms

local _M = { _VERSION = "0.1.0" }

local EXIT_TIMEOUT, EXIT_FAILURE, EXIT_REFUSED = 124, 125, 126

local USAGE = [[
Usage: llmbox COMMAND [OPTIONS]

Run code that language models write, in a sandbox you control with Lua policies.

Commands:
  run [-l LANG] [-b BACKEND] [-p POLICY] [-t SECONDS] [-i] [-q] [--json] [--save-plots DIR]
      [--libraries PKG,...] [--server ADDR] [--timings] (-c CODE | FILE | -) [-- ARGS...]
                     run code in a fresh sandbox; exit status is the program's
  exec [-b BACKEND] [-p POLICY] [-t SECONDS] [-i] [-q] [--json] -- CMD [ARGS...]
                     run a command in a fresh sandbox
  check [-p POLICY] [-l LANG] [--json] (-c CODE | FILE | -)
                     apply the policy's code checks; exit 0 if safe, 1 if not
  langs [--json]     list the languages and their versions
  policies [--json]  list the security policies
  backends [--json]  list the sandbox backends: status, usable here or why not, capabilities,
                     and where the workspace, code and plots are inside their sandboxes
  script FILE.lua [ARGS...]
                     run an operator's Lua script with `llmbox` loaded and `arg` set
  repl [-l LANG] [-b BACKEND] [--image IMAGE] [-p POLICY] [-t SECONDS] [--json] [-q]
                     an interactive session: one interpreter, cells from the terminal
                     (">>> ") or from stdin (separated by "# %%" lines); each cell's value
                     is printed after its output
  doctor [--json]    what this host supports and how to fix what is missing
  serve [--listen unix:/path | HOST:PORT]... [--config FILE]
                     the daemon: HTTP/JSON on a unix socket (default /run/llmbox/llmbox.sock
                     as root, else $XDG_RUNTIME_DIR/llmbox.sock) or TCP (with the config
                     file's tokens); see the README
  mcp                serve the Model Context Protocol on stdio (configured by environment
                     variables: BACKEND, SANDBOX_*, LLMBOX_POLICY; see the README)
  tools [--format mcp|openai|anthropic]
                     print the agent tools' schemas as JSON (default: mcp)
  help, --help       this text;  --version  the version

Options:
  -l, --lang LANG       language (default: from FILE's extension, else python)
  -b, --backend NAME    sandbox backend (default: $LLMBOX_BACKEND, else native; see backends)
  --image IMAGE         the image to run in, for backends that run images (default:
                        $LLMBOX_IMAGE, else the language's own); on native and bubblewrap,
                        dir:DIR, docker-archive:PATH, oci:DIR or oci-archive:PATH runs
                        that root filesystem (an image, unpacked once) instead of /usr
  --pull WHEN           missing (default: pull the image when the engine lacks it, with the
                        engine's progress on stderr), never, or always
  --dockerfile PATH     build the image from PATH (its directory is the build context; the
                        steps get no network) and run in it; removed afterwards unless
                        --image names it
  --keep                keep the container after the run (its workspace stays); its id is
                        printed on stderr (in "container" with --json)
  --container ID        run in a container kept with --keep (same policy and options)
  --remove              with --container: remove the container after the run
  --commit IMAGE        after the run, save the container as IMAGE (name:tag): its image with
                        the workspace as the run left it
  --server ADDR         run: send the run to `llmbox serve` at unix:/path or HOST:PORT
                        (default: $LLMBOX_SERVER; the token: $LLMBOX_TOKEN); same output
                        and exit status
  -p, --policy POLICY   policy name (policies/NAME.lua) or path to a policy file
                        (default: $LLMBOX_POLICY or "default")
  -t, --timeout SECS    wall-clock limit in decimal seconds (5, 0.5), at most the policy's
  -i, --stdin           pass llmbox's standard input to the program (else it reads /dev/null)
  -c, --code CODE       the code to run (not empty; else FILE, or - for standard input)
  --libraries PKG,...   install these packages into the sandbox first (pip, npm, gem, R),
                        where the policy allows installs; repeatable. A comma followed by a
                        version operator stays in the requirement: "numpy>=1,<2"
  --json                print one JSON object: exit_code, stdout, stderr, timed_out, limit,
                        duration_ms, truncated, signal, phase (install/compile when that step
                        failed, else null), cpu_ms, plots (base64 PNG/SVG/HTML), warnings
  --save-plots DIR      write the run's plots to DIR/plot-N.png (or .svg, .html)
  -q, --quiet           do not print the reason when a limit fires
  --timings             say where the time went (ms per stage: load, recipe, policy, admit,
                        open, run and the program's part of it, close) on stderr, or in
                        "timings" with --json

Exit status: the program's (128+N if killed by signal N; the compiler's or installer's
when that step failed); 124 timeout; 125 llmbox or sandbox failure (including usage
errors); 126 refused by the policy's code checks.
]]

local function die(msg, code, term)
    if term then
        term:message(msg)
    else
        io.stderr:write("llmbox: ", msg, "\n")
    end
    return code or EXIT_FAILURE
end

local RUN_SPEC = {
    ["-l"] = "lang", ["--lang"] = "lang", ["-b"] = "backend", ["--backend"] = "backend",
    ["--image"] = "image", ["--pull"] = "pull", ["--dockerfile"] = "dockerfile",
    ["--keep"] = { flag = "keep" }, ["--container"] = "container", ["--remove"] = { flag = "remove" },
    ["--commit"] = "commit", ["--server"] = "server",
    ["-p"] = "policy", ["--policy"] = "policy", ["-t"] = "timeout", ["--timeout"] = "timeout",
    ["-c"] = "code", ["--code"] = "code", ["--json"] = { flag = "json" },
    ["-i"] = { flag = "stdin" }, ["--stdin"] = { flag = "stdin" },
    ["-q"] = { flag = "quiet" }, ["--quiet"] = { flag = "quiet" },
    ["--save-plots"] = "save_plots", ["--libraries"] = { list = "libraries" },
    ["--timings"] = { flag = "timings" },
    _stop_at_positional = true,
}

local EXEC_SPEC = {
    ["-b"] = "backend", ["--backend"] = "backend", ["--image"] = "image", ["--pull"] = "pull",
    ["--dockerfile"] = "dockerfile", ["-p"] = "policy", ["--policy"] = "policy",
    ["--keep"] = { flag = "keep" }, ["--container"] = "container", ["--remove"] = { flag = "remove" },
    ["--commit"] = "commit",
    ["-t"] = "timeout", ["--timeout"] = "timeout", ["--json"] = { flag = "json" },
    ["-i"] = { flag = "stdin" }, ["--stdin"] = { flag = "stdin" },
    ["-q"] = { flag = "quiet" }, ["--quiet"] = { flag = "quiet" },
}

local CHECK_SPEC = {
    ["-l"] = "lang", ["--lang"] = "lang", ["-p"] = "policy", ["--policy"] = "policy",
    ["-c"] = "code", ["--code"] = "code", ["--json"] = { flag = "json" },
}

-- --pull, and the engine's progress on stderr while an image is pulled (one line per layer and
-- state, not every byte's): for backends that run images; nil for the others.
local function image_pull(opts)
    local backends = require "llmbox.backends"
    local driver = backends.get(opts.backend or backends.default())
    if not (driver and driver.capabilities.images) then return opts.pull, nil end
    local last = {}
    return opts.pull, function(doc)
        if doc.stream then -- a build's output
            if doc.stream:find("%S") then io.stderr:write("llmbox: building: ", (doc.stream:gsub("\n$", "")), "\n") end
            return
        end
        local id, status = doc.id or "", doc.status or ""
        if last[id] == status then return end
        last[id] = status
        io.stderr:write(("llmbox: pulling: %s%s\n"):format(id ~= "" and id .. ": " or "", status))
    end
end

-- The run's options shared by run and exec; `term` streams the output (nil with --json).
local function run_opts(opts, timeout, term)
    local o = { timeout = timeout }
    if term then o.on_stdout, o.on_stderr = term.on_stdout, term.on_stderr end
    if opts.stdin then o.stdin = io.stdin:read("*a") or "" end
    return o
end

-- Shared by run and exec: shows what the run left to show and maps it to an exit status.
local function finish(r, opts, term)
    local status = r.timed_out and EXIT_TIMEOUT or r.exit_code
    if opts.save_plots and r.plots then
        local ok, err = output.save_plots(r.plots, opts.save_plots, function(text) die(text, nil, term) end)
        if not ok then return die(err, EXIT_FAILURE, term) end
    end
    if opts.json then
        io.stdout:write(output.result_json(r), "\n")
        return r.commit_error and EXIT_FAILURE or status
    end
    if r.container then
        term:message(format("kept container %s (run in it again with --container %s; --remove removes it)",
            r.container, r.container))
    end
    if r.committed then term:message("committed the container as " .. r.committed) end
    if r.commit_error then
        term:message(r.commit_error)
        return EXIT_FAILURE
    end
    if r.phase == "install" then
        -- an install's output is not streamed (it is not the program's): on failure, it says why
        term.on_stderr(r.stdout)
        term.on_stderr(r.stderr)
    end
    if r.limit and not opts.quiet then term:message(output.limit_message(r)) end
    if r.warnings then
        term:message("warning: " .. require("llmbox").describe_violations({ violations = r.warnings }))
    end
    if r.phase == "install" then
        term:message(format("installing the libraries failed (exit %d); the code did not run", status))
    end
    return status
end

-- --timings: the stages llmbox.run timed, the program's own part of the run, and the time since
-- main() began (started_ms, CLOCK_MONOTONIC, from runtime/main.c: the process's start before it is
-- not visible from inside, but a caller measuring from outside can subtract it)
local function timings_done(t, r, started_ms, term)
    t.program = r.duration_ms
    if started_ms then t.total, t.main_started_ms = now_ms() - started_ms, started_ms end
    -- this process's peak resident memory (the program's is not in it), KiB
    local status = util.read_file("/proc/self/status") or ""
    t.peak_rss_kib = tonumber(status:match("VmHWM:%s*(%d+) kB"))
    for k, v in pairs(t) do t[k] = math.floor(v * 1000 + 0.5) / 1000 end
    if term then
        local out = {}
        for _, k in ipairs({ "load", unpack(require("llmbox").RUN_STAGES) }) do
            if t[k] then
                out[#out + 1] = format("%s %.1f", k, t[k]) .. (k == "run" and format(" (program %.1f)", t.program) or "")
            end
        end
        out[#out + 1] = t.total and format("total %.1f", t.total) or nil
        term:message("timings (ms): " .. concat(out, ", "))
    end
    return t
end

function _M.run(argv)
    -- (llmbox and the recipes are loaded only where needed: a run sent to a daemon needs neither)
    local opts, pos = cli_args.parse(argv, RUN_SPEC)
    if not opts then return die(pos .. " (see llmbox --help)") end
    local timeout, terr = cli_args.timeout(opts.timeout)
    if terr then return die(terr) end
    local libraries, lerr = cli_args.libraries(opts.libraries)
    if lerr then return die(lerr) end
    local code, err = cli_args.code(opts, pos)
    if not code then return die(err) end
    local lang = opts.lang
    if not lang and pos[1] and pos[1] ~= "-" then
        local r, rerr = require("llmbox.recipes").for_file(pos[1])
        if not r then return die(rerr) end
        lang = r.name
    end
    local term = not opts.json and output.terminal() or nil
    local server = opts.server or os.getenv("LLMBOX_SERVER")
    if server and server ~= "" then return _M.run_remote(server, opts, code, lang, libraries, timeout, term) end
    local o = run_opts(opts, timeout, term)
    o.args, o.libraries = opts.rest, libraries
    o.lang, o.policy, o.backend, o.image = lang or "python", opts.policy, opts.backend, opts.image
    o.pull, o.on_progress = image_pull(opts)
    o.dockerfile = opts.dockerfile
    o.keep, o.container, o.remove, o.commit = opts.keep, opts.container, opts.remove, opts.commit
    if opts.remove and not opts.container then return die("--remove goes with --container ID") end
    local llmbox = require "llmbox"
    if opts.timings then o.timings = { load = argv.started_ms and now_ms() - argv.started_ms } end
    -- llmbox.run admits the code before it creates the sandbox: refused code costs none
    local r, rerr, report = llmbox.run(code, o)
    if r and o.timings then r.timings = timings_done(o.timings, r, argv.started_ms, term) end
    if not r then
        if report and opts.json then
            io.stdout:write(json.encode({ refused = true, error = rerr, violations = report.violations }), "\n")
        end
        return die(rerr, report and EXIT_REFUSED or EXIT_FAILURE, term)
    end
    return finish(r, opts, term)
end

-- `llmbox run --server ADDR`: the same run, made by a daemon (llmbox.cli.remote)
function _M.run_remote(server, opts, code, lang, libraries, timeout, term)
    local remote = require "llmbox.cli.remote"
    if opts.timings then
        return die("--timings does not go with --server: the stages happen in the server (time the "
            .. "command from outside, or run it locally)")
    end
    for _, k in ipairs(remote.LOCAL_ONLY) do
        if opts[k] ~= nil then
            return die(format("--%s does not go with --server: the server makes the sandbox (its backend, "
                .. "images and containers are its operator's choice)", k))
        end
    end
    local body = { lang = lang or "python", code = code, args = opts.rest, timeout = timeout, policy = opts.policy,
        libraries = libraries }
    if opts.stdin then body.stdin = io.stdin:read("*a") or "" end
    local r, err, kind, detail = remote.run(server, body, { token = os.getenv("LLMBOX_TOKEN"), timeout = timeout,
        stream = term and { on_stdout = term.on_stdout, on_stderr = term.on_stderr } or nil })
    if r and r.limit == "timeout" then r.limit_value = timeout end
    if not r then
        if kind == "refused" and opts.json then
            io.stdout:write(json.encode({ refused = true, error = err, violations = detail.violations }), "\n")
        end
        return die(err, kind == "refused" and EXIT_REFUSED or EXIT_FAILURE, term)
    end
    return finish(r, opts, term)
end

function _M.exec(argv)
    local session = require "llmbox.session"
    local opts, pos = cli_args.parse(argv, EXEC_SPEC)
    if not opts then return die(pos .. " (see llmbox --help)") end
    local cmd = opts.rest or pos
    if #cmd == 0 then return die("exec needs a command: llmbox exec [OPTIONS] -- CMD [ARGS...]") end
    local timeout, terr = cli_args.timeout(opts.timeout)
    if terr then return die(terr) end
    if opts.remove and not opts.container then return die("--remove goes with --container ID") end
    local pull, on_progress = image_pull(opts)
    local s, err = session.one_shot({ policy = opts.policy, backend = opts.backend, image = opts.image,
        pull = pull, on_progress = on_progress, dockerfile = opts.dockerfile, keep = opts.keep,
        container = opts.container }, opts.commit)
    if not s then return die(err) end
    local term = not opts.json and output.terminal() or nil
    local r, rerr = s:exec(cmd, run_opts(opts, timeout, term))
    session.conclude(s, r, opts)
    if not r then return die(rerr, EXIT_FAILURE, term) end
    return finish(r, opts, term)
end

function _M.check(argv)
    local llmbox = require "llmbox"
    local opts, pos = cli_args.parse(argv, CHECK_SPEC)
    if not opts then return die(pos .. " (see llmbox --help)") end
    local code, err = cli_args.code(opts, pos)
    if not code then return die(err) end
    local lang = opts.lang
    if not lang and pos[1] and pos[1] ~= "-" then
        local r = require("llmbox.recipes").for_file(pos[1])
        lang = r and r.name
    end
    local report
    report, err = llmbox.check(code, { lang = lang or "python", policy = opts.policy })
    if not report then return die(err) end
    if opts.json then
        io.stdout:write(json.encode({
            safe = report.safe, mode = report.mode, blocked = report.blocked,
            violations = setmetatable(report.violations, json.array_mt),
        }), "\n")
    else
        for _, v in ipairs(report.violations) do
            io.stdout:write(format("line %s: %s [%s] %s\n", tostring(v.line or "?"), v.severity, v.rule, v.message or ""))
        end
        io.stdout:write(report.safe and "safe\n" or format("unsafe (policy mode: %s)\n", report.mode))
    end
    return report.safe and 0 or 1
end

function _M.langs(args)
    local llmbox = require "llmbox"
    local as_json = args[1] == "--json"
    if args[1] and not as_json then return die("langs takes only --json") end
    local list = llmbox.langs()
    -- Versions are probed inside one sandbox: what the sandbox runs is what is reported.
    local s = llmbox.session({})
    local out = {}
    for _, r in ipairs(list) do
        local version = json.null
        if s and r.version then
            local res = s:exec(r.version, { timeout = 10 })
            if res and res.exit_code == 0 then
                -- the first line: g++ and others add copyright notices after it
                version = (res.stdout ~= "" and res.stdout or res.stderr):match("^%s*([^\n]-)%s*\n")
                    or (res.stdout ~= "" and res.stdout or res.stderr):gsub("%s+$", "")
            end
        end
        out[#out + 1] = {
            name = r.name, aliases = setmetatable(r.aliases, json.array_mt),
            extensions = setmetatable(r.extensions, json.array_mt),
            version = version, description = r.description, example = r.example or json.null,
            package_manager = r.details.package_manager or json.null,
            preinstalled = setmetatable(r.details.preinstalled or {}, json.array_mt),
            plots = r.plots, libraries = r.install ~= nil, interactive = r.interactive ~= false,
        }
    end
    if s then s:close() end
    if as_json then
        io.stdout:write(json.encode(setmetatable(out, json.array_mt)), "\n")
    else
        for _, r in ipairs(out) do
            io.stdout:write(format("%-10s %-28s %-12s %s\n", r.name,
                r.version ~= json.null and r.version or "(unavailable)", r.interactive and "interactive" or "",
                concat(r.extensions, " ")))
        end
    end
    return 0
end

function _M.policies(args)
    local llmbox = require "llmbox"
    local list = llmbox.policies()
    if args[1] == "--json" then
        io.stdout:write(json.encode(setmetatable(list, json.array_mt)), "\n")
    else
        for _, p in ipairs(list) do
            io.stdout:write(format("%-12s %s\n    %s\n", p.name, p.description or "", p.path))
        end
    end
    return 0
end

function _M.backends(args)
    local as_json = args[1] == "--json"
    if args[1] and not as_json then return die("backends takes only --json") end
    local list = require("llmbox.backends").list()
    if as_json then
        for _, b in ipairs(list) do
            b.aliases = json.array(b.aliases)
            b.capabilities = json.array(b.capabilities)
            if b.why == nil then b.why = json.null end
            if b.layout == nil then b.layout = json.null end
            if b.file == nil then b.file = json.null end
        end
        io.stdout:write(json.encode(json.array(list)), "\n")
        return 0
    end
    for _, b in ipairs(list) do
        local names = #b.aliases > 0 and format("%s (%s)", b.name, concat(b.aliases, ", ")) or b.name
        local state = (b.status == "planned" or b.status == "unavailable" or b.status == "broken") and b.status
            or b.usable and "usable" or "unusable"
        io.stdout:write(format("%-20s %-11s %s\n", names, state, b.description))
        if b.file then io.stdout:write(format("    registered from: %s\n", b.file)) end
        if b.status == "broken" or b.status == "unavailable" then
            io.stdout:write(format("    why not: %s\n", b.why))
        end
        if b.status == "available" or b.status == "registered" then
            if not b.usable then io.stdout:write(format("    why not: %s\n", b.why)) end
            io.stdout:write(format("    capabilities: %s\n", #b.capabilities > 0 and concat(b.capabilities, ", ") or "none"))
            io.stdout:write(format("    layout: workspace %s, code %s, plots %s, tmp %s\n", b.layout.workspace,
                b.layout.code, b.layout.plots, b.layout.tmp))
        end
    end
    return 0
end

function _M.script(args)
    local file = args[1]
    if not file then return die("script needs a FILE.lua") end
    local chunk, err = loadfile(file)
    if not chunk then return die(err) end
    local script_arg = { [0] = file }
    for i = 2, #args do script_arg[i - 1] = args[i] end
    _G.arg = script_arg
    _G.llmbox = require "llmbox"
    local ok, ret = xpcall(function() return chunk(unpack(script_arg)) end, debug.traceback)
    if not ok then return die("script failed: " .. tostring(ret)) end
    io.stdout:flush()
    return tonumber(ret) or 0
end

function _M.tools(args)
    local fmt = "mcp"
    local i = 1
    while args[i] do
        local a = args[i]
        if a == "--format" or a == "-f" then
            fmt = args[i + 1]
            i = i + 2
        elseif a:match("^%-%-format=") then
            fmt = a:match("^%-%-format=(.*)$")
            i = i + 1
        else
            return die("tools takes only --format mcp|openai|anthropic, got " .. a)
        end
    end
    local tools = require "llmbox.mcp.tools"
    local known = false
    for _, f in ipairs(tools.formats) do known = known or f == fmt end
    if not known then
        return die(format("--format must be one of %s, got %s", concat(tools.formats, ", "), tostring(fmt)))
    end
    io.stdout:write(require("llmbox.json").encode(tools.list(fmt)), "\n")
    return 0
end

function _M.main(argv)
    local args = { started_ms = argv.started_ms }
    for i = 1, #argv do args[i] = argv[i] end
    local cmd = table.remove(args, 1)
    if cmd == nil or cmd == "help" or cmd == "--help" or cmd == "-h" then
        io.stdout:write(USAGE)
        return cmd == nil and EXIT_FAILURE or 0
    end
    if cmd == "--version" or cmd == "version" then
        io.stdout:write("llmbox ", require("llmbox.core").VERSION, "\n")
        return 0
    end
    if cmd == "doctor" then return require("llmbox.doctor").main(args) end
    -- the MCP server's child process (llmbox.mcp.worker); not for people, so not in the usage
    if cmd == "worker" then return require("llmbox.mcp.worker").main(args) end
    local handler = ({ run = _M.run, exec = _M.exec, check = _M.check, langs = _M.langs,
        policies = _M.policies, backends = _M.backends, script = _M.script, tools = _M.tools,
        serve = function(a) return require("llmbox.serve").main(a) end,
        repl = function(a) return require("llmbox.cli.repl").main(a, die) end,
        mcp = function(a)
            if a[1] then return die("mcp takes no arguments; it is configured by environment variables (see the README)") end
            return require("llmbox.mcp.server").main()
        end })[cmd]
    if not handler then return die(format("unknown command %q (see llmbox --help)", cmd)) end
    if args[1] == "--help" or args[1] == "-h" then
        io.stdout:write(USAGE)
        return 0
    end
    local ok, ret = pcall(handler, args)
    if not ok then return die(tostring(ret)) end
    return ret
end

return _M
