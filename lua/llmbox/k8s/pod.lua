-- The pod a Kubernetes sandbox is (issue 17): a hardened default made from the neutral sandbox
-- spec (llmbox.plan), with a caller's pod_manifest (as the seed takes it) merged in and then
-- checked, so that a manifest can add what a cluster needs (node selectors, tolerations, labels,
-- a runtime class) but never take away what the policy promised. A refusal names the field.
--
-- The default: runs as 1000:1000 and never as root (runAsNonRoot), seccomp RuntimeDefault, no
-- privilege escalation, every capability dropped, a read-only root with emptyDir volumes for
-- the workspace (/sandbox, the policy's size) and /tmp (memory-backed, the policy's size), the
-- policy's memory and CPU as requests and limits, no service-account token, no host
-- namespaces, no service links, never restarted. Labels say it is llmbox's and when it was
-- made, so pods a crashed caller left behind can be found and collected by label and age.
local json = require "llmbox.json"

local type, ipairs, pairs, next, getmetatable, tostring, format, floor = type, ipairs, pairs, next, getmetatable,
    tostring, string.format, math.floor

local _M = {}

_M.CONTAINER = "sandbox"
_M.LABEL_MANAGED = "app.kubernetes.io/managed-by"
_M.LABEL_SESSION = "llmbox.dev/session"
_M.LABEL_CREATED = "llmbox.dev/created"
local SANDBOX_ID = 1000

-- Kubernetes quantities: bytes as Ki/Mi/Gi when exact, CPUs as millicores.
local function bytes_quantity(n)
    n = floor(n)
    for _, u in ipairs({ { "Gi", 2 ^ 30 }, { "Mi", 2 ^ 20 }, { "Ki", 2 ^ 10 } }) do
        if n >= u[2] and n % u[2] == 0 then return format("%d%s", n / u[2], u[1]) end
    end
    return tostring(n)
end
local function cpu_quantity(cpus) return format("%dm", floor(cpus * 1000 + 0.5)) end
_M.bytes_quantity, _M.cpu_quantity = bytes_quantity, cpu_quantity

--- pod.default(spec, opts) -> pod: the hardened pod for a neutral sandbox spec.
--- opts: name, namespace, image, command (the keeper), session (an id), now (seconds), labels,
--- annotations (the policy's), helpers (a configMap with llmbox's programs: read-only at
--- /.llmbox, executable)
function _M.default(spec, opts)
    local lim = spec.limits
    local labels = { [_M.LABEL_MANAGED] = "llmbox", [_M.LABEL_SESSION] = opts.session,
        [_M.LABEL_CREATED] = tostring(floor(opts.now or os.time())) }
    for k, v in pairs(opts.labels or {}) do
        if labels[k] == nil then labels[k] = v end
    end
    local resources = { requests = {}, limits = {} }
    if lim.memory then
        resources.requests.memory = bytes_quantity(lim.memory)
        resources.limits.memory = bytes_quantity(lim.memory)
    end
    if lim.cpus then
        resources.requests.cpu = cpu_quantity(lim.cpus)
        resources.limits.cpu = cpu_quantity(lim.cpus)
    end
    resources.limits["ephemeral-storage"] = bytes_quantity(lim.workspace + lim.tmp)
    local p = {
        apiVersion = "v1",
        kind = "Pod",
        metadata = { name = opts.name, namespace = opts.namespace, labels = labels,
            annotations = opts.annotations or {} },
        spec = {
            restartPolicy = "Never",
            automountServiceAccountToken = false,
            enableServiceLinks = false,
            hostNetwork = false,
            hostPID = false,
            hostIPC = false,
            shareProcessNamespace = false,
            terminationGracePeriodSeconds = 1,
            hostname = spec.hostname,
            securityContext = {
                runAsNonRoot = true,
                runAsUser = SANDBOX_ID,
                runAsGroup = SANDBOX_ID,
                fsGroup = SANDBOX_ID,
                seccompProfile = { type = "RuntimeDefault" },
            },
            containers = { {
                name = _M.CONTAINER,
                image = opts.image,
                command = opts.command,
                workingDir = "/sandbox",
                stdin = false,
                tty = false,
                securityContext = {
                    runAsNonRoot = true,
                    allowPrivilegeEscalation = false,
                    privileged = false,
                    readOnlyRootFilesystem = true,
                    capabilities = { drop = { "ALL" } },
                    seccompProfile = { type = "RuntimeDefault" },
                },
                resources = resources,
                volumeMounts = { { name = "workspace", mountPath = "/sandbox" }, { name = "tmp", mountPath = "/tmp" } },
            } },
            volumes = {
                { name = "workspace", emptyDir = { sizeLimit = bytes_quantity(lim.workspace) } },
                { name = "tmp", emptyDir = { medium = "Memory", sizeLimit = bytes_quantity(lim.tmp) } },
            },
        },
    }
    if opts.helpers then
        local c = p.spec.containers[1]
        c.volumeMounts[#c.volumeMounts + 1] = { name = "llmbox", mountPath = "/.llmbox", readOnly = true }
        -- (0555: every file executable, none writable)
        p.spec.volumes[#p.spec.volumes + 1] = { name = "llmbox", configMap = { name = opts.helpers, defaultMode = 365 } }
    end
    return p
end

--- pod.network_policy(name, namespace, session, labels) -> a NetworkPolicy that selects the
--- session's pod and allows it nothing, in or out (a cluster whose network plugin enforces
--- NetworkPolicies cuts the pod off; the pod still has its loopback)
function _M.network_policy(name, namespace, session, labels)
    local l = { [_M.LABEL_MANAGED] = "llmbox", [_M.LABEL_SESSION] = session }
    for k, v in pairs(labels or {}) do
        if l[k] == nil then l[k] = v end
    end
    return {
        apiVersion = "networking.k8s.io/v1",
        kind = "NetworkPolicy",
        metadata = { name = name, namespace = namespace, labels = l },
        spec = {
            podSelector = { matchLabels = { [_M.LABEL_SESSION] = session } },
            policyTypes = { "Ingress", "Egress" },
        },
    }
end

local function is_array(t)
    return type(t) == "table" and (t[1] ~= nil or getmetatable(t) == json.array_mt)
end

-- Merges b into a (a is changed): mappings key by key, lists item by item (containers and
-- volumes by name, so a manifest's containers[0] or a named volume adds to the default's),
-- scalars replaced.
local function merge(a, b)
    if type(a) ~= "table" or type(b) ~= "table" then return b end
    if is_array(a) and is_array(b) then
        for _, item in ipairs(b) do
            local into
            if type(item) == "table" and item.name ~= nil then
                for _, have in ipairs(a) do
                    if type(have) == "table" and have.name == item.name then into = have end
                end
            end
            if into then merge(into, item) else a[#a + 1] = item end
        end
        return a
    end
    for k, v in pairs(b) do a[k] = merge(a[k], v) end
    return a
end

-- What a manifest may never set, each with why: (path pattern, predicate, reason).
local function refusals(pod, policy_name)
    local out = {}
    local function refuse(path, value, why)
        out[#out + 1] = format("pod_manifest: %s = %s is refused by policy %q (%s)", path, json.encode(value),
            policy_name, why)
    end
    local s = pod.spec or {}
    for _, f in ipairs({ "hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace", "automountServiceAccountToken" }) do
        if s[f] == true then
            refuse("spec." .. f, true, f == "automountServiceAccountToken"
                and "a service-account token lets the code talk to the API server"
                or "it shares the node's or other containers' namespaces")
        end
    end
    -- (hostUsers = false, a user namespace for the pod, is stricter: allowed)
    if s.hostUsers ~= nil and type(s.hostUsers) ~= "boolean" then refuse("spec.hostUsers", s.hostUsers, "not a boolean") end
    if s.restartPolicy ~= "Never" then refuse("spec.restartPolicy", s.restartPolicy, "a sandbox is never restarted") end
    local psc = s.securityContext or {}
    if psc.runAsNonRoot ~= true then refuse("spec.securityContext.runAsNonRoot", psc.runAsNonRoot, "code never runs as root") end
    if psc.runAsUser == 0 then refuse("spec.securityContext.runAsUser", 0, "code never runs as root") end
    if psc.sysctls and next(psc.sysctls) then
        refuse("spec.securityContext.sysctls", psc.sysctls, "kernel tunables stay the node's")
    end
    local sp = psc.seccompProfile or {}
    if sp.type ~= "RuntimeDefault" and sp.type ~= "Localhost" then
        refuse("spec.securityContext.seccompProfile.type", sp.type, "a seccomp profile is always loaded")
    end
    for _, list in ipairs({ "initContainers", "ephemeralContainers" }) do
        if s[list] and next(s[list]) then refuse("spec." .. list, s[list], "only llmbox's container runs in the pod") end
    end
    local containers = s.containers or {}
    if #containers ~= 1 then
        refuse("spec.containers", #containers .. " containers", "only llmbox's container runs in the pod")
    end
    for i, c in ipairs(containers) do
        local at = format("spec.containers[%d]", i - 1)
        local sc = c.securityContext or {}
        local at_sc = at .. ".securityContext."
        if sc.privileged == true then refuse(at_sc .. "privileged", true, "a privileged container is root on the node") end
        if sc.allowPrivilegeEscalation ~= false then
            refuse(at_sc .. "allowPrivilegeEscalation", sc.allowPrivilegeEscalation,
                "no setuid program may raise privileges")
        end
        if sc.readOnlyRootFilesystem ~= true then
            refuse(at_sc .. "readOnlyRootFilesystem", sc.readOnlyRootFilesystem, "only the workspace and /tmp are writable")
        end
        if sc.runAsUser == 0 or sc.runAsNonRoot == false then
            refuse(at .. ".securityContext.runAsUser", sc.runAsUser or 0, "code never runs as root")
        end
        if sc.procMount and sc.procMount ~= "Default" then refuse(at_sc .. "procMount", sc.procMount, "/proc stays masked") end
        local caps = sc.capabilities or {}
        if caps.add and next(caps.add) then refuse(at_sc .. "capabilities.add", caps.add, "no capability is granted") end
        local dropped = false
        for _, cap in ipairs(caps.drop or {}) do dropped = dropped or cap == "ALL" end
        if not dropped then refuse(at_sc .. "capabilities.drop", caps.drop or {}, "every capability is dropped") end
        if sc.seccompProfile and sc.seccompProfile.type == "Unconfined" then
            refuse(at_sc .. "seccompProfile.type", "Unconfined", "a seccomp profile is always loaded")
        end
        for j, p in ipairs(c.ports or {}) do
            if p.hostPort then
                refuse(format("%s.ports[%d].hostPort", at, j - 1), p.hostPort, "nothing listens on the node")
            end
        end
    end
    for i, v in ipairs(s.volumes or {}) do
        local kind
        for k in pairs(v) do
            if k ~= "name" then kind = k end
        end
        if kind ~= "emptyDir" and kind ~= "configMap" and kind ~= "downwardAPI" then
            refuse(format("spec.volumes[%d].%s", i - 1, tostring(kind)), v[kind] or true,
                "only emptyDir, configMap and downwardAPI volumes: nothing of the node or the cluster's secrets")
        end
    end
    return out
end

--- pod.build(spec, opts) -> pod | nil, err: the default with opts.manifest (a pod_manifest,
--- Lua table or JSON text) merged in and checked against the policy. metadata.name and
--- namespace stay llmbox's; the container's image is the session's unless the manifest names one.
function _M.build(spec, opts)
    local pod = _M.default(spec, opts)
    local m = opts.manifest
    if type(m) == "string" then
        local ok, decoded = pcall(json.decode, m)
        if not ok or type(decoded) ~= "table" then
            return nil, "pod_manifest is not a JSON object: " .. tostring(ok and "not an object" or decoded)
        end
        m = decoded
    end
    if m ~= nil and type(m) ~= "table" then return nil, "pod_manifest must be a table (a pod's fields)" end
    if m then
        if m.kind ~= nil and m.kind ~= "Pod" then
            return nil, format("pod_manifest: kind = %q: a Pod is expected", tostring(m.kind))
        end
        local md = m.metadata or {}
        for _, f in ipairs({ "name", "namespace", "generateName" }) do
            if md[f] ~= nil then
                return nil, format("pod_manifest: metadata.%s is llmbox's (the policy's kubernetes.namespace sets "
                    .. "the namespace)", f)
            end
        end
        merge(pod, m)
        -- llmbox's own labels stay
        pod.metadata.labels[_M.LABEL_MANAGED] = "llmbox"
        pod.metadata.labels[_M.LABEL_SESSION] = opts.session
    end
    local refused = refusals(pod, spec.policy and spec.policy.name or "?")
    if #refused > 0 then return nil, table.concat(refused, "; ") end
    return pod
end

return _M
