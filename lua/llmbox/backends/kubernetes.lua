-- The kubernetes backend: a session is one pod made from the neutral sandbox spec (the hardened
-- default of llmbox.k8s.pod, with the policy's namespace, labels, annotations and pod_manifest),
-- a run is an exec in it over the websocket channel protocol (llmbox.k8s.exec). The runs, copies,
-- collects and resets are the container engines' (llmbox.backends.engines: the same wrapper and
-- scripts, in their "user" mode, since a pod never has root), given pods instead of containers.
--
-- What differs from an engine's container, and how it is kept honest:
--   * a pod's memory and CPU are fixed when it is made (the policy's): a run that asks for less
--     is refused, never run with more; the processes limit is RLIMIT_NPROC of the pod's user,
--     set by each exec (on a node without user namespaces, that user's processes in other pods
--     count too: a tighter bound, never a looser one);
--   * the API cannot signal an exec: a stopped run (its wall clock, its output cap) is ended by
--     an exec that kills every process of the pod's user but itself, and the pod's first
--     process, which no process in its pid namespace can kill;
--   * a pool's warm program is an exec whose interpreter waits on the exec's open stdin;
--   * the policy's syscall filter (the program a native jail loads, in the pod's environment) is
--     loaded on each run's program by llmbox's loader (backends/pod_filter.c), on top of the
--     runtime's own profile, with a guard that keeps the program's signals off its wrapper;
--     the network is cut by a deny-all NetworkPolicy that the
--     cluster's network plugin must enforce, which is not llmbox's own, so a policy must accept
--     it (kubernetes.isolation = "cluster") or the backend refuses;
--   * llmbox's helpers (runs, sweeps, interactive cells' channel, the filter's loader) are in a
--     read-only configMap volume at /.llmbox: the one place of a pod its user cannot write;
--   * no commit, no attach, no installs that need a network.
-- Every refusal names what was asked and why. Pods are deleted at close; those of a process
-- that died are deleted by the maintenance (by owner on this machine, by age on others).
local core = require "llmbox.core"
local artifacts = require "llmbox.artifacts"
local engines = require "llmbox.backends.engines"
local engine = require "llmbox.engine"
local container = require "llmbox.backends.container"
local kubeconfig = require "llmbox.k8s.kubeconfig"
local api = require "llmbox.k8s.api"
local kpod = require "llmbox.k8s.pod"
local kexec = require "llmbox.k8s.exec"
local status = require "llmbox.k8s.status"
local task = require "llmbox.task"
local util = require "llmbox.util"
local policy_mod = require "llmbox.policy"

local setmetatable, tostring, tonumber, ipairs, pairs, format, unpack = setmetatable, tostring, tonumber, ipairs,
    pairs, string.format, unpack

-- How long llmbox's own execs (sweeps, collects, resets) may take.
local INTERNAL_MS = 30000

-- Where an install's offline sources (this host's directories) are copied in the pod for its run.
local SOURCES = "/tmp/llmbox/sources"

-- Who made a pod (this machine's boot id, the pid and its start time), as an annotation.
local OWNER = "llmbox.dev/owner"

-- The pod's first process: it only waits, and no process of its pid namespace can kill it.
local KEEPER = { "/bin/sh", "-c", "exec sleep 2147483647" }

-- A new pod's check: its workspace and /tmp are its user's, and llmbox's helpers run there (a
-- node of another architecture, a kernel without seccomp: exit 3, with the reason).
local OPEN_PROBE = [[
mkdir -p /tmp/llmbox && [ -w /sandbox ] && [ -w /tmp ] || exit 1
/.llmbox/exec -- /.llmbox/filter "$LLMBOX_FILTER_BPF" -- /bin/sh -c true ||
  { echo "on $(uname -m 2>/dev/null || echo "an unknown architecture")" >&2; exit 3; }
]]

-- The pods of a cluster, as the engines' Handle calls its engine: exec_start and exec.
local Pods = {}
Pods.__index = Pods

-- The API server's reason for refusing an exec's upgrade: the same request over plain HTTP.
function Pods:explain(http_status, path)
    local _, err = self.client:request("GET", path, nil, format("exec in pod of namespace %s", self.ns))
    return err or format("the API server refused the exec (HTTP %d)", http_status)
end

-- A pod's exec carries its command in the request's URL, which libwebsockets 4.1 holds to
-- 2 KB: the engines' scripts (llmbox.backends.engines.SCRIPTS: the run's wrapper alone is 6 KB)
-- are in the pod's environment instead, as LLMBOX_SH_1..n (set when it is made, so no program
-- can change what a later exec runs), and every exec is this starter: it builds the command's
-- script from the variable named in $1 (none: "-") between $2 and $3, and runs it with the
-- rest as its arguments, in a clean environment when $4 is "clean" (the run's own variables
-- are exported by $2: a run sees those, as on native, and no more). A command too long for the
-- URL otherwise ($1 "+") comes first on stdin: its length in 12 digits, then its text.
local STARTER = [[
v=$1 pre=$2 post=$3 how=$4; shift 4
s=
case $v in
-) ;;
+) # (one byte at a time: nothing of the stdin behind it is taken)
   n=$(dd bs=1 count=12 2>/dev/null); pre=$(dd bs=1 count="$n" 2>/dev/null; echo .); pre=${pre%.} ;;
*) eval "s=\${$v}" ;;
esac
# (the run's environment and directory ($pre; all of a command from stdin) go through the
# environment, out of the command line that every process of the pod can read; a run's wrapper
# takes the syscall filter from the pod's environment, and drops it)
s="llmbox_pre=\$LLMBOX_PRE; unset LLMBOX_PRE; eval \"\$llmbox_pre\"
$s$post"
[ "$how" = clean ] && exec env -i ${LLMBOX_FILTER_BPF:+"LLMBOX_FILTER_BPF=$LLMBOX_FILTER_BPF"} \
  "LLMBOX_PRE=$pre" /bin/sh -c "$s" "$@"
export LLMBOX_PRE="$pre"
exec /bin/sh -c "$s" "$@"
]]
local SCRIPT_ENV = {}
do
    local list = {}
    for _, text in ipairs(engines.SCRIPTS) do list[#list + 1] = text end
    -- the longest first: a script may begin with another (the wrapper with the counters)
    table.sort(list, function(a, b) return #a > #b end)
    for i, text in ipairs(list) do SCRIPT_ENV[i] = { name = "LLMBOX_SH_" .. i, text = text } end
end

-- llmbox's helpers in every pod, read-only at /.llmbox: the engines' helper (container-exec:
-- runs, sweeps that spare an interactive interpreter, its cells' channel) and the syscall
-- filter's loader (pod-filter), both beside the C module or where `make install` put them. A
-- pod's user can write every other place of the pod, so they come in a configMap volume: one
-- per namespace and content (llmbox-helpers-<sha256>), made when missing and left for the next
-- sessions (it holds no secret: llmbox's own programs).
local HELPERS = { exec = "container-exec", filter = "pod-filter" }
local helpers_data, helpers_name
local made_helpers = {} -- server .. namespace .. name: seen on the API server

local function helpers_config_map(pods)
    if not helpers_data then
        local so = package.searchpath("llmbox.core", package.cpath)
        local data, digest = {}, {}
        for _, key in ipairs({ "exec", "filter" }) do
            local bin = so and util.read_file((so:gsub("core%.so$", HELPERS[key])))
            if not bin then
                return nil, format("llmbox's %s (beside its core module, %s) is missing: reinstall llmbox (make install)",
                    HELPERS[key], tostring(so))
            end
            data[key], digest[#digest + 1] = artifacts.base64(bin), core.sha256(bin)
        end
        helpers_data = data
        helpers_name = "llmbox-helpers-" .. core.sha256(table.concat(digest)):sub(1, 16)
    end
    local key = pods.conn.server .. "\0" .. pods.ns .. "\0" .. helpers_name
    if made_helpers[key] then return helpers_name end
    local _, err, code = pods.client:get_config_map(pods.ns, helpers_name)
    if code == 404 then
        _, err, code = pods.client:create_config_map({ apiVersion = "v1", kind = "ConfigMap",
            metadata = { name = helpers_name, namespace = pods.ns, labels = { [kpod.LABEL_MANAGED] = "llmbox" } },
            binaryData = helpers_data, immutable = true })
        if code == 409 then err = nil end -- made by another session meanwhile
    end
    if err then
        return nil, err .. " (llmbox's helpers reach each pod in a configMap: the credentials need get and create on "
            .. "configmaps in the namespace)"
    end
    made_helpers[key] = true
    return helpers_name
end

-- The policy's syscall filter for the pod's runs, for its environment: the program llmbox
-- compiles from the rules (the one a native jail loads), in hex; /.llmbox/filter loads it.
local function filter_hex(syscalls)
    local prog, err = core.filter_program(syscalls or {})
    if not prog then return nil, "compiling the policy's syscall rules: " .. tostring(err) end
    return (prog:gsub(".", function(c) return format("%02x", c:byte()) end))
end

local function sh_quote(v) return "'" .. v:gsub("'", "'\\''") .. "'" end

-- The starter's argv for an exec's { argv, env, cwd } (and RLIMIT_NPROC) in pod ns/pod, and
-- what goes first on its stdin when the URL has no room for the command.
local function starter_argv(cmd, nproc, ns, pod, prefix_path)
    local argv = cmd.argv
    local pre = {}
    -- (bash and busybox say -u, dash -p)
    -- (no higher than the hard limit the pod already has: a lower bound is kept as it is)
    if nproc then
        pre[#pre + 1] = format('n=%d; h=$( (ulimit -H -u || ulimit -H -p) 2>/dev/null); '
            .. '[ "$h" = unlimited ] || [ "$h" -ge "$n" ] || n=$h; { ulimit -u "$n" || ulimit -p "$n"; } 2>/dev/null || '
            .. '{ echo "llmbox: the processes limit ($n) cannot be set" >&2; exit 125; }\n', nproc)
    end
    if cmd.cwd then pre[#pre + 1] = "cd -- " .. sh_quote(cmd.cwd) .. " || exit 126\n" end
    for _, kv in ipairs(cmd.env or {}) do
        local k, v = kv:match("^([%a_][%w_]*)=(.*)$")
        if not k then return nil, format("exec: %q is not NAME=value", kv) end
        pre[#pre + 1] = "export " .. k .. "=" .. sh_quote(v) .. "\n"
    end
    local var, post, rest = "-"
    if argv[1] == "/bin/sh" and argv[2] == "-c" and argv[3] then
        local script = argv[3]
        post = script
        for _, lib in ipairs(SCRIPT_ENV) do
            if script:sub(1, #lib.text) == lib.text then
                var, post = lib.name, script:sub(#lib.text + 1)
                break
            end
        end
        rest = { unpack(argv, 4) }
        if #rest == 0 then rest = { "sh" } end
    else
        post = 'exec "$@"'
        rest = { "llmbox-exec", unpack(argv) }
    end
    local prefix = table.concat(pre)
    -- what the URL has room for: libwebsockets writes the request line in 2048 bytes
    local out = { "/bin/sh", "-c", STARTER, "llmbox-start", var, prefix, post, cmd.env and "clean" or "keep" }
    for _, a in ipairs(rest) do out[#out + 1] = a end
    if #kexec.path(ns, pod, kpod.CONTAINER, out, true) + #prefix_path <= 1950 then return out end
    -- too long: the whole script, its arguments set by its first line, comes on stdin
    local lib = ""
    for _, l in ipairs(SCRIPT_ENV) do
        if l.name == var then lib = l.text end
    end
    local args = {}
    for i = 2, #rest do args[#args + 1] = sh_quote(rest[i]) end
    local script = "set -- " .. table.concat(args, " ") .. "\n" .. prefix .. lib .. post
    return { "/bin/sh", "-c", STARTER, "llmbox-start", "+", "", "", cmd.env and "clean" or "keep", rest[1] },
        format("%012d", #script) .. script
end

--- pods:exec_start(pod, { argv, env, cwd, user, stdin }) -> exec | nil, err (llmbox.k8s.exec's)
function Pods:exec_start(id, cmd)
    if cmd.user and cmd.user ~= container.USER then
        return nil, format("the kubernetes backend runs everything as the pod's user (%s), never as %s",
            container.USER, tostring(cmd.user)), "EPERM"
    end
    local argv, script = starter_argv(cmd, self.nproc, self.ns, id, self.conn.server:match("^https?://[^/]*(.*)$") or "")
    if not argv then return nil, script, "EINVAL" end
    local x, err, code = kexec.start(self.conn, { namespace = self.ns, pod = id, container = kpod.CONTAINER,
        argv = argv, stdin = script and (script .. (cmd.stdin or "")) or cmd.stdin },
        function(st, path) return self:explain(st, path) end)
    -- (a command with no stdin of its own reads none)
    if x and script and cmd.stdin == nil then
        local ok
        ok, err, code = x:close_stdin()
        if not ok then x:abandon() end
        if not ok then return nil, err, code end
    end
    return x, err, code
end

--- pods:exec(pod, cmd, on_output) -> { exit_code, stdout, stderr, stopped } | nil, err
function Pods:exec(id, cmd, on_output)
    local x, err, code = self:exec_start(id, cmd)
    if not x then return nil, err, code end
    return engine.run_started(x, cmd, on_output)
end

local Handle = setmetatable({}, { __index = engines.Handle })
Handle.__index = Handle

--- handle:sweep(all): every process of the pod's user but the sweep's own (and the pod's
--- first), and but an interactive interpreter's tree unless all (llmbox's helper spares it)
function Handle:sweep(all)
    local argv = all and { "/bin/sh", "-c", "rm -f /tmp/llmbox/.spare; " .. engines.SWEEP }
        or { "/.llmbox/exec", "--sweep" }
    return self.engine:exec(self.id, { argv = argv, timeout_ms = INTERNAL_MS })
end

--- handle:fit(limits) -> true | nil, err: a pod's memory and CPU are its own from its making
function Handle:fit(lim)
    local ceil = self.spec.limits
    if lim.memory and ceil.memory and lim.memory < ceil.memory then
        return nil, format("the kubernetes backend cannot lower memory for one run (%d bytes asked): a pod's memory "
            .. "limit is fixed when it is made (the policy's, %d bytes); use a policy with the lower limit",
            lim.memory, ceil.memory), "EOPNOTSUPP"
    end
    if lim.cpus and lim.cpus ~= ceil.cpus then
        return nil, format("the kubernetes backend cannot change the CPU quota for one run (cpus = %g asked): a pod's "
            .. "is fixed when it is made (the policy's, %s)", lim.cpus, tostring(ceil.cpus)), "EOPNOTSUPP"
    end
    self.engine.nproc = lim.processes or ceil.processes
    return true
end

-- Why a run's exec ended badly, when the pod is the cause: deleted, evicted, or its container
-- gone (nil when the pod is as it was).
function Handle:pod_gone()
    local p, _, code = self.engine.client:get_pod(self.engine.ns, self.id)
    if not p and code == 404 then return format("pod %s was deleted during the run", self.id) end
    if not p then return nil end
    if p.metadata and p.metadata.deletionTimestamp then
        return format("pod %s was deleted during the run", self.id)
    end
    local state, why = status.pod_state(p)
    if state == "failed" then return format("pod %s failed during the run: %s", self.id, tostring(why)) end
end

--- handle:run(spec) -> result | nil, err: as the engines' run; a run the pod's end broke off
--- says so (a killed program's 137 too, when its pod is gone)
function Handle:run(spec)
    -- the policy's offline library sources are this host's directories, which no pod sees: an
    -- install that names one gets a copy in the pod for its run, at another path
    local copied
    for i, m in ipairs(self.spec.mounts or {}) do
        local used = false
        for _, a in ipairs(m.install_source and spec.argv or {}) do used = used or a:find(m.src, 1, true) ~= nil end
        if used then
            local at = SOURCES .. "/" .. i
            local ok, cerr = self:copy_in(m.src, at)
            if not ok then
                return nil, format("copying the library source %s into pod %s: %s", m.src, self.id, tostring(cerr))
            end
            local argv = {}
            local pattern = m.src:gsub("%p", "%%%0")
            for j, a in ipairs(spec.argv) do argv[j] = a:gsub(pattern, (at:gsub("%%", "%%%%"))) end
            local s2 = {}
            for k, v in pairs(spec) do s2[k] = v end
            s2.argv = argv
            spec, copied = s2, true
        end
    end
    if copied then
        local res, err, code = engines.Handle.run(self, spec)
        self.engine:exec(self.id, { argv = { "rm", "-rf", SOURCES }, timeout_ms = INTERNAL_MS })
        return res, err, code
    end
    local res, err, code = engines.Handle.run(self, spec)
    if self.id and (not res or (res.exit_code == 137 and not res.limit)) then
        local gone = self:pod_gone()
        if gone then return nil, gone .. (err and (" (" .. tostring(err) .. ")") or ""), "EPIPE" end
    end
    return res, err, code
end

function Handle:commit()
    return nil, "the kubernetes backend cannot commit a pod's workspace as an image (use docker or podman)",
        "EOPNOTSUPP"
end

function Handle:close()
    if self.id then
        local id = self.id
        self.id = nil
        local client, ns = self.engine.client, self.engine.ns
        -- a request that never got an answer (no HTTP status: a dropped connection) is tried once
        -- more; what is still left is the maintenance's (pods older than gc_after)
        local ok, _, code = client:delete_pod(ns, id)
        if not ok and not code then client:delete_pod(ns, id) end
        ok, _, code = client:delete_network_policy(ns, id)
        if not ok and not code then client:delete_network_policy(ns, id) end
    end
    return true
end

function Handle:closed() return self.id == nil end

-- The cluster's connection for a policy's kubernetes section (the spec's .kubernetes).
local function connect(k)
    k = k or {}
    local conn, err = kubeconfig.load({ context = k.context })
    if not conn then return nil, err end
    local pods = setmetatable({ conn = conn, client = api.new(conn), ns = k.namespace or conn.namespace }, Pods)
    return pods, k
end

local function refuse(fmt, ...) return nil, format(fmt, ...), "EOPNOTSUPP" end

--- open(spec) -> handle | nil, err: makes the pod, waits until it is ready (deleting it when it
--- never will be), and checks that it runs what a run needs
local function open(spec)
    local pol = spec.policy
    if not spec.image then
        return nil, "the kubernetes backend runs images: name one (image = \"...\" in Lua, --image on the command line)"
    end
    if spec.attach or spec.keep then
        return refuse("the kubernetes backend does not keep pods past their session, nor attach to one")
    end
    if spec.build then return refuse("the kubernetes backend does not build images: build and push it, then name it") end
    if spec.volumes then return refuse("host mounts (runtime.volumes) are refused on kubernetes: they name a node's files") end
    if spec.network and spec.network.mode ~= "none" then
        return refuse("the kubernetes backend gives a pod no network (network.mode = \"none\", cut by a deny-all "
            .. "NetworkPolicy); network.mode = %q is not built for it (egress: the native and bubblewrap backends, so far)",
            tostring(spec.network.mode))
    end
    if spec.limits.cgroup == "forbid" then
        return refuse("policy %q forbids cgroups (limits.cgroup), which a pod always has", pol.name)
    end
    local pods, k = connect(spec.kubernetes)
    if not pods then return nil, k end
    -- (or the operator's, for every policy: LLMBOX_KUBERNETES_ISOLATION=cluster)
    if k.isolation ~= "cluster" and os.getenv("LLMBOX_KUBERNETES_ISOLATION") ~= "cluster" then
        return nil, format("policy %q has not accepted the cluster's isolation: on kubernetes a pod's network is cut "
            .. "by a deny-all NetworkPolicy only where the cluster's network plugin enforces NetworkPolicies, and its "
            .. "namespaces, capabilities and limits are the container runtime's (llmbox adds the policy's syscall "
            .. "filter to every run); if that is acceptable, set kubernetes = { isolation = \"cluster\" } in the policy "
            .. "(or LLMBOX_KUBERNETES_ISOLATION=cluster in the environment, for every policy)",
            pol.name), "EPERM"
    end
    local helpers, herr = helpers_config_map(pods)
    if not helpers then return nil, herr end
    local session = util.random_hex(6)
    local name = "llmbox-" .. session
    local p, err = kpod.build(spec, { name = name, namespace = pods.ns, image = spec.image, command = KEEPER,
        session = session, labels = k.labels, annotations = k.annotations, manifest = k.pod_manifest,
        helpers = helpers })
    if not p then return nil, err, "EINVAL" end
    p.metadata.annotations[OWNER] = (engines.owner_label():gsub("/", "."))
    local env = p.spec.containers[1].env or {}
    for _, lib in ipairs(SCRIPT_ENV) do env[#env + 1] = { name = lib.name, value = lib.text } end
    local filter
    filter, err = filter_hex(spec.syscalls)
    if not filter then return nil, err end
    env[#env + 1] = { name = "LLMBOX_FILTER_BPF", value = filter }
    p.spec.containers[1].env = env
    -- the pod's network is cut before the pod exists: a refusal (RBAC) leaves nothing running
    local made
    made, err = pods.client:create_network_policy(kpod.network_policy(name, pods.ns, session, k.labels))
    if not made then
        return nil, err .. " (the kubernetes backend cuts each pod's network with a NetworkPolicy: the credentials "
            .. "need create and delete on networkpolicies in the namespace)"
    end
    made, err = pods.client:create_pod(p)
    if not made then
        pods.client:delete_network_policy(pods.ns, name)
        return nil, err
    end
    local h = setmetatable({ engine = pods, kind = "kubernetes", spec = spec, id = name, drop = "pod",
        root_wrapper = false, keeper = 1, ceilings = { memory = spec.limits.memory, processes = spec.limits.processes,
            cpus = spec.limits.cpus } }, Handle)
    local ready
    ready, err = pods.client:wait_ready(pods.ns, name, k.ready_timeout or 120)
    if not ready then
        h:close()
        -- (the helpers' configMap is looked for again next time: someone may have deleted it)
        made_helpers = {}
        return nil, err
    end
    -- the workspace the runs write: the pod's emptyDir, which must be the pod user's; and the
    -- syscall filter's loader must load it on the pod's node (its architecture, its kernel)
    local res
    res, err = pods:exec(name, { argv = { "/bin/sh", "-c", OPEN_PROBE }, timeout_ms = INTERNAL_MS })
    if not res or res.exit_code ~= 0 then
        h:close()
        local why = res and (res.stderr ~= "" and res.stderr:gsub("%s+$", "") or ("exit " .. tostring(res.exit_code)))
        if res and res.exit_code == 3 then
            return nil, format("pod %s cannot run llmbox's helpers and syscall filter (they are built for %s): %s",
                name, ({ x64 = "x86_64", arm64 = "aarch64" })[jit.arch] or jit.arch, why)
        end
        return nil, format("pod %s started, but its /sandbox and /tmp are not writable by its user: %s", name,
            tostring(why or err))
    end
    return h
end

local function driver()
    local D = { name = "kubernetes", layout = container.layout,
        description = "pods through the Kubernetes API (images; needs a cluster and its kubeconfig)" }
    D.capabilities = {
        -- network_policy: a deny-all NetworkPolicy per pod, under the accepted cluster isolation;
        -- seccomp: the policy's own filter on each run's program (pod-filter), on top of the pod's
        pool = true, persistent_workspace = true, network_policy = true, seccomp = true, images = true,
        interactive = true, existing_sandbox = false, egress = false, commit = false, rootfs = false,
        -- (a pod's memory and CPU are fixed when it is made)
        run_limits = false,
    }

    function D.usable()
        local pods, err = connect(policy_mod.load(os.getenv("LLMBOX_POLICY") or "default").kubernetes)
        if not pods then return false, err end
        local v
        v, err = pods.client:request("GET", "/version", nil, "asking the API server its version")
        if not v then return false, err end
        return true
    end

    --- D.describe() -> ok, detail: for `llmbox doctor`: which API server answers, the namespace,
    --- and whether the policy in force ($LLMBOX_POLICY, else default) accepts the cluster's isolation
    function D.describe()
        local pol = policy_mod.load(os.getenv("LLMBOX_POLICY") or "default")
        local pods, err = connect(pol.kubernetes)
        if not pods then return false, "not usable here: " .. tostring(err) end
        local v
        v, err = pods.client:request("GET", "/version", nil, "asking the API server its version")
        if not v then return false, "not usable here: " .. tostring(err) end
        local accepted = (pol.kubernetes or {}).isolation == "cluster" or os.getenv("LLMBOX_KUBERNETES_ISOLATION") == "cluster"
        return true, format("usable: the API server at %s answers (Kubernetes %s), namespace %s; policy %q %s", pods.conn.server,
            tostring(v.gitVersion), pods.ns, pol.name, accepted and "accepts the cluster's isolation"
            or "has not accepted the cluster's isolation (sessions are refused: use -p kubernetes)")
    end

    --- D.maintain() -> true | nil, err: deletes llmbox's pods whose maker died: at once when it
    --- was a process of this machine, else once older than the policy's gc_after
    function D.maintain()
        local pol = policy_mod.load(os.getenv("LLMBOX_POLICY") or "default")
        local pods, k = connect(pol.kubernetes)
        if not pods then return nil, k end
        local list, err = pods.client:list_pods(pods.ns, { [kpod.LABEL_MANAGED] = "llmbox" })
        if not list then return nil, err end
        local boot, now = engines.boot_id(), os.time()
        for _, p in ipairs(list.items or {}) do
            local md = p.metadata or {}
            local owner = (md.annotations or {})[OWNER] or ""
            local b, pid, start = owner:match("^([^.]+)%.(%d+)%.(%d+)$")
            local created = tonumber((md.labels or {})[kpod.LABEL_CREATED])
            local dead = b == boot and not engines.alive(tonumber(pid), start)
            local old = b ~= boot and created and now - created > (k.gc_after or 3600)
            if dead or old then
                pods.client:delete_pod(pods.ns, md.name)
                pods.client:delete_network_policy(pods.ns, md.name)
            end
        end
        return true
    end

    function D.open(spec) return open(spec) end
    function D.open_start(spec) return task.new(open, spec) end
    return D
end

return driver()
