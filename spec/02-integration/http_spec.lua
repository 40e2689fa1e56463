-- llmbox.http and core.http: the engine drivers' HTTP client (one libcurl multi handle driven by
-- a loop), against a real HTTP/1.1 server (spec/support/http_server.py) over a unix socket, as
-- Docker and Podman listen, and over TLS with client certificates, as a remote engine does.
-- core.tar_entries reads the archives such a server hands back.
local core = require "llmbox.core"
local http = require "llmbox.http"
local helpers = require "spec.helpers"
local uv = require "luv"

local q = helpers.shell_quote
local SERVER = helpers.root .. "/spec/support/http_server.py"

-- Starts the server in the background: its pid.
local function start_server(args, ready_path)
    local pidfile = helpers.tmppath()
    assert(os.execute(("setsid python3 %s %s >/dev/null 2>&1 & echo $! > %s"):format(q(SERVER), args, q(pidfile))))
    for _ = 1, 200 do
        if uv.fs_stat(ready_path) then break end
        uv.sleep(25)
    end
    assert(uv.fs_stat(ready_path), "the test server did not start")
    return tonumber(helpers.read(pidfile))
end

describe("llmbox.http #unpriv", function()
    local sock, pid
    local function get(path, extra)
        local opts = { url = "http://engine" .. path, unix_socket = sock, timeout_ms = 10000 }
        for k, v in pairs(extra or {}) do opts[k] = v end
        return http.request(opts)
    end

    setup(function()
        sock = helpers.private_dir() .. "/engine.sock"
        pid = start_server("unix:" .. q(sock), sock)
    end)
    teardown(function()
        if pid then os.execute("kill " .. pid) end
    end)

    it("talks to a server on a unix socket: status, headers by lower-case name, body", function()
        local res = assert(get("/hello"))
        assert.equal(200, res.status)
        assert.equal("hello", res.body)
        assert.equal("text/plain", res.headers["content-type"])
        assert.equal("one, two", res.headers["x-multi"])
    end)

    it("sends methods, headers and bodies, binary ones included", function()
        local body = "a\0b" .. string.rep("z", 100000)
        local res = assert(get("/echo", { method = "PUT", body = body,
            headers = { ["Content-Type"] = "application/x-tar" } }))
        assert.equal(200, res.status)
        assert.equal("PUT application/x-tar " .. #body .. "|" .. body, res.body)
        res = assert(get("/echo", { method = "POST", body = "{}", headers = { "Content-Type: application/json" } }))
        assert.equal("POST application/json 2|{}", res.body)
    end)

    it("hands an HTTP error status back as a response, not as a failure", function()
        local res = assert(get("/nowhere"))
        assert.equal(404, res.status)
        assert.equal('{"message":"no such route"}', res.body)
    end)

    it("runs many requests at once on one client: one waits on another it cannot finish without", function()
        -- /wait answers only once /release has arrived: a client that handled one request at a
        -- time would never send the second, and /wait would say "timeout".
        local c = http.client()
        local waiting = assert(c:request{ url = "http://engine/wait?key=many", unix_socket = sock })
        local release = assert(c:request{ url = "http://engine/release?key=many", unix_socket = sock })
        assert.equal("released", assert(c:wait(waiting)).body)
        assert.equal("released", assert(c:wait(release)).body)
        c:close()
    end)

    it("streams a body to on_data as it arrives, from Lua, while the response is still open", function()
        -- /stream sends its first chunk and holds the rest until /release: the callback sees the
        -- first chunk before the response ends and releases the rest itself (in Lua, so it may
        -- start requests or yield).
        local c = http.client()
        local chunks, release = {}, nil
        local r = assert(c:request{ url = "http://engine/stream?key=stream", unix_socket = sock, on_data = function(chunk)
            chunks[#chunks + 1] = chunk
            if not release then
                release = assert(c:request{ url = "http://engine/release?key=stream", unix_socket = sock })
            end
        end })
        local res = assert(c:wait(r))
        assert.equal(200, res.status)
        assert.equal("first|released", table.concat(chunks))
        assert.equal("", res.body) -- everything went to the callback
        assert.equal("released", assert(c:wait(release)).body)
        c:close()
    end)

    it("stops a request whose on_data fails, with the callback's error", function()
        local c = http.client()
        local r = assert(c:request{ url = "http://engine/big?n=200000", unix_socket = sock,
            on_data = function() error("disk full") end })
        local res, err, code = c:wait(r)
        assert.is_nil(res)
        assert.matches("on_data callback failed: .*disk full", err)
        assert.equal("ECANCELED", code)
        c:close()
    end)

    it("can be driven by a libuv loop that keeps serving its own timers meanwhile", function()
        local c = http.client()
        local r = assert(c:request{ url = "http://engine/wait?key=uv", unix_socket = sock })
        local ticks, release = 0, nil
        -- the loop's own work: a timer that, after a few ticks, starts the request /wait needs
        local timer = uv.new_timer()
        timer:start(5, 5, function()
            ticks = ticks + 1
            if ticks == 3 then
                release = assert(c:request{ url = "http://engine/release?key=uv", unix_socket = sock })
            end
        end)
        while not r:done() do
            local fds, events, timeout = c:fds()
            local handles = {}
            for i, fd in ipairs(fds) do
                local p = uv.new_poll(fd)
                p:start(events[i] == "r" and "r" or events[i] == "w" and "w" or "rw", function() end)
                handles[#handles + 1] = p
            end
            local t = uv.new_timer()
            t:start(timeout or 1000, 0, function() end)
            handles[#handles + 1] = t
            uv.run("once")
            for _, h in ipairs(handles) do h:close() end
            c:step(0)
        end
        timer:close()
        uv.run("nowait")
        assert.equal("released", assert(r:result()).body)
        assert.is_true(ticks >= 3)
        assert.equal("released", assert(c:wait(release)).body)
        c:close()
    end)

    it("hands over a raw stream on which the caller speaks for itself", function()
        local c = http.client()
        local s = assert(c:connect{ url = "http://engine/", unix_socket = sock })
        assert.is_number(s:fd())
        assert(s:send("GET /hello HTTP/1.1\r\nHost: engine\r\nConnection: close\r\n\r\n"))
        local got = {}
        while true do
            local data, why = s:recv(5000)
            if not data then
                assert.equal("eof", why)
                break
            end
            got[#got + 1] = data
        end
        local text = table.concat(got)
        assert.matches("^HTTP/1%.[01] 200", text)
        assert.matches("\r\n\r\nhello$", text)
        s:unread("again")
        assert.equal("again", s:recv(0))
        s:close()
        c:close()
        local none, err = http.client():connect{ url = "http://engine/", unix_socket = sock .. ".missing" }
        assert.is_nil(none)
        assert.matches("No such file or directory", err, 1, true)
    end)

    it("fails a response larger than max_body with EFBIG, naming the limit", function()
        local res, err, code = get("/big?n=100000", { max_body = 4096 })
        assert.is_nil(res)
        assert.equal("EFBIG", code)
        assert.matches("larger than the limit of 4096 bytes", err, 1, true)
        assert.equal(100000, #assert(get("/big?n=100000", { max_body = 100000 })).body)
    end)

    it("times out with ETIMEDOUT", function()
        local res, err, code = get("/slow", { timeout_ms = 300 })
        assert.is_nil(res)
        assert.equal("ETIMEDOUT", code)
        assert.matches("http://engine/slow through " .. sock, err, 1, true)
    end)

    it("names the socket and the cause when nothing listens there", function()
        local res, err, code = http.request{ url = "http://engine/_ping", unix_socket = sock .. ".missing" }
        assert.is_nil(res)
        assert.equal("ENOENT", code)
        assert.matches("through " .. sock .. ".missing: ", err, 1, true)
        assert.matches("No such file or directory", err, 1, true)
    end)

    it("refuses bad requests as caller mistakes", function()
        assert.has_error(function() http.request("http://x") end, "request: expected a table")
        local c = http.client()
        assert.has_error(function() c:request{ url = "http://x", headers = { "Bad\r\nInjected: 1" } } end,
            'headers[1]: expected one "Name: value" line')
        assert.has_error(function() c:request{ url = "http://x", timeout_ms = -1 } end)
        c:close()
        assert.has_error(function() c.core:request{ url = "http://x" } end, "the HTTP client is closed")
    end)

    it("releases requests and clients in any order (garbage collection included)", function()
        local c = http.client()
        local r = assert(c:request{ url = "http://engine/hello", unix_socket = sock })
        c.core:close() -- the request keeps the handle alive
        r.raw:discard()
        do -- a request in flight and its client, both dropped: the collector ends them
            local c2 = require("llmbox.http_core").new()
            assert(c2:request{ url = "http://engine/slow", unix_socket = sock })
            c2:step(0)
        end
        collectgarbage()
        collectgarbage()
        assert.equal("hello", assert(get("/hello")).body)
    end)

    it("reads an engine's archive as untrusted: files beneath its root, links skipped", function()
        local res = assert(get("/tar"))
        assert.equal("application/x-tar", res.headers["content-type"])
        local files = assert(core.tar_entries(res.body))
        table.sort(files, function(a, b) return a.name < b.name end)
        assert.equal(2, #files)
        assert.same({ name = "a.txt", size = 6, data = "alpha\n" }, files[1])
        assert.equal("sub/b.bin", files[2].name)
        assert.equal(256, #files[2].data)
        local none, err, code = core.tar_entries(res.body, 100)
        assert.is_nil(none)
        assert.equal("EFBIG", code)
        assert.matches("limit of 100 bytes", err, 1, true)
    end)
end)

describe("core.tar_entries #unpriv", function()
    -- archives built by GNU tar, as an engine or `docker save` would hand them over
    local function archive(setup)
        local dir = helpers.tmpdir()
        assert(os.execute(("cd %s && (%s) 2>/dev/null"):format(q(dir), setup)))
        return assert(helpers.read(dir .. "/a.tar"))
    end

    it("takes a single file as its own root", function()
        local files = assert(core.tar_entries(archive("printf hi > f.txt && tar -cf a.tar f.txt")))
        assert.same({ { name = "", size = 2, data = "hi" } }, files)
    end)

    it("refuses entries outside the first entry's root, absolute names and ..", function()
        local cases = {
            "mkdir d e && echo x > e/x && tar -cf a.tar d e",
            -- "d/" then "d/../x" (GNU tar would strip the ".."; Python's tarfile keeps it)
            [[python3 -c 'import tarfile, io
t = tarfile.open("a.tar", "w"); d = tarfile.TarInfo("d"); d.type = tarfile.DIRTYPE; t.addfile(d)
f = tarfile.TarInfo("d/../x"); f.size = 1; t.addfile(f, io.BytesIO(b"x")); t.close()']],
            "mkdir d && echo x > d/x && tar -cPf a.tar /etc/hostname",
            "mkdir d && tar -cf a.tar ./d",
        }
        for _, setup in ipairs(cases) do
            local files, err, code = core.tar_entries(archive(setup))
            assert.is_nil(files, setup)
            assert.equal("EINVAL", code, setup)
            assert.matches("malformed", err, 1, true)
        end
    end)

    it("says what is wrong with something that is not an archive", function()
        local files, err = core.tar_entries(string.rep("not a tar ", 100))
        assert.is_nil(files)
        assert.matches("reading the stream", err, 1, true)
        assert.is_nil((core.tar_entries("")))
    end)
end)

describe("core.tar_pack #unpriv", function()
    it("packs files at their paths, with their modes and the owner asked for, for tar -x -C /", function()
        local archive = assert(core.tar_pack({
            { path = "/tmp/llmbox/main.py", data = "print(1)\n", mode = 420 },
            { path = "/sandbox/bin/run", data = "#!/bin/sh\n", mode = 493 },
            { path = "/sandbox/empty", data = "" },
        }, 1000, 1000))
        local dir = helpers.tmpdir()
        helpers.write(dir .. "/a.tar", archive)
        local p = assert(io.popen(("tar -tvf %s/a.tar --numeric-owner"):format(q(dir))))
        local listing = p:read("*a")
        p:close()
        assert.matches("%-rw%-r%-%-r%-%- 1000/1000%s+9 [^\n]* tmp/llmbox/main%.py", listing)
        assert.matches("%-rwxr%-xr%-x 1000/1000%s+10 [^\n]* sandbox/bin/run", listing)
        assert.matches("sandbox/empty", listing, 1, true)
        assert(os.execute(("mkdir %s/x && tar -xf %s/a.tar -C %s/x"):format(q(dir), q(dir), q(dir))))
        assert.equal("print(1)\n", helpers.read(dir .. "/x/tmp/llmbox/main.py"))
    end)

    it("refuses paths that are not plain absolute ones", function()
        for _, bad in ipairs({ "/a/../etc/passwd", "/a/./b", "/a//b", "/" }) do
            local archive, err, code = core.tar_pack({ { path = bad, data = "x" } })
            assert.is_nil(archive, bad)
            assert.equal("EINVAL", code)
            assert.matches("expected an absolute path", err, 1, true)
        end
        assert.has_error(function() core.tar_pack({ { path = "relative", data = "x" } }) end)
    end)
end)

describe("llmbox.http over TLS #unpriv", function()
    local dir, port, pid
    local function tls(extra)
        local opts = { url = ("https://127.0.0.1:%d/hello"):format(port), timeout_ms = 10000 }
        for k, v in pairs(extra) do opts[k] = v end
        return http.request(opts)
    end

    setup(function()
        dir = helpers.tmpdir()
        -- a CA, a server certificate for 127.0.0.1 and a client certificate, all signed by it
        local ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
        assert(os.execute(("cd %s && exec >/dev/null 2>&1 && "
            .. "openssl req -x509 %s -keyout ca.key -out ca.pem -subj /CN=llmbox-test-ca -days 2 && "
            .. "printf 'subjectAltName=IP:127.0.0.1\\n' > san && "
            .. "openssl req %s -keyout srv.key -out srv.csr -subj /CN=127.0.0.1 && "
            .. "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 -extfile san && "
            .. "openssl req %s -keyout cli.key -out cli.csr -subj /CN=client && "
            .. "openssl x509 -req -in cli.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out cli.pem -days 2")
            :format(q(dir), ec, ec, ec)))
        pid = start_server(("tls:%s/port %s/srv.pem %s/srv.key %s/ca.pem"):format(q(dir), q(dir), q(dir), q(dir)),
            dir .. "/port")
        port = tonumber(helpers.read(dir .. "/port"))
    end)
    teardown(function()
        if pid then os.execute("kill " .. pid) end
    end)

    it("verifies the server against the given CA and shows the client certificate", function()
        local res = assert(tls{ ca_file = dir .. "/ca.pem", cert_file = dir .. "/cli.pem", key_file = dir .. "/cli.key" })
        assert.equal(200, res.status)
        assert.equal("hello", res.body)
    end)

    it("never skips verification: a server the trusted CAs did not sign is refused", function()
        local res, err, code = tls{ cert_file = dir .. "/cli.pem", key_file = dir .. "/cli.key" }
        assert.is_nil(res)
        assert.equal("EPROTO", code)
        assert.matches("https://127.0.0.1:" .. port, err, 1, true)
    end)

    it("takes the CA, certificate and key as PEM in memory, as a kubeconfig carries them", function()
        local res = assert(tls{ ca_pem = helpers.read(dir .. "/ca.pem"), cert_pem = helpers.read(dir .. "/cli.pem"),
            key_pem = helpers.read(dir .. "/cli.key") })
        assert.equal(200, res.status)
        assert.equal("hello", res.body)
        -- a CA in memory that did not sign the server: refused as from a file
        local other = helpers.tmpdir()
        assert(os.execute(("cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
            .. "-keyout k -out ca.pem -subj /CN=other -days 2 >/dev/null 2>&1"):format(q(other))) == 0)
        local none, err, code = tls{ ca_pem = helpers.read(other .. "/ca.pem"), cert_pem = helpers.read(dir .. "/cli.pem"),
            key_pem = helpers.read(dir .. "/cli.key") }
        assert.is_nil(none)
        assert.equal("EPROTO", code)
        assert.is_string(err)
    end)

    it("fails when the server wants a client certificate and none is given", function()
        local res, err = tls{ ca_file = dir .. "/ca.pem" }
        assert.is_nil(res)
        assert.is_string(err)
    end)
end)
