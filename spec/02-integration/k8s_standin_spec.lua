-- Kubernetes (issue 17): llmbox's API client for pods against the loopback stand-in
-- (spec/support/k8s_standin.py), over TLS with a kubeconfig's CA and token; and the stand-in
-- checked by an official client (python3-kubernetes), so what the client is tested against is
-- what a real API server says.
local api = require "llmbox.k8s.api"
local kexec = require "llmbox.k8s.exec"
local kubeconfig = require "llmbox.k8s.kubeconfig"
local pod = require "llmbox.k8s.pod"
local plan = require "llmbox.plan"
local policy = require "llmbox.policy"
local recipes = require "llmbox.recipes"
local helpers = require "spec.helpers"
local uv = require "luv"

local q = helpers.shell_quote

local function sleep(ms) uv.sleep(ms) end

describe("the kubernetes stand-in and llmbox's pod client #unpriv", function()
    local standin, dir, conn, client
    setup(function()
        standin = require("spec.support.k8s_standin").start()
        dir = standin.dir
        conn = assert(kubeconfig.load({ kubeconfig = dir .. "/kubeconfig" }))
        client = api.new(conn, { timeout_ms = 10000 })
    end)
    teardown(function()
        if standin then standin.stop() end
    end)

    local function new_pod(name, now)
        local spec = assert(plan.sandbox(assert(policy.load("default")), assert(recipes.get("python")), {}))
        return assert(pod.build(spec, { name = name, namespace = conn.namespace, image = "python:3.12-slim",
            session = name, command = { "sleep", "infinity" }, now = now }))
    end

    it("is accepted by the official Python client: pods created, listed by label, read and deleted", function()
        local script = helpers.tmpname(".py")
        helpers.write(script, [[
import sys
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
body = client.V1Pod(metadata=client.V1ObjectMeta(name="py-made", labels={"made-by": "python"}),
                    spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]))
made = v1.create_namespaced_pod("sandboxes", body)
print("created", made.metadata.name, made.status.phase)
print("listed", [p.metadata.name for p in v1.list_namespaced_pod("sandboxes", label_selector="made-by=python").items])
print("read", v1.read_namespaced_pod("py-made", "sandboxes").status.container_statuses[0].ready)
v1.delete_namespaced_pod("py-made", "sandboxes")
try:
    v1.read_namespaced_pod("py-made", "sandboxes")
except client.exceptions.ApiException as e:
    print("after delete", e.status, e.reason)
]])
        local p = io.popen(("/usr/bin/python3 %s %s 2>&1"):format(q(script), q(dir .. "/kubeconfig")))
        local out = p:read("*a")
        p:close()
        assert.equal("created py-made Running\nlisted ['py-made']\nread True\nafter delete 404 Not Found\n", out)
    end)

    it("runs execs for the official Python client (v4.channel.k8s.io): output, errors, exit codes", function()
        local script = helpers.tmpname(".py")
        helpers.write(script, [[
import sys
from kubernetes import client, config
from kubernetes.stream import stream
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
v1.create_namespaced_pod("sandboxes", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "py-exec"},
                                       "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
print(repr(stream(v1.connect_get_namespaced_pod_exec, "py-exec", "sandboxes", command=["/bin/sh", "-c", "echo out; id -u"],
                  stderr=True, stdin=False, stdout=True, tty=False)))
r = stream(v1.connect_get_namespaced_pod_exec, "py-exec", "sandboxes", command=["/bin/sh", "-c", "echo err >&2; exit 7"],
           stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
r.run_forever(timeout=20)
print(r.returncode, repr(r.read_stderr()))
v1.delete_namespaced_pod("py-exec", "sandboxes")
]])
        local p = io.popen(("/usr/bin/python3 %s %s 2>&1"):format(q(script), q(dir .. "/kubeconfig")))
        local out = p:read("*a")
        p:close()
        -- (the pod's user is 1000, its sandbox's: the pod is a native jail)
        assert.equal("'out\\n1000\\n'\n7 'err\\n'\n", out)
    end)

    it("attaches the official Python client to a pod's main process: its output, its stdin, its end", function()
        local script = helpers.tmpname(".py")
        helpers.write(script, [[
import sys, time
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.stream import stream
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
v1.create_namespaced_pod("sandboxes", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "py-attach"},
    "spec": {"containers": [{"name": "c", "image": "busybox", "stdin": True, "command": ["/bin/sh", "-c",
        "while read l; do echo got $l; echo seen $l >&2; [ $l = bye ] && exit 3; done"]}]}})
r = stream(v1.connect_get_namespaced_pod_attach, "py-attach", "sandboxes", stdin=True, stdout=True, stderr=True,
           tty=False, _preload_content=False)
r.write_stdin("hello\n")
out, err, deadline = "", "", time.time() + 20
while "got hello" not in out and time.time() < deadline:
    r.update(timeout=1)
    out += r.read_stdout() if r.peek_stdout() else ""
    err += r.read_stderr() if r.peek_stderr() else ""
r.write_stdin("bye\n")
r.run_forever(timeout=20)
out += r.read_stdout() if r.peek_stdout() else ""
err += r.read_stderr() if r.peek_stderr() else ""
print(repr(out), repr(err), r.returncode)
print(v1.read_namespaced_pod("py-attach", "sandboxes").status.phase)
try:
    stream(v1.connect_get_namespaced_pod_attach, "py-attach", "sandboxes", stdin=False, stdout=True, stderr=True,
           tty=False)
except ApiException as e:
    print(e.reason)
]])
        local out = helpers.capture(("/usr/bin/python3 %s %s 2>&1"):format(q(script), q(dir .. "/kubeconfig")))
        -- (the pod ends with its main process: restartPolicy Never)
        assert.equal("'got hello\\ngot bye\\n' 'seen hello\\nseen bye\\n' 3\nFailed\nHandshake status 400 Bad Request\n",
            out)
        -- (that client keeps no body: the API server's reason, as llmbox reads it)
        local _, err = client:request("GET", "/api/v1/namespaces/sandboxes/pods/py-attach/attach?stdout=true", nil, "attaching")
        assert.matches("cannot attach to a container in a completed pod; current phase is Failed", err, 1, true)
        assert(client:delete_pod("sandboxes", "py-attach"))
    end)

    it("streams pod events to the official Python client's watch", function()
        local script = helpers.tmpname(".py")
        helpers.write(script, [[
import sys, threading, time
from kubernetes import client, config, watch
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
def churn():
    time.sleep(0.5)
    v1.create_namespaced_pod("sandboxes", {"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "watched", "labels": {"watch": "me"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    v1.create_namespaced_pod("sandboxes", {"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "unwatched"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    time.sleep(0.3)
    v1.delete_namespaced_pod("watched", "sandboxes")
    v1.delete_namespaced_pod("unwatched", "sandboxes")
threading.Thread(target=churn).start()
w = watch.Watch()
seen = []
for ev in w.stream(v1.list_namespaced_pod, "sandboxes", label_selector="watch=me", timeout_seconds=20):
    seen.append((ev["type"], ev["object"].metadata.name))
    if ev["type"] == "DELETED":
        w.stop()
print(seen)
]])
        local out = helpers.capture(("/usr/bin/python3 %s %s 2>&1"):format(q(script), q(dir .. "/kubeconfig")))
        assert.equal("[('ADDED', 'watched'), ('DELETED', 'watched')]\n", out)
    end)

    -- kubectl's exec and attach, over the protocol given: stdin, stdout, stderr, exit codes;
    -- the stand-in's log says which protocol each spoke
    local function kubectl_streams(env, name, protocol)
        local manifest = helpers.tmpname(".json")
        helpers.write(manifest, '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"' .. name .. '"},' ..
            '"spec":{"containers":[{"name":"c","image":"busybox"}]}}')
        -- (the stand-in serves no OpenAPI document for kubectl's validation)
        assert.equal("pod/" .. name .. " created\n", helpers.capture(env .. "kubectl create --validate=false -f " .. q(manifest) .. " 2>&1"))
        assert.matches("\n" .. name .. " ", helpers.capture(env .. "kubectl get pods 2>&1"))
        local out = helpers.capture("echo abc | " .. env .. "kubectl exec -i " .. name .. " -- /bin/sh -c 'cat; echo E >&2; exit 4' 2>&1; echo rc=$?")
        assert.equal("abc\nE\ncommand terminated with exit code 4\nrc=4\n", out)
        -- a megabyte each way, stdin to its end
        out = helpers.capture("head -c 1048576 /dev/zero | " .. env .. "kubectl exec -i " .. name ..
            " -- /bin/sh -c 'wc -c; head -c 1048576 /dev/zero' 2>&1 | wc -c; echo rc=$?")
        assert.equal("1048584\nrc=0\n", out)
        -- attach: the main process of a pod made with stdin, which ends it with its exit
        helpers.write(manifest, '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"' .. name .. '-a"},"spec":{"containers":'
            .. '[{"name":"c","image":"busybox","stdin":true,"stdinOnce":true,"command":["/bin/sh","-c",'
            .. '"read l; echo got $l; echo E >&2; exit 5"]}]}}')
        assert.equal("pod/" .. name .. "-a created\n", helpers.capture(env .. "kubectl create --validate=false -f " .. q(manifest) .. " 2>&1"))
        out = helpers.capture("echo hi | " .. env .. "kubectl attach -i " .. name .. "-a 2>&1; echo rc=$?")
        assert.matches("got hi\nE\ncommand terminated with exit code 5\nrc=5\n$", out)
        assert.equal('pod "' .. name .. '-a" deleted\n', helpers.capture(env .. "kubectl delete pod " .. name .. "-a 2>&1"))
        assert.equal('pod "' .. name .. '" deleted\n', helpers.capture(env .. "kubectl delete pod " .. name .. " 2>&1"))
        local log = helpers.read(dir .. "/log")
        for _, what in ipairs({ "/" .. name .. "/exec over " .. protocol, "/" .. name .. "-a/attach over " .. protocol }) do
            assert.truthy(log:find(what, 1, true), what .. " is not in the stand-in's log:\n" .. log)
        end
    end

    local function kubectl_minor()
        local version = helpers.capture("kubectl version --client -o json 2>/dev/null") or ""
        return tonumber(version:match('"minor"%s*:%s*"(%d+)'))
    end

    it("runs execs and attaches for kubectl over SPDY/3.1 (v4.channel.k8s.io), as kubectl before 1.30 speaks", function()
        local minor = kubectl_minor()
        if not minor then pending("kubectl is not installed (make deps-test installs Debian's kubernetes-client)") end
        -- Debian 12's kubectl (1.20) speaks only SPDY; later ones do when told to
        local env = "KUBECONFIG=" .. q(dir .. "/kubeconfig") .. " KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false "
        kubectl_streams(env, "kspdy", "SPDY/3.1 (v4.channel.k8s.io)")
    end)

    it("runs execs and attaches for kubectl over websockets (v5.channel.k8s.io)", function()
        local minor = kubectl_minor()
        if not minor or minor < 30 then
            pending("kubectl " .. (minor and ("1." .. minor) or "is not installed") .. ": exec over websockets needs 1.30 or later")
        end
        kubectl_streams("KUBECONFIG=" .. q(dir .. "/kubeconfig") .. " ", "kws", "a websocket (v5.channel.k8s.io)")
    end)

    it("execs for llmbox (llmbox.k8s.exec): stdin, output, exit codes, refusals", function()
        assert(client:create_pod(new_pod("llmbox-x1")))
        finally(function() client:delete_pod(conn.namespace, "llmbox-x1") end)
        local cmd = { namespace = conn.namespace, pod = "llmbox-x1", container = pod.CONTAINER,
            argv = { "/bin/sh", "-c", 'cat; id -u; echo e >&2; exit 5' }, stdin = "in\n" }
        local r = assert(kexec.run(conn, cmd))
        assert.same({ exit_code = 5, stdout = "in\n1000\n", stderr = "e\n" }, r)
        -- a wall clock stops reading; who ran the command is told (the API cannot stop an exec)
        local why
        r = assert(kexec.run(conn, { namespace = conn.namespace, pod = "llmbox-x1", container = pod.CONTAINER,
            argv = { "/bin/sleep", "30" }, timeout_ms = 300, on_stop = function(w) why = w end }))
        assert.equal("timeout", r.stopped)
        assert.equal("timeout", why)
        -- the refusals carry the API server's reason, asked again over plain HTTP
        local explain = function(_, path) return select(2, client:request("GET", path, nil, "exec")) end
        local _, err, code = kexec.run(conn, { namespace = conn.namespace, pod = "nope", container = "c",
            argv = { "true" } }, nil, explain)
        assert.equal(404, code)
        assert.matches('pods "nope" not found', err, 1, true)
        local reader = assert(kubeconfig.load({ kubeconfig = dir .. "/kubeconfig", context = "reader" }))
        local reader_client = api.new(reader)
        _, err, code = kexec.run(reader, { namespace = conn.namespace, pod = "llmbox-x1", container = "c",
            argv = { "true" } }, nil, function(_, path) return select(2, reader_client:request("GET", path, nil, "exec")) end)
        assert.equal(403, code)
        assert.matches('cannot create resource "pods/exec"', err, 1, true)
        -- a server the CA did not sign is never trusted, for execs either
        _, err = kexec.run({ server = conn.server, token = conn.token }, { namespace = conn.namespace,
            pod = "llmbox-x1", container = "c", argv = { "true" } })
        assert.matches("did not take the exec", err, 1, true)
    end)

    it("creates llmbox's hardened pod, waits until it is ready, lists and deletes it", function()
        local made = assert(client:create_pod(new_pod("llmbox-t1")))
        assert.equal("llmbox-t1", made.metadata.name)
        local ready = assert(client:wait_ready(conn.namespace, "llmbox-t1", 10, sleep))
        assert.equal("Running", ready.status.phase)
        -- what was sent is what the server keeps: the hardening is in the pod, not in the client
        assert.is_false(ready.spec.automountServiceAccountToken)
        assert.same({ "ALL" }, ready.spec.containers[1].securityContext.capabilities.drop)
        local list = assert(client:list_pods(conn.namespace, { [pod.LABEL_SESSION] = "llmbox-t1" }))
        assert.equal(1, #list.items)
        assert(client:delete_pod(conn.namespace, "llmbox-t1"))
        local gone, err, code = client:get_pod(conn.namespace, "llmbox-t1")
        assert.is_nil(gone)
        assert.equal(404, code)
        assert.equal('reading pod llmbox-t1 in namespace sandboxes: not found (404): pods "llmbox-t1" not found', err)
    end)

    it("explains refusals: RBAC, credentials, namespaces, names taken", function()
        assert(client:create_pod(new_pod("llmbox-t2")))
        local _, err, code = client:create_pod(new_pod("llmbox-t2"))
        assert.equal(409, code)
        assert.matches('creating pod llmbox-t2 in namespace sandboxes: already exists (409): pods "llmbox-t2" already exists',
            err, 1, true)
        local reader = api.new(assert(kubeconfig.load({ kubeconfig = dir .. "/kubeconfig", context = "reader" })))
        _, err, code = reader:create_pod(new_pod("llmbox-t3"))
        assert.equal(403, code)
        assert.matches("refused by the cluster's RBAC (403 Forbidden): pods is forbidden", err, 1, true)
        -- the reader may still look
        assert.equal(1, #assert(reader:list_pods(conn.namespace, { [pod.LABEL_SESSION] = "llmbox-t2" })).items)
        local stranger = api.new({ server = conn.server, ca = conn.ca, token = "not-a-token" })
        _, err, code = stranger:list_pods("sandboxes")
        assert.equal(401, code)
        assert.matches("did not accept llmbox's credentials (401 Unauthorized)", err, 1, true)
        _, err, code = client:list_pods("nowhere")
        assert.equal(404, code)
        assert.matches('not found (404): namespaces "nowhere" not found', err, 1, true)
        -- a server the kubeconfig's CA did not sign is never trusted
        local untrusted = api.new({ server = conn.server, token = conn.token })
        _, err = untrusted:list_pods("sandboxes")
        assert.matches("cannot be reached", err, 1, true)
        assert(client:delete_pod(conn.namespace, "llmbox-t2"))
    end)

    it("collects the pods a crashed caller left, by label and age, and no others", function()
        local now = os.time()
        assert(client:create_pod(new_pod("llmbox-old", now - 3600)))
        assert(client:create_pod(new_pod("llmbox-new", now)))
        assert.same({ "llmbox-old" }, assert(client:collect_leftovers(conn.namespace, 600, now)))
        local left = assert(client:list_pods(conn.namespace, { [pod.LABEL_MANAGED] = "llmbox" }))
        assert.equal(1, #left.items)
        assert.equal("llmbox-new", left.items[1].metadata.name)
        assert(client:delete_pod(conn.namespace, "llmbox-new"))
    end)
end)
