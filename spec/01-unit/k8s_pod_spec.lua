-- The pod a Kubernetes sandbox is (issue 17): the hardened default from the policy, and a
-- caller's pod_manifest merged in and checked, each refusal naming the field.
local pod = require "llmbox.k8s.pod"
local plan = require "llmbox.plan"
local policy = require "llmbox.policy"
local recipes = require "llmbox.recipes"
local json = require "llmbox.json"

local function sandbox_spec()
    return assert(plan.sandbox(assert(policy.load("default")), assert(recipes.get("python")), {}))
end

local OPTS = { name = "llmbox-abc123", namespace = "sandboxes", image = "python:3.12-slim", session = "abc123",
    command = { "/.llmbox/exec", "--keep" }, now = 1765000000 }

local function build(manifest)
    local o = {}
    for k, v in pairs(OPTS) do o[k] = v end
    o.manifest = manifest
    return pod.build(sandbox_spec(), o)
end

describe("kubernetes pods #unpriv", function()
    it("default to a hardened pod with the policy's limits", function()
        local spec = sandbox_spec()
        local p = assert(build())
        assert.equal("Pod", p.kind)
        assert.same({ name = "llmbox-abc123", namespace = "sandboxes", annotations = {},
            labels = { ["app.kubernetes.io/managed-by"] = "llmbox", ["llmbox.dev/session"] = "abc123",
                ["llmbox.dev/created"] = "1765000000" } }, p.metadata)
        local s = p.spec
        assert.is_false(s.automountServiceAccountToken)
        assert.is_false(s.hostNetwork)
        assert.is_false(s.hostPID)
        assert.is_false(s.hostIPC)
        assert.equal("Never", s.restartPolicy)
        assert.same({ runAsNonRoot = true, runAsUser = 1000, runAsGroup = 1000, fsGroup = 1000,
            seccompProfile = { type = "RuntimeDefault" } }, s.securityContext)
        local c = s.containers[1]
        assert.equal("sandbox", c.name)
        assert.equal("python:3.12-slim", c.image)
        assert.same({ runAsNonRoot = true, allowPrivilegeEscalation = false, privileged = false,
            readOnlyRootFilesystem = true, capabilities = { drop = { "ALL" } },
            seccompProfile = { type = "RuntimeDefault" } }, c.securityContext)
        -- the policy's memory and CPU, as requests and limits; the workspace an emptyDir of its size
        assert.equal(pod.bytes_quantity(spec.limits.memory), c.resources.limits.memory)
        assert.equal(c.resources.limits.memory, c.resources.requests.memory)
        assert.same({ name = "workspace", emptyDir = { sizeLimit = pod.bytes_quantity(spec.limits.workspace) } },
            s.volumes[1])
        assert.equal("Memory", s.volumes[2].emptyDir.medium)
        assert.equal("256Mi", pod.bytes_quantity(256 * 1024 * 1024))
        assert.equal("1500m", pod.cpu_quantity(1.5))
        -- it encodes as the API wants: empty annotations an object, lists arrays
        assert.matches('"annotations":{}', json.encode(p), 1, true)
        assert.matches('"drop":["ALL"]', json.encode(p), 1, true)
        assert.equal(2, #s.volumes)
    end)

    it("mount llmbox's helpers read-only and executable at /.llmbox when given their configMap", function()
        local o = {}
        for k, v in pairs(OPTS) do o[k] = v end
        o.helpers = "llmbox-helpers-0123"
        local p = assert(pod.build(sandbox_spec(), o))
        assert.same({ name = "llmbox", configMap = { name = "llmbox-helpers-0123", defaultMode = 365 } }, p.spec.volumes[3])
        assert.same({ name = "llmbox", mountPath = "/.llmbox", readOnly = true }, p.spec.containers[1].volumeMounts[3])
    end)

    it("take what a cluster needs from a pod_manifest, as a table or JSON", function()
        local p = assert(build({ metadata = { labels = { team = "evals" }, annotations = { note = "x" } },
            spec = { nodeSelector = { pool = "sandboxes" }, runtimeClassName = "gvisor",
                tolerations = { { key = "sandbox", operator = "Exists", effect = "NoSchedule" } },
                containers = { { name = "sandbox", resources = { limits = { ["nvidia.com/gpu"] = "1" } } } } } }))
        assert.equal("evals", p.metadata.labels.team)
        assert.equal("llmbox", p.metadata.labels["app.kubernetes.io/managed-by"])
        assert.equal("gvisor", p.spec.runtimeClassName)
        assert.equal("sandboxes", p.spec.nodeSelector.pool)
        assert.equal(1, #p.spec.containers)
        assert.equal("1", p.spec.containers[1].resources.limits["nvidia.com/gpu"])
        -- the default's limits stay beside the added one
        assert.is_string(p.spec.containers[1].resources.limits.memory)
        p = assert(build('{"spec": {"priorityClassName": "low"}}'))
        assert.equal("low", p.spec.priorityClassName)
    end)

    it("refuse a pod_manifest that takes away what the policy promised, naming the field", function()
        local cases = {
            { { spec = { hostNetwork = true } }, "spec.hostNetwork = true" },
            { { spec = { hostPID = true } }, "spec.hostPID = true" },
            { { spec = { automountServiceAccountToken = true } }, "spec.automountServiceAccountToken = true" },
            { { spec = { securityContext = { runAsNonRoot = false } } }, "spec.securityContext.runAsNonRoot = false" },
            { { spec = { securityContext = { runAsUser = 0 } } }, "spec.securityContext.runAsUser = 0" },
            { { spec = { securityContext = { seccompProfile = { type = "Unconfined" } } } },
                'spec.securityContext.seccompProfile.type = "Unconfined"' },
            { { spec = { containers = { { name = "sandbox", securityContext = { privileged = true } } } } },
                "spec.containers[0].securityContext.privileged = true" },
            { { spec = { containers = { { name = "sandbox", securityContext = { allowPrivilegeEscalation = true } } } } },
                "spec.containers[0].securityContext.allowPrivilegeEscalation = true" },
            { { spec = { containers = { { name = "sandbox", securityContext = { capabilities = { add = { "SYS_ADMIN" } } } } } } },
                'spec.containers[0].securityContext.capabilities.add = ["SYS_ADMIN"]' },
            { { spec = { containers = { { name = "sandbox", securityContext = { readOnlyRootFilesystem = false } } } } },
                "spec.containers[0].securityContext.readOnlyRootFilesystem = false" },
            { { spec = { containers = { { name = "sidecar", image = "busybox" } } } }, 'spec.containers = "2 containers"' },
            { { spec = { initContainers = { { name = "x", image = "busybox" } } } }, "spec.initContainers" },
            { { spec = { volumes = { { name = "host", hostPath = { path = "/" } } } } }, 'spec.volumes[2].hostPath = {"path":"/"}' },
            { { spec = { volumes = { { name = "s", secret = { secretName = "db" } } } } }, "spec.volumes[2].secret" },
        }
        for _, case in ipairs(cases) do
            local p, err = build(case[1])
            assert.is_nil(p, case[2])
            assert.matches("pod_manifest: " .. case[2], err, 1, true)
            assert.matches('is refused by policy "default"', err, 1, true)
        end
        for _, case in ipairs({
            { { metadata = { name = "mine" } }, "metadata.name is llmbox's" },
            { { metadata = { namespace = "kube-system" } }, "metadata.namespace is llmbox's" },
            { { kind = "Deployment" }, 'kind = "Deployment": a Pod is expected' },
            { "{not json", "pod_manifest is not a JSON object" },
            { 42, "pod_manifest must be a table" },
        }) do
            local p, err = build(case[1])
            assert.is_nil(p)
            assert.matches(case[2], err, 1, true)
        end
    end)
end)
