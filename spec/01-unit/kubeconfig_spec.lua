-- Kubernetes credentials (issue 17): kubeconfig files read as kubectl reads them, the pod's
-- service account, and the refusals (TLS verification off, plugins, basic auth) with what to do.
local kubeconfig = require "llmbox.k8s.kubeconfig"
local artifacts = require "llmbox.artifacts"
local helpers = require "spec.helpers"

local CA = "-----BEGIN CERTIFICATE-----\nMIIB-the-cluster-ca\n-----END CERTIFICATE-----\n"
local CERT = "-----BEGIN CERTIFICATE-----\nMIIB-the-client\n-----END CERTIFICATE-----\n"
local KEY = "-----BEGIN EC PRIVATE KEY-----\nMHc-the-key\n-----END EC PRIVATE KEY-----\n"

-- A kubeconfig as `kubectl config set-cluster/set-credentials/set-context` writes one.
local function kubeconfig_text(o)
    return ([[
apiVersion: v1
kind: Config
current-context: %s
clusters:
- name: %s
  cluster:
    server: %s
%s
users:
- name: dev
  user:
%s
contexts:
- name: dev@lab
  context:
    cluster: lab
    user: dev
    namespace: sandboxes
- name: other
  context:
    cluster: lab
    user: dev
]]):format(o.current or "dev@lab", o.cluster_name or "lab", o.server or "https://127.0.0.1:6443",
        o.cluster or ("    certificate-authority-data: " .. artifacts.base64(CA)),
        o.user or ("    client-certificate-data: " .. artifacts.base64(CERT) .. "\n    client-key-data: "
            .. artifacts.base64(KEY)))
end

local function write_config(o)
    local dir = helpers.tmpdir()
    local path = dir .. "/config"
    helpers.write(path, kubeconfig_text(o or {}))
    return path, dir
end

describe("kubeconfig #unpriv", function()
    it("resolves the current context: server, CA, client certificate and key, namespace", function()
        local path = write_config()
        local c = assert(kubeconfig.load({ kubeconfig = path }))
        assert.equal("https://127.0.0.1:6443", c.server)
        assert.equal(CA, c.ca)
        assert.equal(CERT, c.cert)
        assert.equal(KEY, c.key)
        assert.equal("sandboxes", c.namespace)
        assert.equal("dev@lab", c.context)
        -- another context; without a namespace it is "default"
        c = assert(kubeconfig.load({ kubeconfig = path, context = "other" }))
        assert.equal("default", c.namespace)
    end)

    it("reads files named relative to the kubeconfig's directory, and tokens from a file", function()
        local dir = helpers.tmpdir()
        helpers.write(dir .. "/ca.crt", CA)
        helpers.write(dir .. "/token", "s3cr3t-token\n")
        helpers.write(dir .. "/config", kubeconfig_text({ cluster = "    certificate-authority: ca.crt",
            user = "    tokenFile: token" }))
        local c = assert(kubeconfig.load({ kubeconfig = dir .. "/config" }))
        assert.equal(CA, c.ca)
        assert.equal("s3cr3t-token", c.token)
        assert.is_nil(c.cert)
    end)

    it("merges KUBECONFIG's files as kubectl does: the first to name something wins", function()
        local first = write_config({ current = "other", server = "https://first.example:6443" })
        local second = write_config({ server = "https://second.example:6443" })
        local c = assert(kubeconfig.load({ getenv = function(k)
            if k == "KUBECONFIG" then return first .. ":/nonexistent/config:" .. second end
        end }))
        assert.equal("other", c.context)
        assert.equal("https://first.example:6443", c.server)
    end)

    it("never switches TLS verification off, and says what to give instead", function()
        local path = write_config({ cluster = "    insecure-skip-tls-verify: true" })
        local c, err = kubeconfig.load({ kubeconfig = path })
        assert.is_nil(c)
        assert.matches('cluster "lab" %(kubeconfig .-%) sets insecure%-skip%-tls%-verify: llmbox never switches TLS '
            .. "verification off; give the cluster's CA", err)
    end)

    it("refuses sign-ins it does not take, naming the user and what to use", function()
        for _, case in ipairs({
            { "    exec:\n      command: aws\n      apiVersion: client.authentication.k8s.io/v1", "an exec credential plugin" },
            { "    auth-provider:\n      name: gcp", "an auth provider" },
            { "    username: admin\n    password: admin", "basic authentication" },
            { "    client-certificate-data: " .. artifacts.base64(CERT), "a client certificate without its key" },
        }) do
            local c, err = kubeconfig.load({ kubeconfig = write_config({ user = case[1] }) })
            assert.is_nil(c)
            assert.matches('user "dev"', err, 1, true)
            assert.matches(case[2], err, 1, true)
        end
    end)

    it("names what is missing or broken", function()
        local cases = {
            { write_config({ current = "nowhere" }), 'context "nowhere" is not defined' },
            { write_config({ cluster_name = "elsewhere" }), 'context "dev@lab" names cluster "lab", which is not defined' },
            { write_config({ server = "ftp://lab" }), 'server "ftp://lab" is not an http(s):// URL' },
            { write_config({ cluster = "    certificate-authority: /nonexistent/ca.crt" }),
                "certificate-authority /nonexistent/ca.crt cannot be read" },
            { write_config({ cluster = "    certificate-authority-data: '%%%'" }), "certificate-authority-data is not valid base64" },
        }
        local bad = helpers.tmpdir() .. "/bad"
        helpers.write(bad, "clusters: [\n  - {name: x")
        cases[#cases + 1] = { bad, "is not valid YAML" }
        for _, case in ipairs(cases) do
            local c, err = kubeconfig.load({ kubeconfig = case[1] })
            assert.is_nil(c)
            assert.matches(case[2], err, 1, true)
        end
        local c, err = kubeconfig.load({ kubeconfig = "/nonexistent/kubeconfig" })
        assert.is_nil(c)
        assert.equal("no kubeconfig at /nonexistent/kubeconfig", err)
    end)

    it("uses the pod's service account inside a cluster, and says so when there are no credentials", function()
        local sa = helpers.tmpdir()
        helpers.write(sa .. "/token", "pod-token\n")
        helpers.write(sa .. "/ca.crt", CA)
        helpers.write(sa .. "/namespace", "llmbox\n")
        local env = { KUBERNETES_SERVICE_HOST = "10.96.0.1", KUBERNETES_SERVICE_PORT = "443", HOME = "/nonexistent" }
        local c = assert(kubeconfig.load({ getenv = function(k) return env[k] end, service_account = sa }))
        assert.equal("https://10.96.0.1:443", c.server)
        assert.equal("pod-token", c.token)
        assert.equal(CA, c.ca)
        assert.equal("llmbox", c.namespace)
        env.KUBERNETES_SERVICE_HOST = nil
        local none, err = kubeconfig.load({ getenv = function(k) return env[k] end, service_account = sa })
        assert.is_nil(none)
        assert.equal("no Kubernetes credentials: set KUBECONFIG, or write /nonexistent/.kube/config (not in a pod: "
            .. "KUBERNETES_SERVICE_HOST is not set)", err)
    end)
end)
