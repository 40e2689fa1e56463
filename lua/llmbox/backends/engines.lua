-- The docker and podman drivers: a session is one container made from the neutral sandbox spec
-- (llmbox.backends.container), a run is an exec in it (llmbox.engine). The HTTP, the streams and
-- the archives are the C core's (runtime/http.c, transfer.c); this file says which calls to
-- make, in which order.
--
-- A run is one exec of a small shell wrapper, root's, that drops to the sandbox user through
-- llmbox's static helper (backends/container_exec.c, placed at open in root's private tmpfs;
-- else util-linux's setpriv; else the wrapper is the sandbox user's): it unpacks the run's files
-- (an archive core.tar_pack made, sent on stdin after the run's nonce) and the program's stdin
-- as a file, removes what the run cleans, sets the rlimits (cpu, open files, file size), runs
-- the program and, once it has ended, kills whatever it left behind and writes the run's report
-- line (TRAILER_PREFIX: the cgroup counts, the helper's peak memory and CPU time). Memory,
-- processes and CPU share are the container's cgroup's, set for each run (Handle:fit). The
-- client holds the wall clock and the output cap; when either fires, the container's keeper
-- kills every process but init and itself (Handle:sweep): the Docker API cannot kill an exec.
-- Pools' warm starts keep an exec of the wrapper open (its warm mode, Handle:prestart).
--
-- A session commits to an image (Handle:commit: the workspace as an archive in the image,
-- unpacked at open and reset), and a container kept past its session (keep) is attached to
-- by id (attach), under the settings it was made with.
--
-- Not built yet (the docker/podman issue says what is missing): installs that need a network
-- (offline sources work: they are mounted read-only), attaching to a container llmbox did not
-- make; what is refused says so.
local container = require "llmbox.backends.container"
local images = require "llmbox.backends.images"
local cells = require "llmbox.backends.engine_cells"
local task = require "llmbox.task"
local engine = require "llmbox.engine"
local core = require "llmbox.core"
local util = require "llmbox.util"
local json = require "llmbox.json"
local ffi = require "ffi"

pcall(ffi.cdef, "int getpid(void);")

local setmetatable, tostring, format, floor, min = setmetatable, tostring, string.format, math.floor, math.min

local _M = {}

-- Where llmbox's helper lives in a container (root's private tmpfs, container.PRIVATE).
local HELPER = container.PRIVATE .. "/exec"

-- The open's one exec, root's (whose only capabilities are KILL, SETUID and SETGID). An image
-- with its own /sandbox or /tmp gives the tmpfs there that directory's mode: the sandbox user
-- must be able to write both. Places llmbox's helper ($1 = "helper": an archive on stdin) and
-- checks that it drops to the sandbox user, else whether util-linux's setpriv can; hands the
-- keeper over to the helper (waking it: the shell's keeper looks for the helper at each tick);
-- prints what it found, "keeper" once the helper keeps, and last the keeper's pid.
local OPEN_PROBE = [[
chmod 1777 /sandbox /tmp 2>/dev/null
# unpacked under another name and renamed once it works: the keeper execs /.llmbox/exec as
# soon as it sees it, and an exec of a file still being written would end the keeper (a
# failed exec ends dash) and the container with it
if [ "$1" = helper ] && tar -x -C / -f - >/dev/null 2>&1 && /.llmbox/exec.part -- true &&
  mv -f /.llmbox/exec.part /.llmbox/exec; then
  echo helper
  read -r k < /proc/1/task/1/children; k=${k%% *}
  i=0
  while [ $i -lt 100 ]; do
    [ "$(readlink /proc/$k/exe)" = /.llmbox/exec ] && { echo keeper; break; }
    # the keeper waits on its FIFO (read -t) or in a sleep: either wakes it now
    [ -p /.llmbox/keeper/wake ] && echo >> /.llmbox/keeper/wake
    for c in $(cat /proc/$k/task/$k/children 2>/dev/null); do kill "$c" 2>/dev/null; done
    i=$((i + 1)); sleep 0.01
  done
elif setpriv --reuid=1000 --regid=1000 --clear-groups --inh-caps=-all true 2>/dev/null; then
  echo setpriv
fi
# a committed image's workspace (Handle:commit), unpacked by the sandbox user next
[ -f /.llmbox-seed/workspace.tar ] && echo seed
exec cat /proc/1/task/1/children
]]

-- How long a run that a refused fork ended gives the keeper (container.KEEPER) to be done.
local KEEPER_SETTLE_MS = 300

-- How long llmbox's own execs (sweeps, collects, resets) may take before they count as failed.
local INTERNAL_MS = 30000

-- The kernel's counts in the container's cgroups: processes the memory ceiling killed (cgroup
-- v1's memory.oom_control, v2's memory.events), forks the pids ceiling refused (pids.events)
-- and the CPU time used (v1's cpuacct.usage in ns, v2's cpu.stat usage_usec), as "name value
-- ..." in $out. Shell builtins only: no process to start, twice per run.
local COUNTERS = [[
counters() {
  out=
  for f in /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events \
      /sys/fs/cgroup/pids/pids.events /sys/fs/cgroup/pids.events /sys/fs/cgroup/cpu.stat; do
    [ -r "$f" ] || continue
    while read -r k v; do out="$out$k $v "; done < "$f"
  done
  for f in /sys/fs/cgroup/cpuacct/cpuacct.usage /sys/fs/cgroup/cpu,cpuacct/cpuacct.usage; do
    if [ -r "$f" ]; then read -r v < "$f"; out="${out}usage_ns $v "; break; fi
  done
}
]]

-- The counts above, parsed: { ooms =, refused =, cpu_ns = } (nil where unknown).
local function parse_counters(text)
    text = text or ""
    local ns = tonumber(text:match("usage_ns (%d+)"))
    local usec = tonumber(text:match("usage_usec (%d+)"))
    return { ooms = tonumber(text:match("oom_kill (%d+)")), refused = tonumber(text:match("max (%d+)")),
        cpu_ns = ns or (usec and usec * 1000) }
end

-- What the wrapper writes on the exec's stderr once the program and everything it left are
-- gone: a line that starts with a NUL, "llmbox:" and the run's nonce, then the counts before
-- and after the program. The client takes it off the output (TrailerFilter); a program cannot
-- forge one without the nonce, which it never sees.
local TRAILER_PREFIX = "\0llmbox:"

-- Holds back what might be the start of the trailer, so that it never reaches a callback:
-- output flows through untouched up to a NUL byte, and from one only once the bytes after it
-- cannot be the marker.
local function trailer_filter(marker)
    local held, trailer = "", nil
    local f = {}
    function f.feed(chunk)
        if trailer then
            trailer = trailer .. chunk
            return ""
        end
        local data = held .. chunk
        held = ""
        local i = data:find("\0", 1, true)
        while i do
            local rest = data:sub(i, i + #marker - 1)
            if rest == marker then
                trailer = data:sub(i)
                return data:sub(1, i - 1)
            elseif #rest < #marker and marker:sub(1, #rest) == rest then
                held = data:sub(i)
                return data:sub(1, i - 1)
            end
            i = data:find("\0", i + 1, true)
        end
        return data
    end
    --- f.peek() -> the trailer's text so far (or nil), leaving everything as it is
    function f.peek()
        return trailer and trailer:sub(#marker + 1)
    end
    --- f.finish() -> what was held back and is output after all, the trailer's text (or nil)
    function f.finish()
        local rest = held
        held = ""
        return rest, trailer and trailer:sub(#marker + 1)
    end
    return f
end

-- The run's wrapper; its stdin is the run's nonce (32 bytes), then the archive of its files.
-- $1: how it drops to the sandbox user: "helper" (llmbox's, which also reports on the program)
-- or "root" (setpriv) when it runs as root: then the program and everything that touches the
-- sandbox's files run as the sandbox user, and the program cannot signal the wrapper (kill(-1)
-- does not end its own run); "user" when it runs as the sandbox user.
-- $2: "cold", "warm" for a pool's prestarted program (below), or "interactive" for an
-- interactive session's interpreter (llmbox.backends.engine_cells), whose archive comes as warm's.
-- $3: the stdin file ("" for none); $4: the directory whose contents the run's report says
-- anything about ("" for none: the plots', so that an empty one costs no collect exec); then the
-- trees to clean, "--", the limits (cpu seconds,
-- open files, file size in 512-byte blocks, data KiB; "-" for none) and the program's argv (an absolute argv[0] the
-- image lacks is looked up on its PATH: the recipes name the host's paths, official images
-- keep some toolchains in /usr/local/bin).
--
-- Warm: the archive's length comes first (12 decimal digits), so that stdin stays open after
-- it. The program starts at once with its fd 3 (the request) and stdin on FIFOs only this
-- root wrapper can open, in a directory mktemp made; the wrapper says "ready" on stdout
-- (WARM_READY and the nonce) and waits. A lease's first run sends the request's length (12
-- digits), the request (see llmbox.warm), then the program's stdin up to EOF. Nothing on stdin
-- (the pool dropped the program) ends it.
local WRAPPER = COUNTERS .. [[
drop= run= rus= filt= private=
case $1 in
helper) drop="/.llmbox/exec --" run="/.llmbox/exec --report 8 --" private=1 ;;
root) drop="setpriv --reuid=1000 --regid=1000 --clear-groups --inh-caps=-all --" run=$drop private=1 ;;
# a pod's (llmbox.backends.kubernetes): llmbox's helpers are in a read-only volume at
# /.llmbox, but the wrapper is the sandbox user's, with no private place; the program starts
# under the policy's syscall filter, loaded by /.llmbox/filter (the filter itself, in hex,
# comes in the pod's environment, which the wrapper drops)
pod) drop="/.llmbox/exec --" run=$drop filt=$LLMBOX_FILTER_BPF
  unset LLMBOX_FILTER_BPF
  [ -n "$filt" ] || { echo "llmbox: the pod has no syscall filter" >&2; exit 125; } ;;
esac
mode=$2; in=$3; probe=$4; shift 4
fail() { echo "llmbox: $1" >&2; exit 125; }
# one byte at a time, so that nothing of the archive behind it is taken (busybox's read takes
# a block from a pipe)
nonce=$(dd bs=1 count=32 2>/dev/null)
if [ "$mode" != cold ]; then
  n=$(dd bs=1 count=12 2>/dev/null)
  # head -c takes exactly n bytes; what tar leaves of them is drained, not left for the request
  head -c "$n" | { $drop tar -x -C / -f - >/dev/null; r=$?; cat >/dev/null; exit $r; } ||
    fail "placing the run's files failed"
else
  $drop tar -x -C / -f - >/dev/null || fail "placing the run's files failed"
fi
while [ "$1" != -- ]; do $drop rm -rf -- "$1"; shift; done; shift
[ "$1" = - ] || { ulimit -t $(($1 + 1)) && ulimit -S -t "$1"; }; [ "$2" = - ] || ulimit -n "$2"
[ "$3" = - ] || ulimit -f "$3"; [ "$4" = - ] || ulimit -d "$4"
shift 4
case $1 in /*)
  if [ ! -x "$1" ]; then
    p=$(command -v "${1##*/}") ||
      { echo "llmbox: $1 is not in this image, nor ${1##*/} on its PATH: use an image with it (--image)" >&2; exit 127; }
    shift; set -- "$p" "$@"
  fi ;;
esac
[ -z "$filt" ] || set -- /.llmbox/filter "$filt" -- "$@"
# where a stopped run's counts are read from, and a warm program's channel is made: root's
# private tmpfs (container.PRIVATE) when the wrapper is root's, out of the program's sight
b=/tmp/llmbox/.before w=/tmp/llmbox; [ -z "$private" ] || b=/.llmbox/before w=/.llmbox
# (a wrapper that is the program's own user keeps none: the program could read or forge it, and
# a pod has no place it cannot see)
keep_before() { [ -z "$private" ] || printf '%s\n' "$before" > "$b" 2>/dev/null; }
$drop mkdir -p /tmp/llmbox 2>/dev/null
# the program gets the exec's stderr (fd 6 here); the wrapper's own goes nowhere (sh reports a
# job killed by a signal, "Killed", which is not the program's output)
exec 6>&2
# the helper's report on the program (peak memory, CPU time) comes on fd 8, into a file of
# this wrapper's own (a pool's warm program holds its own until its run)
# (reports a stopped run's wrapper left are removed; no open failure ends the run)
rf=
if [ -n "$run" ] && [ "$run" != "$drop" ]; then
  for f in /.llmbox/rusage.*; do
    [ -e "$f" ] && ! kill -0 "${f##*.}" 2>/dev/null && rm -f "$f"
  done
  rf=/.llmbox/rusage.$$
  { command exec 8>"$rf"; } 2>/dev/null || { rf= run=$drop; }
fi
if [ "$mode" = warm ]; then
  d=$(mktemp -d "$w/.warm.XXXXXX") && mkfifo -m 600 "$d/req" "$d/in" || fail "making the warm channel failed"
  $run "$@" 2>&6 3<"$d/req" <"$d/in" 6>&- &
  pid=$!
  exec 4>"$d/req" 5>"$d/in"
  rm -rf "$d"
  exec 2>/dev/null
  printf '\000llmbox-ready:%s\n' "$nonce"
  n=$(dd bs=1 count=12 2>/dev/null)
  case $n in
  [0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9])
    counters; before=$out; keep_before
    head -c "$n" >&4; exec 4>&-
    # (an asynchronous command's stdin would be /dev/null: the exec's is handed over as fd 7)
    exec 7<&0
    cat <&7 >&5 6>&- 7<&- &
    exec 5>&- ;;
  *) # dropped: the program (which has run no code, so has no children) goes alone; a
     # sweep here would end the session's next run
    kill -9 $pid; wait $pid; [ -z "$rf" ] || rm -f "$rf"; exit 0 ;;
  esac
elif [ "$mode" = interactive ]; then
  # the helper carries the program's control channel over this exec's streams (its --cells),
  # framed with the nonce, which it reads on fd 9
  [ "${drop#/.llmbox/exec}" != "$drop" ] ||
    fail "an interactive program needs llmbox's helper in the container"
  counters; before=$out; keep_before
  exec 7<&0
  ${run%--}--cells 9 -- "$@" <&7 2>&6 6>&- 7<&- 9<<EOF &
$nonce
EOF
  pid=$!
  exec 7<&- 2>/dev/null
else
  counters; before=$out; keep_before
  $run "$@" < "${in:-/dev/null}" 2>&6 6>&- &
  pid=$!
  exec 2>/dev/null
fi
exec 8>&-
wait $pid
rc=$?
[ -z "$rf" ] || { read -r rus < "$rf"; rm -f "$rf"; }
sweep='i=0; while kill -0 -1 2>/dev/null && [ $i -lt 50 ]; do kill -9 -1 2>/dev/null; i=$((i + 1)); done'
# (llmbox's helper spares an interactive session's interpreter, which outlives the runs beside it)
if [ "${drop#/.llmbox/exec}" != "$drop" ]; then /.llmbox/exec --sweep
elif [ -n "$drop" ]; then $drop /bin/sh -c "$sweep"; else eval "$sweep"; fi
# SysV IPC outlives processes: what the run made goes with it (util-linux's ipcrm, where the
# image has it; native gives each run an IPC namespace of its own)
ipc=
for f in /proc/sysvipc/shm /proc/sysvipc/sem /proc/sysvipc/msg; do
  { read -r _ && read -r _ && ipc=1; } < "$f" 2>/dev/null
done
[ -z "$ipc" ] || $drop ipcrm -a 2>/dev/null
counters
# the probe: 1 when the directory holds anything, 0 when it is empty or absent, - when it
# cannot be read (then the client looks itself)
pf=-
if [ -n "$probe" ]; then
  if [ ! -e "$probe" ]; then pf=0
  elif [ -d "$probe" ] && [ -r "$probe" ] && [ -x "$probe" ]; then
    pf=0
    for f in "$probe"/* "$probe"/.[!.]* "$probe"/..?*; do
      if [ -e "$f" ] || [ -L "$f" ]; then pf=1; break; fi
    done
  fi
fi
printf '\000llmbox:%s %s== %s## %s probe=%s rc=%s\n' "$nonce" "$before" "$out" "$rus" "$pf" "$rc" >&6
exit $rc
]]

-- What the warm wrapper writes on stdout once its program waits for the request, before the nonce.
local WARM_READY = "\0llmbox-ready:"

-- The largest stdin a warm run takes: it goes down the exec with the request before any output
-- is read, so it must fit the pipes on the way (a larger one starts the run cold).
local WARM_STDIN_MAX = 64 * 1024

-- (reset's) Kills every process of the sandbox user but itself: kill(-1) reaches every process its user
-- may signal, all at once, so a fork bomb cannot outrun it; init and the keeper are root's,
-- and without CAP_KILL out of reach. Rounds until nothing is left to signal.
local SWEEP = [[
i=0
while kill -0 -1 2>/dev/null && [ $i -lt 50 ]; do kill -9 -1 2>/dev/null; i=$((i + 1)); done
exit 0
]]



-- A copy's path in the container: relative ones are the workspace's, as on native; a ".."
-- component could leave the directory the caller checked, so none is taken.
local function container_path(path, what)
    if path == "" or path:find("%z") then return nil, what .. ": expected a path", "EINVAL" end
    for part in path:gmatch("[^/]+") do
        if part == ".." then return nil, format("%s: %s has a .. component", what, path), "EINVAL" end
    end
    if path:sub(1, 1) ~= "/" then path = container.layout.workspace .. "/" .. path end
    path = path:gsub("/%./", "/"):gsub("/+", "/"):gsub("/%.?$", "")
    return path ~= "" and path or "/"
end

-- The start of every copy's script in the container: no component of $target may be a symlink
-- (as on native; the copy runs as the sandbox user, so a link swapped in afterwards reaches
-- nothing the program could not read itself, and the host side takes no links at all).
local NO_LINKS = [[
# what a refused copy was sent is read anyway: Podman reports an exec that left its stdin
# unread as "connection reset by peer", in place of the refusal
drain() { cat >/dev/null 2>&1; }
p=; IFS=/
for c in $target; do
  [ -n "$c" ] || continue
  p="$p/$c"
  if [ -L "$p" ]; then echo "$p is a symlink: copies do not follow symlinks" >&2; drain; exit 4; fi
done
unset IFS
]]

-- Sends $1/$2 as an archive on stdout; exit 3 when it does not exist.
local SEND = 'target="$1/$2"\n' .. NO_LINKS .. '[ -e "$1/$2" ] || exit 3; exec tar -c -C "$1" -- "$2"\n'

-- Who made a container: this machine's boot id, the pid and its start time (pids are reused).
local function boot_id()
    return ((util.read_file("/proc/sys/kernel/random/boot_id") or "unknown"):gsub("%s", ""))
end

local function start_time(pid)
    local stat = util.read_file("/proc/" .. pid .. "/stat")
    -- the fields after the command name, which may hold spaces and parentheses
    local rest = stat and stat:match("^.*%) (.*)$")
    local fields = {}
    for f in (rest or ""):gmatch("%S+") do fields[#fields + 1] = f end
    return fields[20] -- starttime is field 22 of the whole line
end

local function alive(pid, start)
    return pid ~= nil and start_time(pid) == start
end

local function owner_label()
    local pid = tostring(ffi.C.getpid())
    return format("%s/%s/%s", boot_id(), pid, start_time(pid) or "0")
end

-- A kept container (keep = true) outlives its session and its process; a later session may
-- attach to it by id. Its owner label says "kept" (the maintenance removes none), and its
-- settings are recorded as a digest of its create body, less what differs between two equal
-- requests (the image, the labels): a session attaches only under the settings the container
-- was made with, so no attach ever runs code with less isolation than its policy asks for.
local KEPT = "kept"
local CONFIG_LABEL = "io.llmbox.config"

local function config_digest(spec, kind, local_engine)
    local body, err = container.create_body(spec, { image = "-", kind = kind, local_engine = local_engine })
    if not body then return nil, err end
    body.Labels, body.Image = nil, nil
    return core.sha256(json.encode(body))
end

-- An attach's one exec, root's: what the open found (llmbox's helper, setpriv), and the
-- keeper's pid last, as OPEN_PROBE prints them; the container's files are left as they are.
local ATTACH_PROBE = [[
if [ -x /.llmbox/exec ] && /.llmbox/exec -- true; then echo helper
elif setpriv --reuid=1000 --regid=1000 --clear-groups --inh-caps=-all true 2>/dev/null; then echo setpriv
fi
[ -f /.llmbox-seed/workspace.tar ] && echo seed
exec cat /proc/1/task/1/children
]]

local Handle = {}
Handle.__index = Handle

local image_ref_ok = images.is_reference

-- Stops a run: every process but init and the keeper is killed, but an interactive session's
-- interpreter (llmbox's helper keeps it apart); all: that interpreter too.
function Handle:sweep(all)
    -- the keeper does it (container.KEEPER): no exec, which a full pids ceiling would refuse;
    -- only the helper's keeper takes SIGUSR2 (the shell's would end), and only it has interpreters
    local sig = all and self.drop == "helper" and "SIGUSR2" or "SIGUSR1"
    return self.engine:json("POST", "/containers/" .. self.id .. "/kill?signal=" .. sig)
end

function Handle:update_path()
    return (self.kind == "podman" and "/libpod/containers/" or "/containers/") .. self.id .. "/update"
end

--- handle:start(spec) -> run: a run the caller drives, as native's (run:fds(), run:step(0),
--- run:take() -> { "stdout" | "stderr", data, ... } | nil, run:result()): the run's engine
--- requests and exec stream yield to the caller's loop while they wait (llmbox.task)
function Handle:start(spec)
    local queue = {}
    local s = {}
    for k, v in pairs(spec) do s[k] = v end
    local function queued(stream)
        return function(chunk)
            queue[#queue + 1] = stream
            queue[#queue + 1] = chunk
        end
    end
    s.on_stdout, s.on_stderr = queued("stdout"), queued("stderr")
    local t = task.new(self.run, self, s)
    local run = {}
    function run.fds() return t:fds() end
    function run.step(_, wait_ms) return t:step(wait_ms) end
    function run.take()
        if #queue == 0 then return nil end
        local q = queue
        queue = {}
        return q
    end
    function run.result() return t:result() end
    return run
end

-- The wrapper's argv for a run spec (argv, clean, limits) in mode "cold" or "warm".
function Handle:wrapper_argv(mode, spec, stdin_file)
    local lim = spec.limits or {}
    local argv = { "/bin/sh", "-c", WRAPPER, "llmbox-run", self.drop, mode, stdin_file or "", spec.probe or "" }
    for _, c in ipairs(spec.clean or {}) do argv[#argv + 1] = c end
    argv[#argv + 1] = "--"
    argv[#argv + 1] = lim.cpu and tostring(math.ceil(lim.cpu)) or "-"
    -- (no more than the container's own ceiling, which the engine options may have lowered)
    local nofile = lim.open_files and min(lim.open_files, self.spec.limits.open_files or lim.open_files)
    argv[#argv + 1] = nofile and tostring(floor(nofile)) or "-"
    argv[#argv + 1] = lim.file_size and tostring(floor(lim.file_size / 512)) or "-"
    argv[#argv + 1] = "-" -- memory: the container's ceiling, fitted to the run above
    for _, a in ipairs(spec.argv) do argv[#argv + 1] = a end
    return argv
end

--- handle:run{ argv, env, cwd, stdin, files, clean, limits, on_stdout, on_stderr } -> result
function Handle:run(spec)
    if not self.id then return nil, "session is closed" end
    if spec.install_network then
        -- native gives an install the host's network; no container ever gets it
        return nil, format("the %s backend gives no run a network, and this policy's installs need one "
            .. "(libraries.network = true): install from offline sources here (libraries.sources: find_links, a "
            .. "local R or Ruby repository, which are mounted read-only), or use the native backend", self.kind),
            "EOPNOTSUPP"
    end
    local lim = spec.limits or {}
    -- memory, processes and CPU share are the container's cgroup's: set for this run
    local ok, uerr, ucode = self:fit(lim)
    if not ok then return nil, uerr, ucode end
    -- the run's files, and its stdin as one more, in one archive the wrapper unpacks
    local files = {}
    for i, f in ipairs(spec.files or {}) do files[i] = f end
    -- the trailer's nonce: the first 32 bytes on the exec's stdin, before the archive (a file
    -- could not be written to a full /tmp, an argument or variable the program could read)
    local nonce = util.random_hex(16)
    local stdin_file = ""
    if spec.stdin and #spec.stdin > 0 then
        stdin_file = "/tmp/llmbox/.stdin"
        -- readable by the root wrapper too, which opens it for the program (it has no
        -- CAP_DAC_OVERRIDE); no other user exists in the container
        files[#files + 1] = { path = stdin_file, data = spec.stdin, mode = 420 }
    end
    local archive, err, code = core.tar_pack(files, 1000, 1000)
    if not archive then return nil, err, code end
    local started = util.now_ms()
    local x
    x, err, code = self.engine:exec_start(self.id, {
        argv = self:wrapper_argv("cold", spec, stdin_file), env = spec.env, cwd = spec.cwd,
        user = self.root_wrapper and "0:0" or container.USER, stdin = nonce .. archive,
    })
    if x then ok, err, code = x:close_stdin() end
    if not (x and ok) then
        if x then x:abandon() end
        return nil, err, code
    end
    return self:finish_run(x, nonce, lim, spec, started)
end

--- handle:verdict(trailer_text, limits, exit_code, limit) -> limit, rusage, probe_found, cpu_ms:
--- which limit ended a run (the one already known, else the kernel's counts say), from the
--- wrapper's trailer; from an exec when there is none (a stopped run's wrapper was killed),
--- which reads what the wrapper left
function Handle:verdict(text, lim, exit_code, limit)
    local before, now
    local rusage, probe_found
    if text then
        local b, a, rus = text:match("^(.-)== (.-)## ?(.*)$")
        before, now = parse_counters(b), parse_counters(a)
        -- the helper's: the program's own peak memory (KiB) and CPU time (microseconds)
        local pf = (rus or ""):match("probe=(%S)")
        if pf == "1" then probe_found = true elseif pf == "0" then probe_found = false end
        local rss, ut, st = (rus or ""):match("^(%d+) (%d+) (%d+)")
        if rss then rusage = { max_rss = tonumber(rss) * 1024, cpu_ms = (tonumber(ut) + tonumber(st)) / 1000 } end
    else
        now, before = self:counters()
    end
    -- the kernel's verdicts, as native reads them (runtime/verdict.c): a fork the pids ceiling
    -- refused, a process the memory ceiling killed, SIGXCPU, SIGXFSZ (as a shell reports them)
    local function grew(k) return now[k] and before[k] and now[k] > before[k] end
    local cpu_ms = now.cpu_ns and before.cpu_ns and (now.cpu_ns - before.cpu_ns) / 1e6 or nil
    if not limit and grew("refused") then
        limit = "processes"
        -- the keeper may not have seen it yet: it sweeps now, while nothing else runs, not in
        -- the middle of the next run (it looks five times a second, and is told by a signal
        -- that the engine passes on: the next run waits for both)
        self:sweep()
        util.sleep_ms(KEEPER_SETTLE_MS)
    elseif not limit and grew("ooms") then
        limit = "memory"
    elseif not limit and exit_code == 137 and lim.cpu and cpu_ms and cpu_ms >= lim.cpu * 1000 - 50 then
        limit = "cpu" -- RLIMIT_CPU's hard limit: SIGKILL a second after SIGXCPU
    end
    if not limit and exit_code == 128 + 24 and lim.cpu then
        limit = "cpu"
    elseif not limit and exit_code == 128 + 25 and lim.file_size then
        limit = "file_size"
    end
    return limit, rusage, probe_found, cpu_ms
end

-- Reads a run's exec to its end and makes its result: output to the callbacks (the trailer
-- taken off, the output cap held), the wall clock, the counts and the kernel's verdicts.
-- `early` holds output that arrived before the run was handed over (a warm program's start).
function Handle:finish_run(x, nonce, lim, spec, started, early)
    local output_cap = lim.output
    local seen, truncated, limit = 0, false, nil
    local trailer = trailer_filter(TRAILER_PREFIX .. nonce .. " ")
    local function on_output(stream, chunk)
        if stream == "stderr" then chunk = trailer.feed(chunk) end
        if truncated then return engine.STOP end -- past the cap: kept nowhere
        if output_cap and seen + #chunk > output_cap then
            chunk = chunk:sub(1, output_cap - seen)
            truncated = true
        end
        seen = seen + #chunk
        local fn = stream == "stdout" and spec.on_stdout or spec.on_stderr
        if fn and #chunk > 0 then fn(chunk) end
        if truncated then return chunk, engine.STOP end
        return chunk
    end
    local pre = { stdout = "", stderr = "" }
    for _, stream in ipairs({ "stdout", "stderr" }) do
        local chunk = early and early[stream] or ""
        if #chunk > 0 then pre[stream] = on_output(stream, chunk) end
        if pre[stream] == engine.STOP then pre[stream] = "" end
    end
    local res, err, code = x:finish({
        timeout_ms = lim.timeout and lim.timeout * 1000 or nil,
        -- the wrapper's own exit status, which its trailer carries: no call to ask the engine
        exit_code = function()
            local text = trailer.peek()
            return text and tonumber(text:match(" rc=(%d+)\n?$"))
        end,
        -- the wall clock or the output cap: every process of the run is killed
        on_stop = function(why)
            limit = why
            self:sweep()
        end,
    }, on_output)
    if not res then return nil, err, code end
    res.stdout = pre.stdout .. res.stdout
    local stderr = pre.stderr .. res.stderr
    local held, text = trailer.finish()
    if #held > 0 and not truncated then
        -- a NUL and what followed it that looked like the trailer's start, and was not
        stderr = stderr .. held
        if spec.on_stderr then spec.on_stderr(held) end
    end
    local exit_code = res.exit_code
    -- stopped by us: SIGKILL, as native says (Docker may report the exec whose output it could
    -- no longer deliver as 126)
    if limit == "timeout" or limit == "output" then exit_code = 137 end
    local rusage, probe_found, cpu_ms
    limit, rusage, probe_found, cpu_ms = self:verdict(text, lim, exit_code, limit)
    return {
        exit_code = exit_code,
        signal = (exit_code and exit_code > 128 and exit_code < 160) and exit_code - 128 or nil,
        stdout = res.stdout,
        stderr = stderr,
        timed_out = limit == "timeout",
        limit = limit,
        truncated = truncated,
        duration_ms = util.now_ms() - started,
        -- the program's own CPU time where the helper measured it; else the container's over
        -- the run (its keeper's few polls included)
        cpu_ms = rusage and rusage.cpu_ms or cpu_ms,
        max_rss = rusage and rusage.max_rss,
        -- whether the probed directory (spec.probe: the plots') holds anything; nil: unknown
        probe_found = probe_found,
    }
end

-- A pool's prestarted program (see the warm mode of WRAPPER): an exec kept open until the
-- lease's first run, the contract of native's Pending (wait, abandon, finish).
local Pending = {}
Pending.__index = Pending

--- pending:wait(ms) -> "ready" | "starting" | "dead": reads the exec's output for up to ms until
--- the wrapper says its program waits (what the program wrote before is kept for the run)
function Pending:wait(ms)
    if self.state ~= "starting" then return self.state end
    local deadline = util.now_ms() + math.max(0, ms or 0)
    repeat
        local o, e = self.x:peek(math.max(0, floor(deadline - util.now_ms())))
        if not o then
            self:abandon()
            return self.state
        end
        self.early.stdout = self.early.stdout .. o
        self.early.stderr = self.early.stderr .. e
        local at = self.early.stdout:find(self.ready, 1, true)
        if at then
            self.early.stdout = self.early.stdout:sub(1, at - 1) .. self.early.stdout:sub(at + #self.ready)
            self.state = "ready"
        end
    until self.state ~= "starting" or util.now_ms() >= deadline
    return self.state
end

--- pending:abandon(): the program is dropped (its wrapper reads no request and ends it)
function Pending:abandon()
    if self.x then self.x:abandon() end
    self.state = "dead"
end

--- pending:serves(io) -> false when this run must start cold instead (a stdin too large to
--- send ahead of reading the output)
function Pending:serves(io)
    return not (io.stdin and #io.stdin > WARM_STDIN_MAX)
end

--- pending:finish{ request, stdin, timeout, output, on_stdout, on_stderr } -> result: the
--- lease's first run, by the program that waits for it
function Pending:finish(io)
    if self:wait(0) ~= "ready" then return nil, "the prestarted program is not waiting for a run" end
    local stdin = io.stdin or ""
    if #stdin > WARM_STDIN_MAX then
        self:abandon()
        return nil, format("a warm run takes at most %d bytes of stdin", WARM_STDIN_MAX), "E2BIG"
    end
    local h, x = self.handle, self.x
    self.state, self.x = "dead", nil
    local started = util.now_ms()
    local ok, err, code = x:send(format("%012d", #io.request) .. io.request .. stdin)
    if ok then ok, err, code = x:close_stdin() end
    if not ok then
        x:abandon()
        return nil, err, code
    end
    local lim = {}
    for k, v in pairs(self.limits) do lim[k] = v end
    lim.timeout, lim.output = io.timeout or lim.timeout, io.output or lim.output
    return h:finish_run(x, self.nonce, lim, io, started, self.early)
end

--- handle:prestart(spec [, "interactive"]) -> pending | nil, err: starts a run spec's program
--- now, to wait for the request of the lease's first run (pools), or for cells (an interactive
--- session's interpreter: llmbox.backends.engine_cells)
function Handle:prestart(spec, mode)
    if not self.id then return nil, "session is closed" end
    local interactive = mode == "interactive"
    if interactive and self.drop ~= "helper" and self.drop ~= "pod" then
        return nil, format("an interactive interpreter on %s needs llmbox's helper in the container, which this "
            .. "container could not take (it drops to the sandbox user with %s)", self.kind, self.drop), "EOPNOTSUPP"
    end
    local lim = spec.limits or {}
    local ok, err, code = self:fit(lim)
    if not ok then return nil, err, code end
    local archive
    archive, err, code = core.tar_pack(spec.files or {}, 1000, 1000)
    if not archive then return nil, err, code end
    local nonce = util.random_hex(16)
    local x
    x, err, code = self.engine:exec_start(self.id, {
        argv = self:wrapper_argv(interactive and "interactive" or "warm", spec), env = spec.env, cwd = spec.cwd,
        user = self.root_wrapper and "0:0" or container.USER,
        stdin = nonce .. format("%012d", #archive) .. archive,
    })
    if not x then return nil, err, code end
    if interactive then return cells.new(self, x, nonce, lim, trailer_filter(TRAILER_PREFIX .. nonce .. " ")) end
    return setmetatable({ handle = self, x = x, nonce = nonce, ready = WARM_READY .. nonce .. "\n",
        state = "starting", early = { stdout = "", stderr = "" }, limits = lim }, Pending)
end

-- The kernel's counts in the container's cgroups so far: processes the memory ceiling killed
-- (cgroup v1's memory.oom_control, v2's memory.events) and forks the pids ceiling refused
-- (pids.events); nil where unknown.
function Handle:counters()
    -- a stopped run's processes may still fill the pids ceiling for a moment while the keeper
    -- sweeps them: an exec the engine could not start is tried again
    local res, text
    local give_up = util.now_ms() + 3000
    repeat
        res = self.engine:exec(self.id, { argv = { "/bin/sh", "-c",
            COUNTERS .. "counters; printf '%s\\n==\\n' \"$out\"; cat " .. (self.root_wrapper and "/.llmbox/before"
                or "/tmp/llmbox/.before") .. " 2>/dev/null; exit 0" },
            user = self.root_wrapper and "0:0" or container.USER, timeout_ms = INTERNAL_MS })
        text = res and res.exit_code == 0 and res.stdout or nil
        if not text then util.sleep_ms(50) end
    until text or util.now_ms() > give_up
    local now, before = (text or ""):match("^(.*)==\n(.*)$")
    return parse_counters(now), parse_counters(before)
end

--- handle:fit(limits) -> true | nil, err: the container's memory, process and CPU ceilings
--- for a run: the run's own where it asks for less than the policy's (a cgroup per run, as
--- native has, is not something an engine offers; runs of a session do not overlap)
function Handle:fit(lim)
    local ceil = self.spec.limits
    if lim.cpus and lim.cpus < 0.01 then
        -- as native says (runtime/cgroup.c): the CFS quota of a 100 ms period is 1 ms at least
        return nil, format("cpus = %g is below the smallest CPU quota the kernel enforces (0.01)", lim.cpus), "EINVAL"
    end
    local want = {
        memory = lim.memory and min(lim.memory, ceil.memory) or ceil.memory,
        processes = lim.processes and min(lim.processes, ceil.processes) or ceil.processes,
        cpus = lim.cpus or ceil.cpus,
    }
    local cur = self.ceilings
    if cur.memory == want.memory and cur.processes == want.processes and cur.cpus == want.cpus then return true end
    local ok, err, code = self.engine:json("POST", self:update_path(), container.update_body(self.kind, want))
    if not ok then return nil, "setting the run's limits on its container: " .. tostring(err), code end
    self.ceilings = want
    return true
end

--- handle:collect(path, max) -> { {name, size, data}, ... } | nil, err, errno_name: the regular
--- files below path, as an archive the container's tar makes, read like any untrusted one
function Handle:collect(path, max)
    if not self.id then return nil, "session is closed" end
    local parent, base = path:match("^(.*)/([^/]+)$")
    if not parent or base == ".." or base == "." then return nil, "collect: expected an absolute path", "EINVAL" end
    local L = container.layout
    if path:find("/..", 1, true) or not (path:sub(1, #L.workspace + 1) == L.workspace .. "/"
        or path:sub(1, #L.tmp + 1) == L.tmp .. "/") then
        return nil, format("collect: %s is outside %s and %s", path, L.workspace, L.tmp), "EINVAL"
    end
    local res, err, code = self.engine:exec(self.id, {
        argv = { "/bin/sh", "-c", SEND, "collect",
            parent == "" and "/" or parent, base },
        user = container.USER, timeout_ms = INTERNAL_MS,
    })
    if not res then return nil, err, code end
    if res.exit_code == 3 then return nil, path .. " does not exist", "ENOENT" end
    if res.exit_code ~= 0 then return nil, format("collecting %s: %s", path, res.stderr), "EIO" end
    return core.tar_entries(res.stdout, max)
end

-- The container's side of copy_in: the archive (entries "llmbox", "llmbox/...") is unpacked
-- next to the destination, then moved into place. $1: the destination, $2: a file's mode.
local COPY_IN = 'target="$1"\n' .. NO_LINKS .. [[
case "$1" in */*) dir=${1%/*} ;; *) dir=. ;; esac
# the directories on the way are made, as native's copy_to makes them
[ -z "$dir" ] || mkdir -p "$dir" || { drain; exit 1; }
t=$(mktemp -d "${dir:-/}/.llmbox-in.XXXXXX") || { drain; exit 1; }
tar -x -C "$t" || { drain; rm -rf "$t"; exit 1; }
if [ -n "$2" ] && [ -f "$t/llmbox" ]; then chmod "$2" "$t/llmbox"; fi
if [ -d "$1" ] && [ ! -L "$1" ]; then echo "$1 exists and is a directory" >&2; rm -rf "$t"; exit 1; fi
mv -f "$t/llmbox" "$1"; rc=$?
rm -rf "$t"
exit $rc
]]

--- handle:copy_in(host_path, path [, mode]) -> true [, skipped] | nil, err: a host file or
--- directory to path in the container (symlinks and special files in a directory are skipped)
function Handle:copy_in(host_path, path, mode)
    if not self.id then return nil, "session is closed" end
    local perr, pcode
    path, perr, pcode = container_path(path, "copy_in")
    if not path then return nil, perr, pcode end
    local archive, skipped, code = core.tar_host(host_path)
    if not archive then return nil, skipped, code end
    local res, err
    res, err, code = self.engine:exec(self.id, {
        argv = { "/bin/sh", "-c", COPY_IN, "copy-in", path, mode and format("%o", mode) or "" },
        user = container.USER, stdin = archive, timeout_ms = INTERNAL_MS,
    })
    if not res then return nil, err, code end
    if res.exit_code ~= 0 then
        return nil, format("copying %s to %s: %s", host_path, path, (res.stderr:gsub("%s+$", ""))), "EIO"
    end
    return true, skipped
end

--- handle:copy_out(path, host_path [, max]) -> true | nil, err: path in the container to the
--- host, received like any untrusted archive (a file lands whole or not at all)
function Handle:copy_out(path, host_path, max)
    if not self.id then return nil, "session is closed" end
    local perr, pcode
    path, perr, pcode = container_path(path, "copy_out")
    if not path then return nil, perr, pcode end
    local parent, base = path:match("^(.*)/([^/]+)$")
    if not parent or base == ".." or base == "." then return nil, "copy_out: expected an absolute path", "EINVAL" end
    -- the archive may be a little larger than what it holds: headers, padding
    local cap = max and max > 0 and max + 1048576 or nil
    local seen, too_big = 0, false
    local res, err, code = self.engine:exec(self.id, {
        argv = { "/bin/sh", "-c", SEND, "copy-out",
            parent == "" and "/" or parent, base },
        user = container.USER, timeout_ms = INTERNAL_MS,
        on_stop = function() self:sweep() end,
    }, function(stream, chunk)
        if stream ~= "stdout" then return chunk end
        seen = seen + #chunk
        if cap and seen > cap then
            too_big = true
            return engine.STOP
        end
        return chunk
    end)
    if not res then return nil, err, code end
    if too_big then
        return nil, format("%s is larger than the limit of %d bytes", path, max), "EFBIG"
    end
    if res.exit_code == 3 then return nil, path .. " does not exist", "ENOENT" end
    -- tar's 1 for entries that changed or vanished while it read (the program is still
    -- running): the archive holds what was there, as native's copy skips what went away
    local vanished = res.exit_code == 1 and (res.stderr:find("changed as we read", 1, true)
        or res.stderr:find("No such file", 1, true))
    if res.exit_code ~= 0 and not vanished then
        return nil, format("copying %s out: %s", path, res.stderr), "EIO"
    end
    return core.tar_extract(res.stdout, host_path, max)
end

-- Where a committed image keeps the workspace: an archive, unpacked into the tmpfs workspace by
-- the sandbox user when a session opens from the image and at each reset (a tmpfs hides what an
-- image holds at /sandbox itself, and the root stays read-only).
local SEED = "/.llmbox-seed/workspace.tar"
local RESTORE = 'tar -x -C /sandbox -f ' .. SEED .. ' || exit 5\n'

-- The largest workspace a commit takes (the workspace's own tmpfs limit is lower by default).
local COMMIT_MAX = 4 * 1024 * 1024 * 1024

--- handle:commit(image) -> image | nil, err: a new image, the session's image with the
--- workspace as it is now; a session opened from it starts with those files (and every reset of
--- one goes back to them). The root is read-only, so the workspace is all a session changes.
--- Made through a container that never starts (the archive API writes into it), committed and
--- removed; the image carries none of llmbox's labels, so nothing takes it, or the containers
--- made from it, for llmbox's.
function Handle:commit(image)
    if not self.id then return nil, "session is closed" end
    local ok, why = images.commit_target(image)
    if not ok then return nil, why, "EINVAL" end
    local seen, too_big = 0, false
    local res, err, code = self.engine:exec(self.id, {
        -- the workspace's entries, not the directory (its owner and mode are the tmpfs's)
        argv = { "/bin/sh", "-c", 'cd /sandbox || exit 2; set --; for f in * .[!.]* ..?*; do '
            .. '{ [ -e "$f" ] || [ -L "$f" ]; } && set -- "$@" "$f"; done; [ $# -eq 0 ] || exec tar -c -f - -- "$@"' },
        user = container.USER,
        timeout_ms = INTERNAL_MS, on_stop = function() self:sweep() end,
    }, function(stream, chunk)
        if stream ~= "stdout" then return chunk end
        seen = seen + #chunk
        if seen > COMMIT_MAX then
            too_big = true
            return engine.STOP
        end
        return chunk
    end)
    if not res then return nil, "commit: reading the workspace: " .. tostring(err), code end
    if too_big then return nil, format("commit: the workspace is larger than %d bytes", COMMIT_MAX), "EFBIG" end
    -- tar's 1: something changed while it read (a program still runs); the archive holds what was there
    if res.exit_code ~= 0 and res.exit_code ~= 1 then
        return nil, "commit: reading the workspace: " .. res.stderr, "EIO"
    end
    -- (an empty workspace leaves the image as it was)
    local archive
    if #res.stdout > 0 then
        archive, err = core.tar_pack({ { path = SEED, data = res.stdout, mode = 292 } }, 1000, 1000)
        if not archive then return nil, "commit: " .. tostring(err) end
    end
    local e = self.engine
    -- the engines make no container of an image without a command (a base image made by
    -- `docker import`): that one gets a shell, which the new image then names
    local img
    img, err, code = e:json("GET", "/images/" .. self.spec.image .. "/json")
    if not img then return nil, "commit: " .. tostring(err), code end
    local cfg = type(img.Config) == "table" and img.Config or {}
    local has_cmd = type(cfg.Cmd) == "table" and #cfg.Cmd > 0 or type(cfg.Entrypoint) == "table" and #cfg.Entrypoint > 0
    local made
    made, err, code = e:json("POST", "/containers/create", { Image = self.spec.image, Cmd = not has_cmd and
        { "/bin/sh" } or nil, Labels = { [container.LABEL] = "1", [container.OWNER] = owner_label() } })
    if not made then return nil, "commit: " .. tostring(err), code end
    ok = true
    if archive then
        ok, err, code = e:json("PUT", "/containers/" .. made.Id .. "/archive?path=/", archive,
            { headers = { ["Content-Type"] = "application/x-tar" }, timeout_ms = images.PULL_TIMEOUT_MS })
    end
    if ok then
        local name, tag = images.split(image)
        -- the labels that mark llmbox's own containers are emptied (the maintenance filters on
        -- io.llmbox.managed=1): an image cannot drop a label it inherits
        ok, err, code = e:json("POST", format("/commit?container=%s&repo=%s&tag=%s&changes=%s&changes=%s", made.Id,
            util.url_encode(name), util.url_encode(tag), util.url_encode(format('LABEL %s=""', container.LABEL)),
            util.url_encode(format('LABEL %s=""', container.OWNER))), {}, { timeout_ms = images.PULL_TIMEOUT_MS })
    end
    e:request("DELETE", "/containers/" .. made.Id .. "?force=1&v=1")
    if not ok then return nil, "commit: " .. tostring(err), code end
    return image
end

--- handle:reset() -> true | nil, err: kills what runs and empties the workspace and /tmp
function Handle:reset()
    if not self.id then return nil, "session is closed" end
    -- one exec as the sandbox user: it kills the user's other processes, then empties
    -- (a directory the program made unreadable is made readable again first)
    -- (and the tmpfs the caller added: runtime = { tmpfs = ... })
    local dirs = { "/sandbox", "/tmp", "/dev/shm" }
    for path in pairs(self.spec.tmpfs or {}) do dirs[#dirs + 1] = path end
    local res, err = self.engine:exec(self.id, { argv = { "/bin/sh", "-c", SWEEP:gsub("exit 0%s*$", "")
        .. 'chmod -R u+rwx "$@" 2>/dev/null; for d; do rm -rf "$d"/* "$d"/.[!.]* "$d"/..?* 2>/dev/null; done\n'
        .. (self.seeded and RESTORE or "") .. 'exit 0',
        "llmbox-reset", unpack(dirs) }, user = container.USER, timeout_ms = INTERNAL_MS })
    if not res then return nil, err end
    return true
end

--- handle:reset_start() -> task: reset, driven like the native jail's
function Handle:reset_start()
    return task.new(self.reset, self)
end

--- handle:close([opts]) -> true: removes the container, unless it is kept (keep = true, or
--- attached to) and opts.remove is not set: then the session lets it go as it is
function Handle:close(opts)
    if self.id then
        if not self.kept or (opts and opts.remove) then
            self.engine:request("DELETE", "/containers/" .. self.id .. "?force=1&v=1")
        end
        self.id = nil
    end
    if self.drop_image then
        images.remove(self.engine, self.drop_image)
        self.drop_image = nil
    end
    if self.seccomp_file then
        os.remove(self.seccomp_file)
        self.seccomp_file = nil
    end
    return true
end

function Handle:closed() return self.id == nil end

-- Where Podman finds the seccomp profile: a file of this host (its API takes a path).
local profile_dir
local function write_profile(text)
    if not profile_dir then
        local dir, err = util.private_dir("llmbox-seccomp")
        if not dir then return nil, err end
        profile_dir = dir
    end
    local path = format("%s/%d-%d.json", profile_dir, floor(util.now_ms() * 1000), math.random(1e9))
    local f, err = io.open(path, "w")
    if not f then return nil, err end
    f:write(text)
    f:close()
    return path
end

-- This process's hard RLIMIT_NPROC, capped: Podman must be told one at or below its own.
local function nproc_limit()
    local limits = util.read_file("/proc/self/limits") or ""
    return min(4096, tonumber(limits:match("Max processes%s+%S+%s+(%d+)")) or 4096)
end

-- What an open's or an attach's probe found (OPEN_PROBE, ATTACH_PROBE), into handle h.
local function adopt(h, kids)
    h.keeper = kids and tonumber(kids.stdout:match("(%d+)%s*$"))
    -- the runs' wrappers are root's and drop to the sandbox user for everything that
    -- touches the sandbox, out of the program's reach: through llmbox's helper (which also
    -- reports the program's peak memory and CPU time), else util-linux's setpriv (Debian's
    -- images have it; busybox's cannot change ids); else the wrappers are the user's
    h.drop = kids and (kids.stdout:find("helper", 1, true) and "helper"
        or kids.stdout:find("setpriv", 1, true) and "root") or "user"
    h.root_wrapper = h.drop ~= "user"
    h.seeded = kids and kids.stdout:find("%f[%w]seed%f[%W]") ~= nil
    local lim = h.spec.limits
    h.ceilings = { memory = lim.memory, processes = lim.processes, cpus = lim.cpus }
end

--- attach(kind, spec) -> handle | nil, err: a session in the kept container spec.attach (an id
--- or a name), which must be llmbox's, kept, running, and made under the settings spec asks for
local function attach(kind, spec)
    local id = spec.attach
    if type(id) ~= "string" or not id:match("^[%w][%w_.%-]*$") or #id > 128 then
        return nil, format("container %q is not a container id or name", tostring(id)), "EINVAL"
    end
    local e, err, code = engine.connect(kind)
    if not e then return nil, err, code end
    local c
    c, err, code = e:json("GET", "/containers/" .. id .. "/json")
    if not c then
        if code == 404 then return nil, format("no container %q on the %s engine", id, kind), "ENOENT" end
        return nil, err, code
    end
    local labels = type(c.Config) == "table" and type(c.Config.Labels) == "table" and c.Config.Labels or {}
    if labels[container.LABEL] ~= "1" then
        return nil, format("container %q was not made by llmbox: llmbox cannot vouch for its isolation (network, "
            .. "capabilities, seccomp, limits) nor stop a run in it; open a session from its image instead "
            .. "(image = %q), or attach to one llmbox kept (keep = true, --keep)", id, tostring(c.Config.Image)),
            "EPERM"
    end
    if labels[container.OWNER] ~= KEPT then
        return nil, format("container %q belongs to another llmbox session, which removes it when it closes: "
            .. "attach only to a kept one (keep = true, --keep)", id), "EPERM"
    end
    if not (type(c.State) == "table" and c.State.Running) then
        return nil, format("container %q is not running (%s): a kept container that stopped has lost its "
            .. "workspace; remove it (`%s rm %s`)", id, type(c.State) == "table" and tostring(c.State.Status)
            or "unknown", kind, id), "ESRCH"
    end
    local image = c.Config.Image
    if spec.image and spec.image ~= image then
        return nil, format("container %q runs image %s, not %s", id, tostring(image), spec.image), "EINVAL"
    end
    spec.image = image
    local want
    want, err = config_digest(spec, kind, e.endpoint.socket ~= nil)
    if not want then return nil, err end
    if labels[CONFIG_LABEL] ~= want then
        return nil, format("container %q was made under other settings than this session asks for (it was made "
            .. "under policy %q, this session asks for %q; the limits and engine options count too): attach with "
            .. "the policy and options it was made with", id, tostring(labels["io.llmbox.policy"]),
            tostring(spec.policy.name)), "EPERM"
    end
    local h = setmetatable({ engine = e, kind = kind, spec = spec, id = c.Id, kept = true }, Handle)
    local kids
    kids, err, code = e:exec(h.id, { argv = { "/bin/sh", "-c", ATTACH_PROBE, "llmbox-attach" }, user = "0:0",
        timeout_ms = INTERNAL_MS })
    adopt(h, kids)
    if not h.keeper then
        h.id = nil
        return nil, format("attaching to container %q: %s", id, tostring(err or (kids and ("no keeper process: "
            .. kids.stdout .. kids.stderr)))), code
    end
    return h
end

-- The helper (backends/container_exec.c), beside the C module: build/lib/llmbox/container-exec,
-- or where `make install` put it; as an archive that places it at HELPER. nil when it is not
-- there (the runs then drop through setpriv, or not at all).
local helper_tar
local function helper_archive()
    if helper_tar == nil then
        helper_tar = false
        local so = package.searchpath("llmbox.core", package.cpath)
        local bin = so and util.read_file((so:gsub("core%.so$", "container-exec")))
        if bin then
            helper_tar = core.tar_pack({ { path = HELPER .. ".part", data = bin, mode = 493 } }, 0, 0) or false
        end
    end
    return helper_tar or nil
end

-- For the kubernetes driver, whose pods run the same wrapper and scripts through execs
-- (llmbox.backends.kubernetes): the run machinery, the sweep, and who made a sandbox.
_M.Handle, _M.SWEEP = Handle, SWEEP
-- The scripts this file's execs begin with (a pod's exec carries its command in a URL, which
-- has no room for them: the kubernetes driver gives them to its pods beforehand).
_M.SCRIPTS = { WRAPPER, COPY_IN, SEND, COUNTERS, SWEEP, (SWEEP:gsub("exit 0%s*$", "")), RESTORE }
_M.owner_label, _M.boot_id, _M.alive = owner_label, boot_id, alive

function _M.driver(kind)
    local D = { name = kind, layout = container.layout }
    D.capabilities = {
        pool = true, persistent_workspace = true, network_policy = true, seccomp = true, images = true,
        interactive = true, existing_sandbox = true, egress = false, commit = true, rootfs = false,
        run_limits = true,
    }

    --- D.usable() -> true | false, why: does the engine answer here
    function D.usable()
        local e, why = engine.connect(kind)
        if not e then return false, why end
        return true
    end

    --- D.maintain() -> true | nil, err: removes the containers that llmbox processes of this
    --- machine created and died without removing (each run sweeps what it left, so live
    --- sessions need nothing). Containers of other machines, and any llmbox did not create, are
    --- left alone.
    function D.maintain()
        local e, err = engine.connect(kind)
        if not e then return nil, err end
        local list
        list, err = e:json("GET", "/containers/json?all=1&filters=" .. util.url_encode(json.encode(
            { label = { container.LABEL .. "=1" } })))
        if not list then return nil, err end
        local boot = boot_id()
        for _, c in ipairs(list) do
            local owner = c.Labels and c.Labels[container.OWNER] or ""
            local b, pid, start = owner:match("^([^/]+)/(%d+)/(%d+)$")
            if b == boot and not alive(tonumber(pid), start) then
                e:request("DELETE", "/containers/" .. c.Id .. "?force=1&v=1")
            end
        end
        return true
    end

    --- D.open(spec) -> handle | nil, err
    function D.open(spec, opts)
        opts = opts or {}
        if spec.attach then return attach(kind, spec) end
        local pol = spec.policy
        if not spec.image then
            return nil, format("the %s backend runs images: name one (image = \"...\" in Lua, --image on the "
                .. "command line)", kind)
        end
        -- an image reference ("name[:tag][@digest]", registry and path parts): it goes into
        -- request paths, so nothing else may pass
        if not image_ref_ok(spec.image) then
            return nil, format("image %q is not an image reference (name[:tag][@digest])", spec.image)
        end
        if spec.limits.cgroup == "forbid" then
            return nil, format("policy %q forbids cgroups (limits.cgroup), which a container always has", pol.name)
        end
        local e, err, code = engine.connect(kind)
        if not e then return nil, err, code end
        if spec.volumes and not e.endpoint.socket then
            -- checked against this host's files; a remote engine's are another machine's
            return nil, format("host mounts (runtime.volumes) are refused on a %s engine reached over TCP: they "
                .. "name the engine host's files, which llmbox cannot check from here", kind), "EPERM"
        end
        -- pulled when missing (spec.pull says otherwise: "never", "always")
        local pull = spec.pull or {}
        local pulled
        if spec.build and kind == "podman" then
            -- measured on Podman 4.3: its build API (compatible and libpod) ignores
            -- networkmode=none and runs RUN steps in the host's network namespace
            return nil, format("building from a Dockerfile is refused on podman: Podman %s runs the steps in the "
                .. "host's network namespace (its build API ignores networkmode=none), and no sandbox may reach the "
                .. "host's network; build the image yourself (`podman build --network=none ...`) and name it with "
                .. "image = (--image)", e.version), "EOPNOTSUPP"
        elseif spec.build then
            -- built now (the engine's cache makes an unchanged Dockerfile's build quick)
            pulled, err, code = images.build(e, spec.build.dockerfile, spec.image, pull.on_progress)
        else
            pulled, err, code = images.ensure(e, spec.image, { pull = pull.policy, on_progress = pull.on_progress })
        end
        if pulled == nil then return nil, err, code end
        local made_opts = { image = spec.image, kind = kind, labels = { [container.OWNER] = owner_label() },
            local_engine = e.endpoint.socket ~= nil }
        if spec.keep then
            local digest
            digest, err = config_digest(spec, kind, made_opts.local_engine)
            if not digest then return nil, err end
            made_opts.labels = { [container.OWNER] = KEPT, [CONFIG_LABEL] = digest }
        end
        if kind == "podman" then
            local perr
            made_opts.seccomp_file, perr = write_profile(container.profile_json(container.seccomp_profile(spec.syscalls)))
            if not made_opts.seccomp_file then return nil, "writing the seccomp profile: " .. tostring(perr) end
            made_opts.nproc = nproc_limit()
        end
        local body
        body, err = container.create_body(spec, made_opts)
        local h = setmetatable({ engine = e, kind = kind, spec = spec, seccomp_file = made_opts.seccomp_file,
            kept = spec.keep or nil,
            -- an image this session pulled or built, to remove at close when the caller keeps none
            drop_image = pulled and pull.keep == false and spec.image or nil }, Handle)
        local made
        if body then made, err, code = e:json("POST", "/containers/create", body) end
        if not made then
            h:close({ remove = true })
            return nil, err, code
        end
        h.id = made.Id
        local ok
        ok, err, code = e:json("POST", "/containers/" .. h.id .. "/start")
        -- the keeper is init's only child now: the container runs as it should.
        -- As root (whose only capabilities are KILL, SETUID and SETGID): an image with its
        -- own /sandbox or /tmp gives the tmpfs there that directory's mode, and the sandbox
        -- user must be able to write both.
        -- llmbox's helper goes into root's private tmpfs on the way (container-exec; tar is
        -- the one tool every run needs already)
        local kids
        local helper = not opts.no_helper and helper_archive() or nil
        if ok then
            kids, err, code = e:exec(h.id, { argv = { "/bin/sh", "-c", OPEN_PROBE, "llmbox-open",
                helper and "helper" or "none" }, user = "0:0", stdin = helper, timeout_ms = INTERNAL_MS })
        end
        adopt(h, kids)
        if not h.keeper then
            h:close({ remove = true })
            return nil, "starting the container: " .. tostring(err or (kids and ("no keeper process: " .. kids.stdout
                .. kids.stderr))), code
        end
        if h.seeded then
            local res
            res, err, code = e:exec(h.id, { argv = { "/bin/sh", "-c", RESTORE }, user = container.USER,
                timeout_ms = INTERNAL_MS })
            if not res or res.exit_code ~= 0 then
                h:close({ remove = true })
                return nil, format("restoring the workspace committed into image %s: %s", spec.image,
                    tostring(res and res.stderr:gsub("%s+$", "") or err)), code
            end
        end
        return h
    end

    -- Opening in steps: every engine call in D.open yields to the caller's loop while it waits
    -- (llmbox.task), so an event loop drives several openings, and anything else, at once.
    function D.open_start(spec, opts)
        return task.new(D.open, spec, opts)
    end

    return D
end

return _M
