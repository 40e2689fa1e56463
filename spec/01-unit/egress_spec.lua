-- llmbox.egress: the allow list's entries, names pinned, the ruleset's sets, the refusals read
-- back, and where installs may go (spec/02-integration/egress_spec.lua runs it all for real).
local egress = require "llmbox.egress"

describe("egress #unpriv", function()
    it("takes addresses, CIDRs and names with an optional port, and says what is wrong", function()
        assert.same({ family = 4, cidr = "198.51.100.0/24", port = 80 }, egress.parse("198.51.100.0/24:80"))
        assert.same({ family = 4, cidr = "203.0.113.5/32" }, egress.parse("203.0.113.5"))
        assert.same({ family = 6, cidr = "2001:db8::/32", port = 443 }, egress.parse("[2001:db8::/32]:443"))
        assert.same({ family = 6, cidr = "2001:db8::1/128" }, egress.parse("2001:db8::1"))
        assert.same({ name = "pypi.org", port = 443 }, egress.parse("PyPI.org:443"))
        for entry, why in pairs({
            ["1.2.3.4:0"] = "the port must be 1 to 65535",
            ["[::1]:70000"] = "the port must be 1 to 65535",
            ["10.0.0.0/33"] = "is not a valid address or CIDR",
            ["1.2.3"] = "is not a valid address or CIDR",
            ["exa_mple.com"] = "is not a valid host name",
            ["-x.com"] = "is not a valid host name",
            ["a..b"] = "is not a valid host name",
            ["2001:db8::1:443:x"] = "is not an address, a CIDR or a name",
        }) do
            local e, err = egress.parse(entry)
            assert.is_nil(e, entry)
            assert.matches(why, err, 1, true)
        end
        assert.same({ nil, "network.allow[2]: \"x y\": \"x y\" is not a valid host name" },
            { egress.check({ "pypi.org", "x y" }) })
    end)

    it("pins names to what they resolved to once, and writes the ruleset's sets from them", function()
        local looked = {}
        local plan = assert(egress.plan({ "web.test:80", "10.9.9.9", "[2001:db8::/32]:443" }, {
            lookup = function(name)
                looked[#looked + 1] = name
                return { "198.51.100.1", "2001:db8::5" }
            end,
            host_addresses = { "192.0.2.2", "fe80::1" },
        }))
        assert.same({ "web.test" }, looked)
        assert.equal("198.51.100.1\tweb.test\n2001:db8::5\tweb.test\n", plan.hosts)
        local r = plan.ruleset
        assert.matches("set allow4 { type ipv4_addr . inet_service; flags interval; auto-merge; elements = "
            .. "{ 198.51.100.1/32 . 80, 10.9.9.9/32 . 0-65535 } }", r, 1, true)
        assert.matches("set allow6 { type ipv6_addr . inet_service; flags interval; auto-merge; elements = "
            .. "{ 2001:db8::5/128 . 80, 2001:db8::/32 . 443 } }", r, 1, true)
        -- the host's own addresses and the forbidden ranges, v4 and v6
        assert.matches("10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12, 192.168.0.0/16",
            r, 1, true)
        assert.matches("192.0.2.2/32 }", r, 1, true)
        assert.matches("fc00::/7, fe80::/10, ff00::/8, fe80::1/128 }", r, 1, true)
        -- an allow list: nothing else (no rule lets other destinations through)
        assert.is_nil(r:find("!= @forbidden4", 1, true))
        -- without one: everything but the forbidden
        r = assert(egress.plan({}, { host_addresses = {} })).ruleset
        assert.matches("ip daddr != @forbidden4 accept", r, 1, true)
        assert.matches("ip6 daddr != @forbidden6 accept", r, 1, true)
        -- a name that does not resolve is refused, unless it is an install's default
        local nothing = function() return nil, "EAI_NONAME" end
        local p, err = egress.plan({ "nowhere.test" }, { lookup = nothing, host_addresses = {} })
        assert.is_nil(p)
        assert.equal('network.allow[1]: "nowhere.test" does not resolve here: EAI_NONAME', err)
        p = assert(egress.plan({ "nowhere.test" }, { lookup = nothing, host_addresses = {}, optional = true,
            restricted = true }))
        assert.is_nil(p.ruleset:find("!= @forbidden4", 1, true))
    end)

    it("reads the refusals from nft's JSON", function()
        local text = '{"nftables": [{"metainfo": {}}, {"set": {"name": "denied", "elem": [{"concat": '
            .. '["169.254.169.254", 80]}, {"concat": ["10.9.9.9", 80]}]}}]}\n'
            .. '{"nftables": [{"set": {"name": "denied6", "elem": [{"concat": ["fd00::1", 443]}]}}]}\n'
        assert.same({ "10.9.9.9:80", "169.254.169.254:80", "[fd00::1]:443" }, egress.denied(text))
        assert.same({}, egress.denied('{"nftables": [{"set": {"name": "denied"}}]}'))
    end)

    it("sends installs to their sources' hosts, else the public registries", function()
        assert.same({ "pypi.org:443", "files.pythonhosted.org:443", "registry.npmjs.org:443", "cloud.r-project.org:443",
            "rubygems.org:443", "index.rubygems.org:443" }, (egress.install_allow({ sources = {} })))
        local list, derived = egress.install_allow({ sources = {
            python = { index_url = "https://mirror.example/simple/" },
            javascript = { registry = "http://198.51.100.2:4873/" },
            r = { repos = "/srv/cran" },
            ruby = { source = "https://gems.example" },
        } })
        assert.same({ "mirror.example:443", "198.51.100.2:4873", "gems.example:443" }, list)
        assert.is_true(derived)
        list, derived = egress.install_allow({ network_allow = { "10.1.2.3:8080" }, sources = {} })
        assert.same({ "10.1.2.3:8080" }, list)
        assert.is_false(derived)
    end)
end)
