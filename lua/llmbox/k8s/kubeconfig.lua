-- Where a Kubernetes API server is and how to prove who we are to it (issue 17): a kubeconfig
-- (the files in KUBECONFIG, else ~/.kube/config), read as kubectl reads it, or, inside a pod,
-- its service account. The result is what the HTTP client needs and nothing else:
--
--   { server = "https://host:port", ca = PEM | nil, cert = PEM | nil, key = PEM | nil,
--     token = string | nil, namespace = "default", context = name, source = where it came from }
--
-- TLS verification is never switched off: a kubeconfig that asks for it
-- (insecure-skip-tls-verify) is refused, naming the cluster, as are the ways of signing in that
-- llmbox does not take (exec and auth-provider plugins, basic auth), each with what to use instead.
local lyaml = require "lyaml"
local artifacts = require "llmbox.artifacts"
local util = require "llmbox.util"

local type, ipairs, tostring, format = type, ipairs, tostring, string.format

local _M = {}

-- The service account's files, as the kubelet mounts them in every pod that has one.
_M.SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"

local function is_null(v)
    return v == nil or v == lyaml.null
end

-- One kubeconfig file: its parsed table, or nil, err naming the file.
local function read_file(path)
    local text = util.read_file(path)
    if not text then return nil, format("kubeconfig %s cannot be read", path) end
    local ok, doc = pcall(lyaml.load, text)
    if not ok then
        return nil, format("kubeconfig %s is not valid YAML: %s", path, tostring(doc):gsub("^.-: ", ""))
    end
    if is_null(doc) then doc = {} end
    if type(doc) ~= "table" then return nil, format("kubeconfig %s: expected a mapping at the top", path) end
    return doc
end

-- Merges the files as kubectl does: the first file to name a cluster, user or context (or the
-- current context) wins.
local function merge(files)
    local m = { clusters = {}, users = {}, contexts = {}, dirs = {} }
    for _, f in ipairs(files) do
        local doc, path = f.doc, f.path
        local dir = path:match("^(.*)/[^/]*$") or "."
        if is_null(m.current) and type(doc["current-context"]) == "string" and doc["current-context"] ~= "" then
            m.current = doc["current-context"]
        end
        for _, kind in ipairs({ "clusters", "users", "contexts" }) do
            local list = doc[kind]
            if not is_null(list) then
                if type(list) ~= "table" then
                    return nil, format("kubeconfig %s: %s must be a list", path, kind)
                end
                local item = kind:sub(1, -2) -- cluster, user, context
                for i, e in ipairs(list) do
                    if type(e) ~= "table" or type(e.name) ~= "string" then
                        return nil, format("kubeconfig %s: %s[%d] has no name", path, kind, i)
                    end
                    if not m[kind][e.name] then
                        local body = e[item]
                        if type(body) ~= "table" then
                            return nil, format("kubeconfig %s: %s %q has no %s: mapping", path, item, e.name, item)
                        end
                        m[kind][e.name] = body
                        m.dirs[body] = dir
                    end
                end
            end
        end
    end
    return m
end

-- Bytes from FIELD-data (base64) or FIELD (a file, relative to the kubeconfig's directory).
local function pem(body, field, what, dir)
    local data = body[field .. "-data"]
    if not is_null(data) then
        local bytes, err = artifacts.unbase64(tostring(data))
        if not bytes then return nil, format("%s: %s-data is %s", what, field, err) end
        return bytes
    end
    local path = body[field]
    if is_null(path) then return nil end
    path = tostring(path)
    if path:sub(1, 1) ~= "/" then path = dir .. "/" .. path end
    local bytes = util.read_file(path)
    if not bytes then return nil, format("%s: %s %s cannot be read", what, field, path) end
    return bytes
end

local function check_server(server, what)
    if type(server) ~= "string" or server == "" then
        return nil, format("%s has no server: set clusters[].cluster.server to the API server's https:// URL", what)
    end
    if not server:match("^https://[^/]") and not server:match("^http://[^/]") then
        return nil, format("%s: server %q is not an http(s):// URL", what, server)
    end
    return server:gsub("/+$", "")
end

--- kubeconfig.from_files(paths [, context]) -> conn | nil, err
function _M.from_files(paths, context)
    local files = {}
    for _, path in ipairs(paths) do
        if util.read_file(path) then
            local doc, err = read_file(path)
            if not doc then return nil, err end
            files[#files + 1] = { path = path, doc = doc }
        end
    end
    if #files == 0 then
        return nil, format("no kubeconfig at %s", table.concat(paths, ", "))
    end
    local m, err = merge(files)
    if not m then return nil, err end
    local source = table.concat(paths, ":")
    local name = context or m.current
    if is_null(name) then
        return nil, format("kubeconfig %s names no current-context: run `kubectl config use-context NAME`", source)
    end
    local ctx = m.contexts[name]
    if not ctx then return nil, format("kubeconfig %s: context %q is not defined", source, name) end
    local cluster = m.clusters[ctx.cluster or ""]
    if not cluster then
        return nil, format("kubeconfig %s: context %q names cluster %q, which is not defined", source, name,
            tostring(ctx.cluster))
    end
    local what = format("cluster %q (kubeconfig %s)", tostring(ctx.cluster), source)
    if cluster["insecure-skip-tls-verify"] == true then
        return nil, format("%s sets insecure-skip-tls-verify: llmbox never switches TLS verification off; give the "
            .. "cluster's CA (certificate-authority-data or certificate-authority)", what)
    end
    local conn = { context = name, source = source }
    conn.server, err = check_server(cluster.server, what)
    if not conn.server then return nil, err end
    local dir = m.dirs[cluster]
    conn.ca, err = pem(cluster, "certificate-authority", what, dir)
    if err then return nil, err end
    local user = m.users[ctx.user or ""]
    if ctx.user and not user then
        return nil, format("kubeconfig %s: context %q names user %q, which is not defined", source, name, ctx.user)
    end
    if user then
        local uwhat = format("user %q (kubeconfig %s)", tostring(ctx.user), source)
        for _, unsupported in ipairs({ { "exec", "an exec credential plugin" }, { "auth-provider", "an auth provider" } }) do
            if not is_null(user[unsupported[1]]) then
                return nil, format("%s signs in with %s, which llmbox does not run: give it a token (token or "
                    .. "tokenFile) or a client certificate and key", uwhat, unsupported[2])
            end
        end
        if not is_null(user.username) or not is_null(user.password) then
            return nil, format("%s uses basic authentication, which Kubernetes no longer offers: give it a token "
                .. "or a client certificate and key", uwhat)
        end
        local udir = m.dirs[user]
        conn.cert, err = pem(user, "client-certificate", uwhat, udir)
        if err then return nil, err end
        conn.key, err = pem(user, "client-key", uwhat, udir)
        if err then return nil, err end
        if (conn.cert == nil) ~= (conn.key == nil) then
            return nil, format("%s has a client %s without its %s", uwhat, conn.cert and "certificate" or "key",
                conn.cert and "key" or "certificate")
        end
        if not is_null(user.token) then
            conn.token = tostring(user.token)
        elseif not is_null(user.tokenFile) then
            local path = tostring(user.tokenFile)
            if path:sub(1, 1) ~= "/" then path = udir .. "/" .. path end
            local t = util.read_file(path)
            if not t then return nil, format("%s: tokenFile %s cannot be read", uwhat, path) end
            conn.token = t:gsub("%s+$", "")
        end
    end
    conn.namespace = (type(ctx.namespace) == "string" and ctx.namespace ~= "") and ctx.namespace or "default"
    return conn
end

--- kubeconfig.in_cluster([getenv, dir]) -> conn | nil, err: the pod's own service account
function _M.in_cluster(getenv, dir)
    getenv = getenv or os.getenv
    dir = dir or _M.SERVICE_ACCOUNT
    local host, port = getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
    if not host or host == "" then return nil, "not in a pod: KUBERNETES_SERVICE_HOST is not set" end
    local token = util.read_file(dir .. "/token")
    if not token then return nil, format("in a pod, but its service account token %s/token cannot be read", dir) end
    local ca = util.read_file(dir .. "/ca.crt")
    if not ca then return nil, format("in a pod, but its service account CA %s/ca.crt cannot be read", dir) end
    local ns = util.read_file(dir .. "/namespace")
    if host:find(":", 1, true) then host = "[" .. host .. "]" end
    return { server = format("https://%s:%s", host, port or "443"), ca = ca, token = token:gsub("%s+$", ""),
        namespace = ns and ns:gsub("%s+$", "") or "default", context = "in-cluster", source = dir }
end

--- kubeconfig.load([opts]) -> conn | nil, err: opts.kubeconfig (a path list, as KUBECONFIG),
--- opts.context, opts.getenv. KUBECONFIG, else ~/.kube/config, else the pod's service account.
function _M.load(opts)
    opts = opts or {}
    local getenv = opts.getenv or os.getenv
    local list = opts.kubeconfig or getenv("KUBECONFIG")
    local paths = {}
    if list and list ~= "" then
        for p in list:gmatch("[^:]+") do paths[#paths + 1] = p end
        return _M.from_files(paths, opts.context)
    end
    local home = getenv("HOME")
    local default = home and (home .. "/.kube/config")
    if default and util.read_file(default) then return _M.from_files({ default }, opts.context) end
    local conn, err = _M.in_cluster(getenv, opts.service_account)
    if conn then return conn end
    return nil, format("no Kubernetes credentials: set KUBECONFIG, or write %s (%s)",
        default or "~/.kube/config", err)
end

return _M
