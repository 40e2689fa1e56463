-- What the command line shows: the program's output as it streams, llmbox's own messages, and
-- results as JSON or files.
--
-- Streamed output goes to file descriptors 1 and 2 with write(2), not through Lua's buffered
-- io.stdout: each chunk the supervisor hands on (whole lines where it can, see LINE_WAIT_MS in
-- runtime/supervisor.c) is written as pieces of whole lines of at most PIPE_BUF bytes, which a
-- pipe takes atomically, so parallel runs writing to one pipe never split each other's lines.
local ffi = require "ffi"
local util = require "llmbox.util"

local io, ipairs, tostring, format = io, ipairs, tostring, string.format
local C = ffi.C

pcall(ffi.cdef, "long write(int fd, const void *buf, size_t count);")
pcall(ffi.cdef, "char *strerror(int errnum);")
pcall(ffi.cdef, "void *memchr(const void *s, int c, size_t n);")
pcall(ffi.cdef, "void *memrchr(const void *s, int c, size_t n);")
pcall(ffi.cdef, "long readlink(const char *path, char *buf, size_t size);")
pcall(ffi.cdef, "struct pollfd { int fd; short events; short revents; };")
pcall(ffi.cdef, "int poll(struct pollfd *fds, unsigned long nfds, int timeout);")

local _M = { _VERSION = "0.1.0" }

local PIPE_BUF = 4096 -- POSIX: a write of at most this many bytes to a pipe is not interleaved
local EINTR, EAGAIN, POLLOUT = 4, 11, 4
local NEWLINE = 10

local pollfd = ffi.typeof("struct pollfd[1]")

-- Writes len bytes from p to fd, retrying after signals and on a non-blocking descriptor.
local function write_all(fd, p, len)
    while len > 0 do
        local n = tonumber(C.write(fd, p, len))
        if n >= 0 then
            p, len = p + n, len - n
        else
            local e = ffi.errno()
            if e == EAGAIN then
                local pf = pollfd({ { fd = fd, events = POLLOUT } })
                C.poll(pf, 1, -1)
            elseif e ~= EINTR then
                error(format("writing to file descriptor %d: %s", fd, ffi.string(C.strerror(e))), 0)
            end
        end
    end
end

-- Writes s in pieces that each end at a newline and hold at most PIPE_BUF bytes; a line longer
-- than that goes out on its own (no atomicity is possible for it anyway).
local function write_lines(fd, s)
    local base = ffi.cast("const char *", s)
    local off, len = 0, #s
    while off < len do
        local n = len - off
        if n > PIPE_BUF then
            local nl = C.memrchr(base + off, NEWLINE, PIPE_BUF)
            if nl ~= nil then
                n = ffi.cast("const char *", nl) - (base + off) + 1
            else
                nl = C.memchr(base + off + PIPE_BUF, NEWLINE, len - off - PIPE_BUF)
                if nl ~= nil then n = ffi.cast("const char *", nl) - (base + off) + 1 end
            end
            n = tonumber(n)
        end
        write_all(fd, base + off, n)
        off = off + n
    end
end

local function fd_target(fd)
    local buf = ffi.new("char[?]", 4096)
    local n = tonumber(C.readlink("/proc/self/fd/" .. fd, buf, 4096))
    return n > 0 and ffi.string(buf, n) or nil
end

--- output.terminal() -> t: streams a run's output and says llmbox's messages after it.
--- t.on_stdout, t.on_stderr: the run's callbacks; t:message(text): "llmbox: text" on standard
--- error, starting on a line of its own.
function _M.terminal()
    local t = { last = {} } -- fd -> its last byte written; t.last_fd: the fd written last
    -- On a terminal (or `>file 2>&1`) both streams land in one place: a message then follows
    -- whichever was written last. Apart, only what standard error showed matters.
    local out = fd_target(1)
    t.shared = out ~= nil and out == fd_target(2)
    local function writer(fd)
        return function(chunk)
            if chunk == "" then return end
            write_lines(fd, chunk)
            t.last[fd] = chunk:byte(-1)
            t.last_fd = fd
        end
    end
    t.on_stdout, t.on_stderr = writer(1), writer(2)
    function t:message(text)
        local fd = self.shared and self.last_fd or 2
        local open_line = self.last[fd] and self.last[fd] ~= NEWLINE
        self.on_stderr((open_line and "\n" or "") .. "llmbox: " .. text .. "\n")
    end
    return t
end

--- output.result_json(r) -> text: a run's result as every door shows it (llmbox.render), so
--- scripts read the CLI's and the MCP tools' results the same way.
_M.result_json = require("llmbox.render").json

local LIMITS = {
    timeout = "wall-clock timeout (%s s)", cpu = "CPU time limit (%s s)",
    memory = "memory limit (%s)", processes = "process limit (%s)",
    output = "output limit (%s)", file_size = "file size limit (%s)",
}
local SIZES = { memory = true, output = true, file_size = true }

--- output.limit_message(r) -> "the run was stopped: ... reached"
function _M.limit_message(r)
    local shown = r.limit_value
    if shown and SIZES[r.limit] then shown = util.human_size(shown) end
    local what = LIMITS[r.limit] or r.limit
    -- (a server's result does not say the limit's value)
    what = shown and format(what, tostring(shown)) or (what:gsub(" %(%%s s%)$", ""):gsub(" %(%%s%)$", ""))
    return format("the run was stopped: %s reached", what)
end

-- Plotly's HTML loads plotly.js from its CDN (see README "Plots"). Files saved for a person may
-- be opened offline: they load it from a copy beside them instead, when the host has the same
-- version (the sandbox runs the host's python3-plotly, so it has).
local PLOTLY_JS = { "/usr/share/python3-plotly/plotly.js" }

local function host_plotly(version)
    for _, path in ipairs(PLOTLY_JS) do
        local f = io.open(path, "rb")
        if f then
            local head = f:read(200) or ""
            if head:match("plotly%.js v(%d+%.%d+%.%d+)") == version then
                f:seek("set")
                local data = f:read("*a")
                f:close()
                return data
            end
            f:close()
        end
    end
end

local function write_file(path, data)
    local f, err = io.open(path, "wb")
    if not f then return nil, "cannot write " .. tostring(err) end
    local ok, werr = f:write(data)
    f:close()
    if not ok then return nil, "cannot write " .. path .. ": " .. tostring(werr) end
    return true
end

local CDN_TAG = '<script src="https://cdn%.plot%.ly/plotly%-(%d+%.%d+%.%d+)%.min%.js"'

--- output.save_plots(plots, dir, say) -> true | nil, err: DIR/plot-1.png, plot-2.html, ...; calls
--- say(text) for each file written.
function _M.save_plots(plots, dir, say)
    local ok, err, code = require("luv").fs_mkdir(dir, tonumber("755", 8))
    if not ok and code ~= "EEXIST" then return nil, "cannot create " .. dir .. ": " .. tostring(err) end
    local local_js = {} -- version -> file name beside the plots, or false when the host has none
    for i, p in ipairs(plots) do
        local data = p.data
        local version = p.format == "html" and data:match(CDN_TAG)
        if version and local_js[version] == nil then
            local js, name = host_plotly(version), "plotly-" .. version .. ".js"
            local_js[version] = false
            if js then
                local wok, werr = write_file(dir .. "/" .. name, js)
                if not wok then return nil, werr end
                say("saved " .. dir .. "/" .. name .. " (the Plotly plots load it from there)")
                local_js[version] = name
            end
        end
        if version and local_js[version] then
            data = data:gsub(CDN_TAG, '<script src="' .. local_js[version] .. '"', 1)
        end
        local path = ("%s/plot-%d.%s"):format(dir, i, p.format)
        local wok, werr = write_file(path, data)
        if not wok then return nil, werr end
        say("saved " .. path)
    end
    return true
end

return _M
