-- The kubernetes backend (issue 17) against the stand-in (spec/support/k8s_standin.py, whose
-- pods are native sessions): sessions are pods made as the policy says, runs and copies go
-- through exec websockets, what a pod cannot do is refused, and pods are cleaned up.
local llmbox = require "llmbox"
local api = require "llmbox.k8s.api"
local kubeconfig = require "llmbox.k8s.kubeconfig"
local kpod = require "llmbox.k8s.pod"
local helpers = require "spec.helpers"
local uv = require "luv"
local ffi = require "ffi"

pcall(ffi.cdef, "int setenv(const char *name, const char *value, int overwrite);")
pcall(ffi.cdef, "int unsetenv(const char *name);")


describe("the kubernetes backend, on the stand-in", function()
    local standin, dir, conn, client, old_kubeconfig, old_isolation
    setup(function()
        standin = require("spec.support.k8s_standin").start()
        dir = standin.dir
        old_kubeconfig, old_isolation = os.getenv("KUBECONFIG"), os.getenv("LLMBOX_KUBERNETES_ISOLATION")
        ffi.C.setenv("KUBECONFIG", dir .. "/kubeconfig", 1)
        ffi.C.unsetenv("LLMBOX_KUBERNETES_ISOLATION")
        conn = assert(kubeconfig.load({ kubeconfig = dir .. "/kubeconfig" }))
        client = api.new(conn)
    end)
    teardown(function()
        if standin then standin.stop() end
        if old_kubeconfig then ffi.C.setenv("KUBECONFIG", old_kubeconfig, 1) else ffi.C.unsetenv("KUBECONFIG") end
        if old_isolation then ffi.C.setenv("LLMBOX_KUBERNETES_ISOLATION", old_isolation, 1) end
    end)

    local function pods()
        return assert(client:list_pods(conn.namespace, { [kpod.LABEL_MANAGED] = "llmbox" })).items
    end

    local function netpols()
        return assert(client:request("GET", "/apis/networking.k8s.io/v1/namespaces/" .. conn.namespace
            .. "/networkpolicies", nil, "listing")).items
    end

    it("refuses a policy that has not accepted the cluster's isolation, saying what that is", function()
        local s, err = llmbox.session({ backend = "kubernetes", policy = "default", image = "debian:12" })
        assert.is_nil(s)
        assert.matches('policy "default" has not accepted the cluster\'s isolation', err, 1, true)
        assert.matches("only where the cluster's network plugin enforces NetworkPolicies", err, 1, true)
        assert.matches('kubernetes = { isolation = "cluster" }', err, 1, true)
        assert.same({}, pods())
    end)

    it("is described by llmbox doctor: the API server that answers, and whether the policy accepts", function()
        local out = helpers.capture("env -u LLMBOX_POLICY " .. helpers.bin .. " doctor 2>&1")
        local line = out:match("[^\n]*kubernetes  [^\n]*")
        assert.is_truthy(line, out)
        assert.matches("usable: the API server at " .. conn.server .. " answers (Kubernetes v1.32.0-llmbox-standin), "
            .. "namespace sandboxes; policy \"default\" has not accepted the cluster's isolation", line, 1, true)
        out = helpers.capture("LLMBOX_POLICY=kubernetes " .. helpers.bin .. " doctor 2>&1")
        assert.matches('policy "kubernetes" accepts the cluster\'s isolation', out, 1, true)
    end)

    it("runs code in a hardened pod with a deny-all NetworkPolicy, and removes both at close", function()
        local s = assert(llmbox.session({ backend = "kubernetes", policy = "kubernetes", image = "debian:12",
            lang = "python" }))
        finally(function() s:close() end)
        local list = pods()
        assert.equal(1, #list)
        local p = list[1]
        assert.equal(s.handle.id, p.metadata.name)
        assert.is_true(p.spec.securityContext.runAsNonRoot)
        assert.is_false(p.spec.automountServiceAccountToken)
        assert.same({ "ALL" }, p.spec.containers[1].securityContext.capabilities.drop)
        assert.is_true(p.spec.containers[1].securityContext.readOnlyRootFilesystem)
        assert.equal("512Mi", p.spec.containers[1].resources.limits.memory)
        -- llmbox's helpers: a configMap, read-only at /.llmbox, every file executable
        local vol
        for _, v in ipairs(p.spec.volumes) do
            if v.name == "llmbox" then vol = v end
        end
        assert.matches("^llmbox%-helpers%-%x+$", vol.configMap.name)
        assert.equal(365, vol.configMap.defaultMode)
        assert.same({ name = "llmbox", mountPath = "/.llmbox", readOnly = true }, p.spec.containers[1].volumeMounts[3])
        local np = netpols()
        assert.equal(1, #np)
        assert.same({ "Ingress", "Egress" }, np[1].spec.policyTypes)
        assert.same({ [kpod.LABEL_SESSION] = p.metadata.labels[kpod.LABEL_SESSION] }, np[1].spec.podSelector.matchLabels)

        local r = assert(s:run("import os, sys\nprint(sorted(k for k in os.environ if k.startswith(('LLMBOX_SH', "
            .. "'KUBERNETES'))), os.environ['PYTHONUNBUFFERED'], os.getcwd())\nprint('err', file=sys.stderr)\nsys.exit(3)"))
        -- the run sees its own environment (the recipe's), not the pod's (llmbox's scripts, the
        -- service variables), in the workspace
        assert.equal("[] 1 /sandbox\n", r.stdout)
        assert.equal("err\n", r.stderr)
        assert.equal(3, r.exit_code)
        -- a command longer than the exec request's URL can hold
        r = assert(s:exec({ "/bin/sh", "-c", "echo " .. string.rep("y", 5000) .. " | wc -c" }))
        assert.equal("5001\n", r.stdout)
        s:close()
        assert.same({}, pods())
        assert.same({}, netpols())
    end)

    it("copies files in and out, and stops a run at its wall clock, leaving the pod usable", function()
        local s = assert(llmbox.session({ backend = "kubernetes", policy = "kubernetes", image = "debian:12",
            lang = "python" }))
        finally(function() s:close() end)
        local src = helpers.tmpname(".txt")
        helpers.write(src, "hello pod\n")
        assert(s:copy_to(src, "/sandbox/in.txt"))
        local r = assert(s:run("print(open('/sandbox/in.txt').read().upper(), end='')\n"
            .. "open('/sandbox/out.txt', 'w').write('from the pod')"))
        assert.equal("HELLO POD\n", r.stdout)
        local dst = helpers.tmpname(".txt")
        assert(s:copy_from("/sandbox/out.txt", dst))
        assert.equal("from the pod", helpers.read(dst))
        local t0 = helpers.now()
        r = assert(s:run("while True: pass", { timeout = 1 }))
        assert.is_true(r.timed_out)
        assert.equal(137, r.exit_code)
        assert.is_true(helpers.now() - t0 < 10)
        r = assert(s:run("print('still here')"))
        assert.equal("still here\n", r.stdout)
        s:close()
    end)

    it("refuses what a pod cannot do for one run, naming it", function()
        local s = assert(llmbox.session({ backend = "kubernetes", policy = "kubernetes", image = "debian:12",
            lang = "python" }))
        finally(function() s:close() end)
        local r, err = s:run("print(1)", { memory = 64 * 1024 * 1024 })
        assert.is_nil(r)
        assert.matches("cannot lower memory for one run", err, 1, true)
        assert.matches("a pod's memory limit is fixed when it is made", err, 1, true)
        local _, cerr = s:commit("example.com/x:1")
        assert.matches("cannot commit", cerr, 1, true)
        s:close()
    end)

    it("loads the policy's own syscall rules on every run's program, and its helpers cannot be changed", function()
        -- a rule the stand-in's own jail does not have: only llmbox's filter in the pod refuses it
        local pol = helpers.tmpname(".lua")
        helpers.write(pol, 'return { extends = "kubernetes", syscalls = { deny = { append = { "getpriority" } } } }')
        local code = "import os\ntry:\n    os.getpriority(os.PRIO_PROCESS, 0)\n    print('allowed')\n"
            .. "except OSError as e:\n    print('refused', e.errno)\n"
            .. "for f in ('/.llmbox/exec', '/.llmbox/filter'):\n    try:\n        open(f, 'ab')\n"
            .. "    except OSError as e:\n        print(f, 'unwritable')\n"
            .. "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('NoNewPrivs')])"
        local s = assert(llmbox.session({ backend = "kubernetes", policy = pol, image = "debian:12", lang = "python" }))
        local r = s:run(code)
        s:close()
        assert.equal("refused 1\n/.llmbox/exec unwritable\n/.llmbox/filter unwritable\n['1']\n", r.stdout)
        -- the control: the same run under the kubernetes policy, which allows it
        s = assert(llmbox.session({ backend = "kubernetes", policy = "kubernetes", image = "debian:12", lang = "python" }))
        r = s:run("import os\nos.getpriority(os.PRIO_PROCESS, 0)\nprint('allowed')")
        s:close()
        assert.equal("allowed\n", r.stdout)
    end)

    it("fails clearly when the credentials may not make llmbox's helpers configMap (RBAC), leaving nothing", function()
        -- (namespace default: no session made the configMap there)
        local pol = helpers.tmpname(".lua")
        helpers.write(pol, 'return { extends = "kubernetes", kubernetes = { context = "reader", namespace = "default" } }')
        local s, err = llmbox.session({ backend = "kubernetes", policy = pol, image = "debian:12" })
        assert.is_nil(s)
        assert.matches("creating configmap llmbox-helpers-", err, 1, true)
        assert.matches("refused by the cluster's RBAC (403 Forbidden)", err, 1, true)
        assert.matches("need get and create on configmaps", err, 1, true)
        assert.same({}, assert(client:list_pods("default", { [kpod.LABEL_MANAGED] = "llmbox" })).items)
    end)

    it("fails clearly when the credentials may not make the pod's NetworkPolicy (RBAC), leaving nothing", function()
        -- (the helpers' configMap is there: an earlier session of the namespace made it)
        local first = assert(llmbox.session({ backend = "kubernetes", policy = "kubernetes", image = "debian:12" }))
        first:close()
        assert.same({}, pods(), "the first session's close left its pod")
        local pol = helpers.tmpname(".lua")
        helpers.write(pol, 'return { extends = "kubernetes", kubernetes = { context = "reader" } }')
        local s, err = llmbox.session({ backend = "kubernetes", policy = pol, image = "debian:12" })
        assert.is_nil(s)
        assert.matches("refused by the cluster's RBAC (403 Forbidden)", err, 1, true)
        assert.matches("need create and delete on networkpolicies", err, 1, true)
        assert.same({}, pods())
    end)

    it("reports a pod deleted under a run as the cause of the run's failure", function()
        local s = assert(llmbox.session({ backend = "kubernetes", policy = "kubernetes", image = "debian:12",
            lang = "python" }))
        finally(function() s:close() end)
        local name = s.handle.id
        local deleter = uv.new_thread(function(server, ns, pod_name, ca)
            require("luv").sleep(800)
            os.execute(("curl -s --cacert %s -X DELETE -H 'Authorization: Bearer admin-token' "
                .. "%s/api/v1/namespaces/%s/pods/%s >/dev/null"):format(ca, server, ns, pod_name))
        end, conn.server, conn.namespace, name, dir .. "/ca.pem")
        local r, err = s:run("import time\ntime.sleep(20)")
        deleter:join()
        assert.is_nil(r)
        assert.matches("pod " .. name .. " was deleted during the run", err, 1, true)
        s:close()
    end)

    it("says that runs need exec's v5 protocol when the API server speaks only v4 (before Kubernetes 1.30)", function()
        local old = require("spec.support.k8s_standin").start("K8S_STANDIN_PROTOCOLS=v4.channel.k8s.io")
        local s
        finally(function() -- (one finally per spec: a second would replace it)
            if s then s:close() end
            old.stop()
            ffi.C.setenv("KUBECONFIG", dir .. "/kubeconfig", 1)
        end)
        ffi.C.setenv("KUBECONFIG", old.kubeconfig, 1)
        s = assert(llmbox.session({ backend = "kubernetes", policy = "kubernetes", image = "debian:12",
            lang = "python" }))
        local r, err = s:run("print(1)")
        assert.is_nil(r)
        assert.matches("speaks v4.channel.k8s.io, which cannot end stdin", err, 1, true)
    end)

    it("maintenance deletes the pods of a dead llmbox process of this machine, and no live one's", function()
        local s = assert(llmbox.session({ backend = "kubernetes", policy = "kubernetes", image = "debian:12" }))
        -- a pod as a process that has died would have left it: this boot, a pid that is gone
        local p = assert(client:get_pod(conn.namespace, s.handle.id))
        local boot = helpers.read("/proc/sys/kernel/random/boot_id"):gsub("%s", "")
        local dead = { apiVersion = "v1", kind = "Pod", metadata = { name = "llmbox-dead1", namespace = conn.namespace,
            labels = p.metadata.labels, annotations = { ["llmbox.dev/owner"] = boot .. ".999999999.1" } },
            spec = p.spec }
        assert(client:create_pod(dead))
        local driver = require("llmbox.backends").get("kubernetes")
        local old_policy = os.getenv("LLMBOX_POLICY")
        ffi.C.setenv("LLMBOX_POLICY", "kubernetes", 1)
        assert(driver.maintain())
        if old_policy then ffi.C.setenv("LLMBOX_POLICY", old_policy, 1) else ffi.C.unsetenv("LLMBOX_POLICY") end
        local names = {}
        for _, x in ipairs(pods()) do names[x.metadata.name] = true end
        assert.is_nil(names["llmbox-dead1"])
        assert.is_true(names[s.handle.id])
        s:close()
    end)
end)
