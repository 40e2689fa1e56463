-- Egress (issue 18): network = { mode = "egress" } on the native backend, tested in a little
-- internet the spec makes itself: a network namespace standing for the host (192.0.2.2 on a
-- veth, a service on its loopback and one on another address of its own, 203.0.113.7) and one
-- for the outside (the host's gateway 192.0.2.1, a web server at 198.51.100.1, a fake metadata
-- server at 169.254.169.254 and a fake private service at 10.9.9.9). llmbox runs in the host's
-- namespace (ip netns exec); no packet goes to any address outside the namespaces made here.
local helpers = require "spec.helpers"
local json = require "llmbox.json"

local q = helpers.shell_quote
-- how the spec's own Lua scripts find llmbox (they run under ip netns exec)
local LUA_ENV = ("LUA_PATH=%s LUA_CPATH=%s"):format(q(helpers.root .. "/lua/?.lua;" .. helpers.root .. "/lua/?/init.lua;;"),
    q(helpers.root .. "/build/lib/?.so;;"))

local function sh(cmd)
    local ok = os.execute(cmd .. " >/dev/null 2>&1")
    return ok == true or ok == 0
end

describe("egress (native)", function()
    local host, net, www, why_not
    local servers = {}

    setup(function()
        if not helpers.is_root() then
            why_not = "making the spec's network namespaces needs root"
            return
        end
        for _, tool in ipairs({ "ip", "pasta" }) do
            if not sh("command -v " .. tool) then
                why_not = tool .. " is not installed (make deps-test installs iproute2 and passt)"
                return
            end
        end
        local id = tostring(helpers.now()):gsub("%D", ""):sub(-8)
        host, net = "llmbox-h" .. id, "llmbox-i" .. id
        www = helpers.tmpdir()
        local setup_cmds = {
            "ip netns add " .. host, "ip netns add " .. net,
            ("ip link add eg%s netns %s type veth peer name eg%sb netns %s"):format(id, host, id, net),
            ("ip -n %s addr add 192.0.2.2/24 dev eg%s"):format(host, id),
            ("ip -n %s link set eg%s up"):format(host, id),
            ("ip -n %s link set lo up"):format(host),
            ("ip -n %s addr add 203.0.113.7/32 dev lo"):format(host),
            ("ip -n %s route add default via 192.0.2.1"):format(host),
            ("ip -n %s addr add 192.0.2.1/24 dev eg%sb"):format(net, id),
            ("ip -n %s link set eg%sb up"):format(net, id),
            ("ip -n %s link set lo up"):format(net),
        }
        for _, a in ipairs({ "198.51.100.1", "198.51.100.2", "169.254.169.254", "10.9.9.9" }) do
            setup_cmds[#setup_cmds + 1] = ("ip -n %s addr add %s/32 dev lo"):format(net, a)
        end
        for _, c in ipairs(setup_cmds) do assert(sh(c), c) end
        -- the host's resolver knows the names the policies use (ip netns exec shows
        -- /etc/netns/NAME/hosts as /etc/hosts)
        assert(sh("mkdir -p /etc/netns/" .. host))
        helpers.write("/etc/netns/" .. host .. "/hosts", "127.0.0.1 localhost\n198.51.100.1 web.test\n10.9.9.9 private.test\n")
        -- one web server a listener: each answers with its own name
        local function serve(ns, addr, port, name)
            local dir = www .. "/" .. name
            assert(sh("mkdir -p " .. q(dir)))
            helpers.write(dir .. "/index.html", name)
            local pidfile = dir .. ".pid"
            assert(os.execute(("cd %s && ip netns exec %s /usr/bin/python3 -m http.server %d --bind %s >/dev/null 2>&1 & echo $! > %s")
                :format(q(dir), ns, port, addr, q(pidfile))))
            servers[#servers + 1] = pidfile
        end
        serve(net, "198.51.100.1", 80, "web")
        serve(net, "198.51.100.1", 8080, "web8080")
        serve(net, "169.254.169.254", 80, "metadata")
        serve(net, "10.9.9.9", 80, "private")
        serve(host, "127.0.0.1", 8080, "host-loopback")
        -- an npm registry at 198.51.100.2 with one package, whose postinstall script probes
        -- where an install may go (its output in /sandbox/probe.json)
        local reg = www .. "/registry"
        assert(sh("mkdir -p " .. q(reg .. "/tarballs") .. " " .. q(www .. "/pkg/package")))
        helpers.write(www .. "/pkg/package/package.json", json.encode({ name = "llmbox-probe", version = "1.0.0",
            scripts = { postinstall = "node probe.js" } }))
        helpers.write(www .. "/pkg/package/probe.js", [[
const http = require("http"), fs = require("fs");
const urls = ["http://198.51.100.1/", "http://169.254.169.254/", "http://10.9.9.9/", "http://203.0.113.7:8081/",
              "http://127.0.0.1:8080/", "http://198.51.100.2/llmbox-probe"];
const out = {};
let left = urls.length;
for (const u of urls) {
  const done = (v) => { out[u] = v; if (--left === 0) fs.writeFileSync("/sandbox/probe.json", JSON.stringify(out)); };
  http.get(u, { timeout: 5000 }, (r) => { r.resume(); done("HTTP " + r.statusCode); })
    .on("error", (e) => done(e.code)).on("timeout", function () { this.destroy(); done("timeout"); });
}
]])
        local tgz = reg .. "/tarballs/llmbox-probe-1.0.0.tgz"
        assert(sh(("tar -C %s -czf %s package"):format(q(www .. "/pkg"), q(tgz))))
        local sha1 = helpers.capture("sha1sum " .. q(tgz)):match("^(%x+)")
        local sha512 = helpers.capture("openssl dgst -sha512 -binary " .. q(tgz) .. " | base64 -w0")
        helpers.write(reg .. "/llmbox-probe", json.encode({ name = "llmbox-probe", ["dist-tags"] = { latest = "1.0.0" },
            versions = { ["1.0.0"] = { name = "llmbox-probe", version = "1.0.0", hasInstallScript = true,
                scripts = { postinstall = "node probe.js" },
                dist = { tarball = "http://198.51.100.2/tarballs/llmbox-probe-1.0.0.tgz", shasum = sha1,
                    integrity = "sha512-" .. sha512 } } } }))
        local pidfile = www .. "/registry.pid"
        assert(os.execute(("cd %s && ip netns exec %s /usr/bin/python3 -m http.server 80 --bind 198.51.100.2 >/dev/null 2>&1 & echo $! > %s")
            :format(q(reg), net, q(pidfile))))
        servers[#servers + 1] = pidfile
        serve(host, "203.0.113.7", 8081, "host-address")
        -- the servers listen once the host's namespace reaches them
        for _ = 1, 100 do
            if sh(("ip netns exec %s python3 -c \"import urllib.request as u; [u.urlopen(x, timeout=1) for x in "
                .. "('http://198.51.100.1/', 'http://198.51.100.1:8080/', 'http://169.254.169.254/', "
                .. "'http://10.9.9.9/', 'http://127.0.0.1:8080/', 'http://203.0.113.7:8081/', "
                .. "'http://198.51.100.2/llmbox-probe')]\"")
                :format(host)) then
                return
            end
            require("luv").sleep(50)
        end
        error("the spec's servers did not come up")
    end)

    teardown(function()
        for _, pidfile in ipairs(servers) do
            local pid = helpers.read(pidfile)
            if pid then os.execute("kill " .. pid:gsub("%s", "") .. " 2>/dev/null") end
        end
        if host then
            sh("ip netns del " .. host)
            sh("ip netns del " .. net)
            sh("rm -rf /etc/netns/" .. host)
        end
    end)

    -- Runs the probe below in a session of `network` inside the host's namespace: what each URL
    -- answered (or the error), and the result's network_denied. extra: Lua run between two runs.
    local PROBE = [[
import json, socket, urllib.request
out = {}
for u in ["http://198.51.100.1/", "http://198.51.100.1:8080/", "http://web.test/", "http://private.test/",
          "http://169.254.169.254/", "http://10.9.9.9/", "http://127.0.0.1:8080/", "http://203.0.113.7:8081/",
          "http://192.0.2.2:8080/"]:
    try:
        out[u] = urllib.request.urlopen(u, timeout=5).read().decode()
    except Exception as e:
        r = getattr(e, "reason", e)
        out[u] = "refused" if isinstance(r, ConnectionRefusedError) else (
            "no name" if isinstance(r, socket.gaierror) else repr(r))
# nftables' netlink family: the ruleset is not the program's to change
try:
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)
    out["netfilter"] = "open"
except OSError as e:
    out["netfilter"] = e.strerror
print(json.dumps(out))
]]

    local function probe(network, opts)
        opts = opts or {}
        local script = helpers.tmpname(".lua")
        helpers.write(script, ([[
local llmbox = require "llmbox"
local json = require "llmbox.json"
-- callers often ignore SIGPIPE (daemons, nginx): pasta inherits that, and must still start
local ffi = require "ffi"
ffi.cdef "typedef void (*llmbox_sig_t)(int); llmbox_sig_t signal(int signum, llmbox_sig_t handler);"
ffi.C.signal(13, ffi.cast("llmbox_sig_t", 1))
local pol = assert(require("llmbox.session").load_policy("default"))
pol.network = json.decode(%q)
local s, err = llmbox.session{ backend = os.getenv("EGRESS_BACKEND") or "native", policy = pol, lang = "python",
    interactive = os.getenv("EGRESS_INTERACTIVE") == "1" }
if not s then print(json.encode({ open_error = err })) return end
local function run()
    local r = assert(s:run(%q))
    local res = json.decode(r.stdout) or { stdout = r.stdout, stderr = r.stderr }
    res.network_denied = json.array(r.network_denied or {})
    return res
end
local first = run()
if os.getenv("EGRESS_BETWEEN") then os.execute(os.getenv("EGRESS_BETWEEN")) end
local second = os.getenv("EGRESS_TWICE") and run() or nil
-- the session's pasta: this process's child while the session is open, reaped by its close
ffi.cdef "int getpid(void);"
local function pastas()
    local p = io.popen("pgrep -c -P " .. ffi.C.getpid() .. " '^pas(ta|st)'")
    local n = tonumber(p:read("*a")) or -1
    p:close()
    return n
end
local during = pastas()
s:close()
print(json.encode({ first = first, second = second, pastas = { during, pastas() } }))
]]):format(json.encode(network), PROBE))
        local env = LUA_ENV
        for k, v in pairs(opts.env or {}) do env = env .. " " .. k .. "=" .. q(v) end
        local out = helpers.capture(("ip netns exec %s env %s luajit %s 2>&1"):format(host, env, q(script)))
        local res = json.decode(out or "")
        assert(type(res) == "table", "the probe printed: " .. tostring(out))
        return res
    end

    for _, backend in ipairs({ "native", "bubblewrap" }) do
    it("reaches the outside, never the host, link-local or private ranges, and says what it refused (" .. backend .. ")", function()
        if why_not then pending(why_not) end
        if backend == "bubblewrap" and not sh("command -v bwrap") then pending("bwrap is not installed") end
        local out = probe({ mode = "egress" }, { env = { EGRESS_BACKEND = backend } })
        local res = assert(out.first, out.open_error)
        assert.equal("web", res["http://198.51.100.1/"])
        assert.equal("web8080", res["http://198.51.100.1:8080/"])
        -- refused at once, not left to time out
        for _, u in ipairs({ "http://169.254.169.254/", "http://10.9.9.9/", "http://203.0.113.7:8081/" }) do
            assert.equal("refused", res[u], u)
        end
        -- the jail's loopback and address are its own: nothing of the host's answers there
        assert.equal("refused", res["http://127.0.0.1:8080/"])
        assert.equal("refused", res["http://192.0.2.2:8080/"])
        -- no name resolves without an allow list naming it
        assert.equal("no name", res["http://web.test/"])
        assert.equal("Operation not permitted", res.netfilter)
        assert.same({ "10.9.9.9:80", "169.254.169.254:80", "203.0.113.7:8081" }, res.network_denied)
        -- the session had its pasta, which went with it
        assert.same({ 1, 0 }, out.pastas)
    end)
    end

    it("gives interactive cells the same network, and says what it refused in each cell's result", function()
        if why_not then pending(why_not) end
        local res = probe({ mode = "egress" }, { env = { EGRESS_INTERACTIVE = "1", EGRESS_TWICE = "1" } })
        for _, r in ipairs({ res.first, res.second }) do
            assert.equal("web", r["http://198.51.100.1/"])
            assert.equal("refused", r["http://169.254.169.254/"])
            assert.same({ "10.9.9.9:80", "169.254.169.254:80", "203.0.113.7:8081" }, r.network_denied)
        end
    end)

    it("with an allow list, reaches only its entries: names pinned at session start", function()
        if why_not then pending(why_not) end
        local res = probe({ mode = "egress", allow = { "web.test:80", "10.9.9.9" } }, {
            -- between the two runs the host's resolver moves web.test to the private service:
            -- the session keeps the address it pinned
            env = { EGRESS_TWICE = "1", EGRESS_BETWEEN = ("printf '198.51.100.1 nothing.test\\n10.9.9.9 web.test\\n' > %s")
                :format(q("/etc/netns/" .. host .. "/hosts")) },
        })
        for _, r in ipairs({ res.first, res.second }) do
            assert.equal("web", r["http://web.test/"])
            assert.equal("web", r["http://198.51.100.1/"])
            -- a named private address is reached: the policy said so
            assert.equal("private", r["http://10.9.9.9/"])
            -- but not the port the entry did not name, nor what it did not name at all
            assert.equal("refused", r["http://198.51.100.1:8080/"])
            assert.equal("refused", r["http://169.254.169.254/"])
            assert.equal("refused", r["http://203.0.113.7:8081/"])
            assert.equal("no name", r["http://private.test/"])
            assert.same({ "169.254.169.254:80", "198.51.100.1:8080", "203.0.113.7:8081" }, r.network_denied)
        end
        helpers.write("/etc/netns/" .. host .. "/hosts", "127.0.0.1 localhost\n198.51.100.1 web.test\n10.9.9.9 private.test\n")
    end)

    it("gives library installs egress of their own to the registry only, never the host's network", function()
        if why_not then pending(why_not) end
        local script = helpers.tmpname(".lua")
        helpers.write(script, [[
local llmbox = require "llmbox"
local json = require "llmbox.json"
local pol = assert(require("llmbox.session").load_policy("default"))
pol.libraries.allow, pol.libraries.network = true, true
pol.libraries.sources.javascript = { registry = "http://198.51.100.2/" }
local s = assert(llmbox.session{ backend = "native", policy = pol, lang = "javascript" })
local inst = assert(s:install{ "llmbox-probe" })
local probe = s:exec("cat /sandbox/probe.json")
-- the program itself: the session's network, loopback only
local r = assert(s:run([=[
require("http").get("http://198.51.100.2/llmbox-probe", (res) => console.log("HTTP " + res.statusCode))
  .on("error", (e) => console.log(e.code));
]=]))
s:close()
print(json.encode({ exit = inst.exit_code, stderr = inst.stderr, denied = json.array(inst.network_denied or {}),
    probe = json.decode(probe and probe.stdout or "") or (probe and probe.stdout), program = r.stdout }))
]])
        local env = LUA_ENV
        local out = helpers.capture(("ip netns exec %s env %s luajit %s 2>&1"):format(host, env, q(script)))
        local res = json.decode(out or "")
        assert(type(res) == "table", "the install script printed: " .. tostring(out))
        assert.equal(0, res.exit, res.stderr)
        -- the postinstall script reached the registry, and nothing else
        assert.same({
            ["http://198.51.100.2/llmbox-probe"] = "HTTP 200",
            ["http://198.51.100.1/"] = "ECONNREFUSED",
            ["http://169.254.169.254/"] = "ECONNREFUSED",
            ["http://10.9.9.9/"] = "ECONNREFUSED",
            ["http://203.0.113.7:8081/"] = "ECONNREFUSED",
            ["http://127.0.0.1:8080/"] = "ECONNREFUSED",
        }, res.probe)
        assert.same({ "10.9.9.9:80", "169.254.169.254:80", "198.51.100.1:80", "203.0.113.7:8081" }, res.denied)
        -- and the program after it has no network but its loopback
        assert.equal("ENETUNREACH\n", res.program)
    end)

    it("leaves no pasta behind when its caller is killed without closing the session", function()
        if why_not then pending(why_not) end
        local script, ready = helpers.tmpname(".lua"), helpers.tmpname()
        helpers.write(script, ([[
local llmbox = require "llmbox"
local pol = assert(require("llmbox.session").load_policy("default"))
pol.network = { mode = "egress" }
local s = assert(llmbox.session{ policy = pol, lang = "shell" })
assert(s:run("true"))
local f = assert(io.open(%q, "w")); f:write("ready\n"); f:close()
local ffi = require "ffi"
ffi.cdef "unsigned int sleep(unsigned int);"
ffi.C.sleep(60)
]]):format(ready))
        local env = LUA_ENV
        -- ip netns exec execs the command: $! is the caller itself
        local caller = helpers.capture(("ip netns exec %s env %s luajit %s >/dev/null 2>&1 & echo $!")
            :format(host, env, q(script))):match("%d+")
        finally(function()
            os.execute("kill -9 " .. caller .. " 2>/dev/null")
            os.remove(script); os.remove(ready)
        end)
        for _ = 1, 200 do
            if helpers.read(ready) == "ready\n" then break end
            os.execute("sleep 0.05")
        end
        assert.equal("ready\n", helpers.read(ready))
        -- the session's pasta is the caller's own child ...
        -- (Debian's pasta runs as passt.avx2 where the CPU has AVX2)
        local pasta = helpers.capture("pgrep -P " .. caller .. " '^pas(ta|st)' || true"):match("%d+")
        assert.is_not_nil(pasta, "no pasta among the caller's children")
        os.execute("kill -9 " .. caller)
        -- ... and goes with it (pids are not reused this fast; the name is checked all the same)
        local gone = false
        for _ = 1, 100 do
            local comm = helpers.read("/proc/" .. pasta .. "/comm")
            if not comm or not comm:match("^pas") then gone = true break end
            os.execute("sleep 0.05")
        end
        assert.is_true(gone, "pasta " .. pasta .. " outlived its killed caller")
    end)

    it("refuses what it cannot do, saying why", function()
        if why_not then pending(why_not) end
        local res = probe({ mode = "egress", allow = { "nowhere.test:443" } })
        assert.matches('network.allow%[1%]: "nowhere.test" does not resolve here', res.open_error)
        res = probe({ mode = "egress" }, { env = { LLMBOX_PASTA = "/nonexistent/pasta" } })
        assert.matches("egress needs pasta %(Debian's package passt%)", res.open_error)
    end)
end)
