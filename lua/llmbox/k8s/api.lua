-- The Kubernetes API for pods (issue 17): create, get, list by label, delete, wait until ready,
-- and collect what a crashed caller left, over llmbox.http (libcurl) with the credentials
-- llmbox.k8s.kubeconfig read (the CA, client certificate and key passed as PEM in memory, a
-- bearer token as a header). Every refusal is explained (llmbox.k8s.status), naming what llmbox
-- was doing.
local http = require "llmbox.http"
local json = require "llmbox.json"
local status = require "llmbox.k8s.status"
local pod = require "llmbox.k8s.pod"
local util = require "llmbox.util"

local setmetatable, tostring, format = setmetatable, tostring, string.format

local _M = {}

local Client = {}
Client.__index = Client

--- api.new(conn [, opts]) -> client: conn from kubeconfig.load; opts.timeout_ms per request
function _M.new(conn, opts)
    return setmetatable({ conn = conn, timeout_ms = opts and opts.timeout_ms or 30000 }, Client)
end

local escape = util.url_encode

-- One request; the decoded answer, or nil, err (explained) [, HTTP status].
function Client:request(method, path, body, doing)
    local c = self.conn
    local headers = { "Accept: application/json" }
    if body then headers[#headers + 1] = "Content-Type: application/json" end
    if c.token then headers[#headers + 1] = "Authorization: Bearer " .. c.token end
    local res, err = http.request({ url = c.server .. path, method = method, headers = headers,
        body = body and json.encode(body) or nil, ca_pem = c.ca, cert_pem = c.cert, key_pem = c.key,
        timeout_ms = self.timeout_ms, connect_timeout_ms = 10000, max_body = 64 * 1024 * 1024 })
    if not res then
        return nil, format("%s: the API server at %s cannot be reached: %s", doing, c.server, tostring(err))
    end
    if res.status < 200 or res.status > 299 then
        return nil, status.api_error(res.status, res.body, doing), res.status
    end
    local decoded = json.decode(res.body)
    if type(decoded) ~= "table" then
        return nil, format("%s: the API server's answer is not JSON", doing)
    end
    return decoded, nil, res.status
end

local function pods_path(ns, name)
    return "/api/v1/namespaces/" .. escape(ns) .. "/pods" .. (name and ("/" .. escape(name)) or "")
end

function Client:create_pod(p)
    local ns, name = p.metadata.namespace, p.metadata.name
    return self:request("POST", pods_path(ns), p, format("creating pod %s in namespace %s", name, ns))
end

function Client:get_pod(ns, name)
    return self:request("GET", pods_path(ns, name), nil, format("reading pod %s in namespace %s", name, ns))
end

function Client:delete_pod(ns, name)
    return self:request("DELETE", pods_path(ns, name), nil, format("deleting pod %s in namespace %s", name, ns))
end

local function netpol_path(ns, name)
    return "/apis/networking.k8s.io/v1/namespaces/" .. escape(ns) .. "/networkpolicies"
        .. (name and ("/" .. escape(name)) or "")
end

--- client:create_network_policy(np) / client:delete_network_policy(ns, name): a pod's
--- deny-all NetworkPolicy (networking.k8s.io/v1)
function Client:create_network_policy(np)
    local ns, name = np.metadata.namespace, np.metadata.name
    return self:request("POST", netpol_path(ns), np, format("creating network policy %s in namespace %s", name, ns))
end

function Client:delete_network_policy(ns, name)
    return self:request("DELETE", netpol_path(ns, name), nil,
        format("deleting network policy %s in namespace %s", name, ns))
end

local function config_map_path(ns, name)
    return "/api/v1/namespaces/" .. escape(ns) .. "/configmaps" .. (name and ("/" .. escape(name)) or "")
end

--- client:get_config_map(ns, name) / client:create_config_map(cm): llmbox's helpers for pods
function Client:get_config_map(ns, name)
    return self:request("GET", config_map_path(ns, name), nil, format("reading configmap %s in namespace %s", name, ns))
end

function Client:create_config_map(cm)
    local ns, name = cm.metadata.namespace, cm.metadata.name
    return self:request("POST", config_map_path(ns), cm, format("creating configmap %s in namespace %s", name, ns))
end

--- client:list_pods(ns, labels) -> PodList | nil, err: labels { key = value } all to match
function Client:list_pods(ns, labels)
    local terms = {}
    for k, v in pairs(labels or {}) do terms[#terms + 1] = k .. "=" .. v end
    table.sort(terms)
    local q = #terms > 0 and ("?labelSelector=" .. escape(table.concat(terms, ","))) or ""
    return self:request("GET", pods_path(ns) .. q, nil, format("listing pods in namespace %s", ns))
end

--- client:wait_ready(ns, name, timeout_s [, sleep]) -> pod | nil, err: polls every 200 ms until
--- the pod is ready, fails as soon as it never will be (its image, eviction...), or times out
--- saying what it was waiting for. sleep(ms): how to wait (an event loop's), else util.sleep_ms.
function Client:wait_ready(ns, name, timeout_s, sleep)
    sleep = sleep or util.sleep_ms
    local deadline = os.time() + timeout_s
    local why
    repeat
        local p, err = self:get_pod(ns, name)
        if not p then return nil, err end
        local state
        state, why = status.pod_state(p)
        if state == "ready" then return p end
        if state == "failed" then return nil, why end
        sleep(200)
    until os.time() >= deadline
    return nil, format("pod %s was not ready within %d s: %s", name, timeout_s, tostring(why))
end

--- client:collect_leftovers(ns, max_age_s [, now]) -> { deleted name, ... } | nil, err: llmbox's
--- pods older than max_age_s (by their creation label), deleted
function Client:collect_leftovers(ns, max_age, now)
    local list, err = self:list_pods(ns, { [pod.LABEL_MANAGED] = "llmbox" })
    if not list then return nil, err end
    local gone = {}
    for _, name in ipairs(status.leftovers(list, now or os.time(), max_age)) do
        local ok, derr, code = self:delete_pod(ns, name)
        if not ok and code ~= 404 then return nil, derr end
        gone[#gone + 1] = name
    end
    return gone
end

return _M
