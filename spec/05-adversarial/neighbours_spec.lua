-- Adversarial corpus, part 4: two sandboxes at once. A neighbour session runs as a separate CLI
-- process, leaves marker files with a random token in its /sandbox, /tmp and /dev/shm, listens on
-- an abstract socket and sleeps with a recognisable argv; this spec's own session looks for it
-- every way it can (file contents and names over the whole tree, /proc, signals to every pid,
-- /proc/PID/root, its socket), and the neighbour looks for ours. Neither finds the other; each
-- finds its own markers. As root both map to the same host uid (65534): only the namespaces
-- separate them.
local helpers = require "spec.helpers"
local A = require "spec.05-adversarial.attacks"

-- Tokens travel reversed in argv, so no process's command line holds one in the clear.
local NEIGHBOUR = A.SEARCH_PY .. [[
import socket, sys, time
mine, theirs = sys.argv[1][::-1], sys.argv[2][::-1]
for d in ('/sandbox', '/tmp', '/dev/shm'):
    with open('%s/%s.txt' % (d, mine), 'w') as f:
        f.write('neighbour ' + mine)
srv = socket.socket(socket.AF_UNIX); srv.bind('\0llmbox-nb-' + mine); srv.listen(8); srv.settimeout(0.1)
print('N-found', search(theirs))
print('N-own', search(mine))
print('ready', flush=True)
deadline = time.time() + 25
while time.time() < deadline:
    try:
        c, _ = srv.accept(); print('N-accepted', flush=True); c.close()
    except socket.timeout:
        pass
]]

local function rev(s) return s:reverse() end

describe("neighbours #conformance #unpriv", function()
    it("two sessions at once cannot find, signal, read or connect to each other", function()
        local tok_s, tok_n = A.token("mine"), A.token("theirs")
        local s = A.session()
        local n, n_pids = nil, {}
        finally(function()
            for _, pid in ipairs(A.host_pids(rev(tok_n))) do A.host_kill(pid) end
            if n then n:close() end
            s:close()
        end)
        -- our markers first, so the neighbour has something to look for
        local r = assert(s:exec("for d in /sandbox /tmp /dev/shm; do echo \"ours $T\" > $d/$T.txt; done",
            { env = { T = tok_s } }))
        assert.equal(0, r.exit_code, r.stderr)

        n = io.popen(A.q(helpers.bin) .. " run -q -p " .. A.DEFAULT .. " -c " .. A.q(NEIGHBOUR) .. " -- "
            .. rev(tok_n) .. " " .. rev(tok_s) .. " 2>&1; echo \"cli-status $?\"")
        local head = {}
        for line in n:lines() do
            head[#head + 1] = line
            if line == "ready" then break end
        end
        local nout = table.concat(head, "\n") .. "\n"
        assert.matches("\nready\n$", nout)
        -- control: the neighbour found its own three markers, and nothing of ours
        local own = {}
        for _, d in ipairs({ "/dev/shm", "/sandbox", "/tmp" }) do own[#own + 1] = ("'%s/%s.txt'"):format(d, tok_n) end
        assert.matches("N-own [" .. table.concat(own, ", ") .. "]\n", nout, 1, true)
        assert.matches("N-found []\n", nout, 1, true)
        -- the neighbour's program on the host (its argv carries the reversed token)
        for _, pid in ipairs(A.host_pids(rev(tok_n))) do
            if (helpers.read("/proc/" .. pid .. "/cmdline") or ""):find("^/usr/bin/python3") then n_pids[#n_pids + 1] = pid end
        end
        assert.equal(1, #n_pids)
        local npid = n_pids[1]

        local r2, res = A.py(s, A.SEARCH_PY .. [[
import signal, socket
mine, theirs = os.environ['MINE'], os.environ['THEIRS']
for d in ('/sandbox', '/tmp', '/dev/shm'):
    with open('%s/%s.txt' % (d, mine), 'w') as f:
        f.write('ours ' + mine)
print('S-found', search(theirs))
print('S-own', search(mine))
me = os.getpid()
pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
# native: the run's init and itself; a container: itself and the container's own processes
# (init, the keeper, the run's wrapper), all out of its reach: root's on an engine; in a pod,
# where everything is one user, its init (which takes no signal from inside) and llmbox's,
# which llmbox's filter keeps off
def out_of_reach(p):
    try:
        os.kill(p, 0)
        return False
    except (PermissionError, ProcessLookupError):  # (or gone meanwhile)
        return True
print('S-pids', pids == [1, me] or os.environ['CONTAINER'] == '1' and me in pids
      and all(p == me or p == 1 or out_of_reach(p) for p in pids))
oserr('kill-neighbour', lambda: os.kill(int(os.environ['NPID']), signal.SIGKILL))
for p in range(2, 65536):
    if p != me:
        try: os.kill(p, signal.SIGKILL)
        except OSError: pass
for name, p in [('sandbox', '/sandbox/%s.txt'), ('tmp', '/tmp/%s.txt'), ('shm', '/dev/shm/%s.txt'),
                ('p1-root', '/proc/1/root/sandbox/%s.txt'), ('self-root', '/proc/self/root/tmp/%s.txt')]:
    oserr('read-' + name, lambda: open(p % theirs).read())
oserr('ctl-read-own', lambda: open('/proc/self/root/sandbox/%s.txt' % mine).read())
c = socket.socket(socket.AF_UNIX)
oserr('connect-neighbour', lambda: c.connect('\0llmbox-nb-' + theirs))
]], { env = { MINE = tok_s, THEIRS = tok_n, NPID = tostring(npid),
            CONTAINER = s.driver.capabilities.images and "1" or "0" } })
        assert.equal(0, r2.exit_code, r2.stderr)
        assert.equal("[]", res["S-found"])
        -- control: the same search finds our own markers
        local mine = {}
        for _, d in ipairs({ "/dev/shm", "/sandbox", "/tmp" }) do mine[#mine + 1] = ("'%s/%s.txt'"):format(d, tok_s) end
        assert.equal("[" .. table.concat(mine, ", ") .. "]", res["S-own"])
        assert.equal("True", res["S-pids"])
        assert.equal("ESRCH", res["kill-neighbour"])
        for _, k in ipairs({ "sandbox", "tmp", "shm", "p1-root", "self-root" }) do
            assert.is_truthy(res["read-" .. k] == "ENOENT" or res["read-" .. k] == "EACCES", k .. ": " .. tostring(res["read-" .. k]))
        end
        assert.equal("OK", res["ctl-read-own"])
        assert.equal("ECONNREFUSED", res["connect-neighbour"])

        -- the neighbour lived through all that; the host stops it
        assert.is_true(A.alive(npid))
        assert.is_true(A.host_kill(npid))
        local rest = n:read("*a")
        n:close()
        n = nil
        assert.not_matches("N-accepted", rest, 1, true)
        assert.matches("cli%-status 137\n$", rest) -- killed by SIGKILL, as the CLI reports it
        assert.same({}, A.host_pids(rev(tok_n)))
        A.fresh_ok()
    end)
end)
