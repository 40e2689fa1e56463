-- `llmbox repl`: an interactive session (llmbox.interactive) driven from a terminal or stdin.
-- Each cell runs in the same interpreter; its output streams, its value is printed after it
-- (as the interpreter's prompt shows one), and llmbox says when a limit fired or the
-- interpreter's state was lost.
--
-- From a terminal: ">>> " reads a cell; a first line that opens a block (ends with ":" or "\",
-- or leaves a bracket open) goes on with "... " lines until an empty one. From a pipe or file:
-- cells are separated by lines that start with "# %%" (the cell marker of Jupytext, VS Code and
-- Spyder); input without one is a single cell. --json prints each cell's result object, one
-- line each. The exit status is the last cell's.
local cli_args = require "llmbox.cli.args"
local output = require "llmbox.cli.output"

local io, format, concat = io, string.format, table.concat

local _M = { _VERSION = "0.1.0" }

local SPEC = {
    ["-l"] = "lang", ["--lang"] = "lang", ["-b"] = "backend", ["--backend"] = "backend",
    ["--image"] = "image", ["--pull"] = "pull",
    ["-p"] = "policy", ["--policy"] = "policy", ["-t"] = "timeout", ["--timeout"] = "timeout",
    ["--json"] = { flag = "json" }, ["-q"] = { flag = "quiet" }, ["--quiet"] = { flag = "quiet" },
}

-- Does this line leave the cell open (a block, a continuation, an open bracket)?
local function opens(line)
    local depth = 0
    for ch in line:gsub("#.*$", ""):gmatch("[%(%)%[%]{}]") do
        depth = depth + ((ch == "(" or ch == "[" or ch == "{") and 1 or -1)
    end
    return depth > 0 or line:match(":%s*$") ~= nil or line:match("\\$") ~= nil
end

-- Cells from a terminal, one at a time: an iterator.
local function terminal_cells()
    return function()
        io.stderr:write(">>> ")
        local line = io.stdin:read("*l")
        if not line then
            io.stderr:write("\n")
            return nil
        end
        local lines = { line }
        if opens(line) then
            while true do
                io.stderr:write("... ")
                local more = io.stdin:read("*l")
                if not more or more == "" then break end
                lines[#lines + 1] = more
            end
        end
        return concat(lines, "\n")
    end
end

--- repl.split(text) -> { cell, ... }: cells separated by "# %%" lines
function _M.split(text)
    local cells, cur = {}, {}
    local function push()
        local cell = concat(cur, "\n")
        if cell:match("%S") then cells[#cells + 1] = cell end
        cur = {}
    end
    for line in (text .. "\n"):gmatch("(.-)\r?\n") do
        if line:match("^# %%%%") then push() else cur[#cur + 1] = line end
    end
    push()
    return cells
end

local function is_tty()
    local ffi = require "ffi"
    pcall(ffi.cdef, "int isatty(int fd);")
    return ffi.C.isatty(0) == 1
end

--- repl.main(args, die) -> exit status
function _M.main(args, die)
    local opts, pos = cli_args.parse(args, SPEC)
    if not opts then
        return die(pos .. " (llmbox repl [-l LANG] [-b BACKEND] [--image IMAGE] [-p POLICY] [-t SECONDS] [--json] [-q])")
    end
    if #pos > 0 then return die(format("repl: unexpected argument %q: cells come from the terminal or stdin", pos[1])) end
    local timeout, terr = cli_args.timeout(opts.timeout)
    if terr then return die(terr) end
    local llmbox = require "llmbox"
    local s, err = llmbox.session({ lang = opts.lang or "python", policy = opts.policy, backend = opts.backend,
        image = opts.image, pull = opts.pull, interactive = true })
    if not s then return die(err) end
    local tty = is_tty()
    local next_cell
    if tty then
        next_cell = terminal_cells()
    else
        local list, i = _M.split(io.stdin:read("*a") or ""), 0
        next_cell = function()
            i = i + 1
            return list[i]
        end
    end
    local term = not opts.json and output.terminal() or nil
    local status = 0
    for code in next_cell do
        local r, rerr, report = s:run(code, { timeout = timeout, on_stdout = term and term.on_stdout,
            on_stderr = term and term.on_stderr })
        if not r then
            if report then rerr = rerr .. ": " .. llmbox.describe_violations(report) end
            if opts.json then
                io.stdout:write(require("llmbox.json").encode({ error = rerr, refused = report ~= nil }), "\n")
            else
                term:message(rerr)
            end
            status = report and 126 or 125
        else
            status = r.timed_out and 124 or r.exit_code
            if opts.json then
                io.stdout:write(output.result_json(r), "\n")
            else
                if r.value then term.on_stdout(r.value .. "\n") end
                if r.limit and not opts.quiet then term:message(output.limit_message(r)) end
                if r.state_lost then
                    term:message("the interpreter was ended: its state is gone; the next cell starts a fresh one")
                end
                if r.plots and #r.plots > 0 and not opts.quiet then
                    term:message(format("the cell made %d plot%s (llmbox run --save-plots keeps them; here, "
                        .. "--json has them)", #r.plots, #r.plots == 1 and "" or "s"))
                end
            end
        end
        io.stdout:flush()
    end
    s:close()
    return status
end

return _M
