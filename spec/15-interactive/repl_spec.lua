-- `llmbox repl`: cells from stdin ("# %%" separates them), through a real interactive session.
local helpers = require "spec.helpers"
local json = require "llmbox.json"

describe("llmbox repl #unpriv", function()
    it("runs the cells of its input in one interpreter, printing each value after the output", function()
        local status, out, err = helpers.cli({ "repl", "-t", "1" }, { stdin = table.concat({
            "import sys", "x = 20", "print('first')", "# %%", "x = x + 22", "x", "# %% next cell",
            "import time", "time.sleep(10)", "# %%", "print(x, file=sys.stderr)", "sys.exit(4)" }, "\n") })
        assert.equal(4, status)
        assert.equal("first\n42\n", out)
        assert.matches("KeyboardInterrupt", err, 1, true)
        assert.matches("llmbox: the run was stopped: wall-clock timeout (1 s) reached", err, 1, true)
        assert.matches("42\n", err, 1, true)
    end)

    it("prints one result object per cell with --json", function()
        local status, out = helpers.cli({ "repl", "--json" }, { stdin = "a = [1]\n# %%\na * 2\n# %%\n1/0\n" })
        assert.equal(1, status)
        local lines = {}
        for line in out:gmatch("[^\n]+") do lines[#lines + 1] = json.decode(line) end
        assert.equal(3, #lines)
        assert.equal(1, lines[1].cell)
        assert.is_nil(lines[1].value)
        assert.equal("[1, 1]", lines[2].value)
        assert.is_false(lines[2].state_lost)
        assert.equal(1, lines[3].exit_code)
        assert.matches("ZeroDivisionError", lines[3].stderr, 1, true)
    end)

    it("refuses a language without an interactive mode, and arguments", function()
        local status, _, err = helpers.cli({ "repl", "-l", "ruby" }, { stdin = "puts 1" })
        assert.equal(125, status)
        assert.matches('language "ruby" has no interactive mode', err, 1, true)
        status, _, err = helpers.cli({ "repl", "file.py" }, { stdin = "" })
        assert.equal(125, status)
        assert.matches("cells come from the terminal or stdin", err, 1, true)
    end)
end)

describe("llmbox repl on the container engines", function()
    local images = require "spec.support.busybox_image"
    for _, kind in ipairs({ "docker", "podman" }) do
        it("runs its cells in a container with -b " .. kind .. " --image", function()
            local ready, why_not = images.python_engine(kind)
            if not ready then
                pending(why_not)
                return
            end
            local status, out, err = helpers.cli({ "repl", "-b", kind, "--image", images.PYTHON_IMAGE },
                { stdin = "import os\nx = 6\n# %%\nprint(os.getuid())\nx * 7\n" })
            assert.equal(0, status, err)
            assert.equal("1000\n42\n", out)
        end)
    end
end)
