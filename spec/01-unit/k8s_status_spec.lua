-- What the Kubernetes API and pod statuses say, as errors that name the cause (issue 17). The
-- bodies are shaped as the API server sends them (metav1.Status, core/v1 PodStatus).
local status = require "llmbox.k8s.status"
local json = require "llmbox.json"

local function api_status(code, reason, message)
    return json.encode({ kind = "Status", apiVersion = "v1", metadata = {}, status = "Failure", message = message,
        reason = reason, code = code })
end

local function pod(st, meta)
    meta = meta or {}
    meta.name = meta.name or "llmbox-abc"
    return { metadata = meta, status = st }
end

describe("kubernetes answers #unpriv", function()
    it("explain the API's refusals with what to do", function()
        local doing = "creating pod llmbox-abc in namespace sandboxes"
        local cases = {
            { 403, api_status(403, "Forbidden", 'pods is forbidden: User "system:serviceaccount:ci:llm" cannot create '
                .. 'resource "pods" in API group "" in the namespace "sandboxes"'),
                'refused by the cluster\'s RBAC (403 Forbidden): pods is forbidden: User "system:serviceaccount:ci:llm" '
                .. "cannot create" },
            { 403, api_status(403, "Forbidden", 'pods "llmbox-abc" is forbidden: exceeded quota: compute, requested: '
                .. "limits.memory=512Mi, used: limits.memory=2Gi, limited: limits.memory=2Gi"),
                "the namespace's resource quota is used up (403): pods \"llmbox-abc\" is forbidden: exceeded quota" },
            { 401, api_status(401, "Unauthorized", "Unauthorized"), "did not accept llmbox's credentials (401 Unauthorized)" },
            { 404, api_status(404, "NotFound", 'namespaces "sandboxes" not found'), 'not found (404): namespaces "sandboxes" not found' },
            { 409, api_status(409, "AlreadyExists", 'pods "llmbox-abc" already exists'), "already exists (409)" },
            { 422, api_status(422, "Invalid", 'Pod "llmbox-abc" is invalid: spec.containers[0].image: Required value'),
                "refused the pod (422 Invalid): Pod \"llmbox-abc\" is invalid" },
            { 500, "<html>proxy error</html>", "the API server answered 500: no message" },
        }
        for _, c in ipairs(cases) do
            local msg = status.api_error(c[1], c[2], doing)
            assert.matches("^" .. doing:gsub("%p", "%%%0") .. ": ", msg)
            assert.matches(c[3], msg, 1, true)
        end
        assert.matches("needs create, get, list, watch and delete on pods", status.api_error(403, api_status(403, "Forbidden", "x")))
    end)

    it("tell a pod that will never be ready from one that may still be", function()
        local cases = {
            { pod({ phase = "Pending", containerStatuses = { { image = "pyhton:3.12", state = { waiting = {
                reason = "ImagePullBackOff", message = 'Back-off pulling image "pyhton:3.12"' } } } } }),
                "failed", "its image pyhton:3.12 cannot be pulled (ImagePullBackOff): Back-off pulling image" },
            { pod({ phase = "Failed", reason = "Evicted", message = "The node was low on resource: memory." }),
                "failed", "was evicted by its node: The node was low on resource: memory." },
            { pod({ phase = "Running" }, { deletionTimestamp = "2026-12-05T12:00:00Z" }), "failed", "is being deleted" },
            { pod({ phase = "Running", containerStatuses = { { state = { terminated = { exitCode = 137, reason = "OOMKilled" } } } } }),
                "failed", "its container ended (exit 137, OOMKilled)" },
            { pod({ phase = "Pending", conditions = { { type = "PodScheduled", status = "False", reason = "Unschedulable",
                message = "0/3 nodes are available: 3 Insufficient memory." } } }),
                "waiting", "cannot be scheduled yet: 0/3 nodes are available: 3 Insufficient memory." },
            { pod({ phase = "Pending" }), "waiting", "is Pending" },
            { pod({ phase = "Running", conditions = { { type = "Ready", status = "True" } } }), "ready" },
        }
        for _, c in ipairs(cases) do
            local state, why = status.pod_state(c[1])
            assert.equal(c[2], state, why)
            if c[3] then assert.matches(c[3], why, 1, true) end
        end
    end)

    it("find the pods a crashed caller left behind, by label and age", function()
        local function item(name, labels) return { metadata = { name = name, labels = labels } } end
        local list = { kind = "PodList", items = {
            item("llmbox-old", { ["app.kubernetes.io/managed-by"] = "llmbox", ["llmbox.dev/created"] = "1000" }),
            item("llmbox-new", { ["app.kubernetes.io/managed-by"] = "llmbox", ["llmbox.dev/created"] = "1950" }),
            item("someone-elses", { ["llmbox.dev/created"] = "1000" }),
            item("llmbox-unlabelled", { ["app.kubernetes.io/managed-by"] = "llmbox" }),
        } }
        assert.same({ "llmbox-old" }, status.leftovers(list, 2000, 600))
        assert.same({ "llmbox-new", "llmbox-old" }, status.leftovers(list, 2000, 10))
    end)
end)
