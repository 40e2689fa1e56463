-- Kubernetes' exec channel protocol (issue 17): messages framed and parsed as the API server's
-- (v4 and v5.channel.k8s.io), and the error channel's Status read as the command's end.
local channel = require "llmbox.k8s.channel"
local json = require "llmbox.json"

describe("the kubernetes exec channel protocol #unpriv", function()
    it("frames and parses messages per stream", function()
        assert.equal("\0print(1)\n", channel.frame(channel.STDIN, "print(1)\n"))
        assert.same({ "stdout", "1\n" }, { channel.parse("\0011\n") })
        assert.same({ "stderr", "boom" }, { channel.parse("\002boom") })
        assert.same({ "error", "{}" }, { channel.parse("\003{}") })
        assert.same({ nil, "an exec message on unknown channel 9" }, { channel.parse("\009x") })
        assert.same({ nil, "an empty exec message" }, { channel.parse("") })
    end)

    it("ends stdin on v5 only", function()
        assert.equal("\255\0", channel.close_stdin("v5.channel.k8s.io"))
        local none, err = channel.close_stdin("v4.channel.k8s.io")
        assert.is_nil(none)
        assert.matches("cannot end stdin without ending the exec", err, 1, true)
    end)

    it("reads the command's end from the error channel", function()
        assert.equal(0, channel.exit_status(json.encode({ metadata = {}, status = "Success" })))
        -- as the kubelet reports a command that exited 3
        assert.equal(3, channel.exit_status(json.encode({ metadata = {}, status = "Failure",
            message = "command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3",
            reason = "NonZeroExitCode", details = { causes = { { reason = "ExitCode", message = "3" } } } })))
        local code, err = channel.exit_status(json.encode({ status = "Failure",
            message = 'container not found ("sandbox")', reason = "InternalError" }))
        assert.is_nil(code)
        assert.equal('the exec failed: container not found ("sandbox")', err)
        code, err = channel.exit_status("garbage")
        assert.is_nil(code)
        assert.matches("not JSON", err, 1, true)
    end)
end)
