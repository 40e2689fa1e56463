-- Plots come back as real images: PNG bytes with the right magic number and dimensions.
local llmbox = require "llmbox"
local _ -- the placeholder for values a spec ignores
local helpers = require "spec.helpers"
local artifacts = require "llmbox.artifacts"
local cjson = require "cjson"

local function is_png(p, w, h)
    assert.equal("png", p.format)
    assert.equal("\137PNG\r\n\26\n", p.data:sub(1, 8))
    if w then assert.equal(w, p.width); assert.equal(h, p.height) end
    assert.same({ p.width, p.height }, { artifacts.png_size(p.data) })
end

describe("plots #conformance #unpriv", function()
    local s
    setup(function() s = assert(llmbox.session({ lang = "python", policy = "permissive" })) end)
    teardown(function() s:close() end)

    it("captures matplotlib figures from show(), savefig() and figures left open", function()
        local r = assert(s:run([[
import matplotlib.pyplot as plt
plt.figure(figsize=(4, 3), dpi=100); plt.plot([1, 2, 3], [1, 4, 9]); plt.show()
fig = plt.figure(figsize=(2, 2), dpi=100); plt.bar([1, 2], [3, 4]); fig.savefig('/sandbox/bar.png')
plt.figure(figsize=(5, 1), dpi=100); plt.plot([0, 1])
raise SystemExit(0)
]]))
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal(3, #r.plots)
        is_png(r.plots[1], 400, 300)
        is_png(r.plots[2], 200, 200)
        is_png(r.plots[3], 500, 100)
        -- the program's own savefig still wrote its file
        assert.equal(0, assert(s:exec({ "test", "-s", "/sandbox/bar.png" })).exit_code)
        -- no code was prepended: traceback line numbers are the program's
        r = assert(s:run("import matplotlib.pyplot as plt\n\nraise ValueError('line 3')"))
        assert.matches('main.py", line 3', r.stderr, 1, true)
    end)

    it("draw() still renders into the canvas (draw_idle has no screen to redraw), plt.ion() plots are captured", function()
        local r = assert(s:run([[
import matplotlib.pyplot as plt
import numpy as np
fig = plt.figure(figsize=(2, 1), dpi=100)
plt.fill_between([0, 1], [1, 1], color='red')
fig.canvas.draw_idle()
fig.canvas.draw()
px = np.asarray(fig.canvas.buffer_rgba())
print(px.shape, (px[..., 0] > 200).sum() > 0)
plt.ion(); plt.figure(figsize=(3, 2), dpi=100); plt.plot([0, 1]); plt.ylabel('y')
]]))
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("(100, 200, 4) True\n", r.stdout)
        assert.equal(2, #r.plots)
        is_png(r.plots[2], 300, 200)
    end)

    it("captures seaborn (through matplotlib) and Plotly (as HTML)", function()
        local lacks = helpers.image_lacks(s, "python3 -c 'import seaborn, plotly'", "seaborn or Plotly")
        if lacks then pending(lacks) return end
        local r = assert(s:run([[
import seaborn as sns
sns.histplot([1, 2, 2, 3, 3, 3])
import plotly.graph_objects as go
go.Figure(go.Bar(x=["a", "b"], y=[1, 3])).show()
]]))
        assert.equal(0, r.exit_code, r.stderr)
        local formats = {}
        for _, p in ipairs(r.plots) do formats[#formats + 1] = p.format end
        table.sort(formats)
        assert.same({ "html", "png" }, formats)
        for _, p in ipairs(r.plots) do
            if p.format == "html" then assert.matches("plotly", p.data) else is_png(p) end
        end
    end)

    it("returns a figure saved and then shown once, as it was saved", function()
        local r = assert(s:run([[
import matplotlib.pyplot as plt
plt.figure(figsize=(4, 3), dpi=100); plt.plot([1, 2]); plt.savefig('/sandbox/a.png', dpi=150); plt.show()
]]))
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal(1, #r.plots)
        is_png(r.plots[1], 600, 450)
        -- saved twice without a change: still one plot, as the last save made it
        r = assert(s:run([[
import matplotlib.pyplot as plt
fig = plt.figure(figsize=(4, 3), dpi=100); plt.plot([1, 2])
fig.savefig('/sandbox/b.png'); fig.savefig('/sandbox/b2.png', dpi=50)
]]))
        assert.equal(1, #r.plots)
        is_png(r.plots[1], 200, 150)
        -- changed after the save: the shown figure is another plot
        r = assert(s:run([[
import matplotlib.pyplot as plt
plt.figure(figsize=(4, 3), dpi=100); plt.plot([1, 2]); plt.savefig('/sandbox/c.png')
plt.title('changed'); plt.show()
]]))
        assert.equal(2, #r.plots)
        assert.are_not.equal(r.plots[1].data, r.plots[2].data)
    end)

    it("captures what savefig wrote: its dpi, bbox_inches and, for SVG, its format", function()
        local r = assert(s:run([[
import io
import matplotlib.pyplot as plt
fig = plt.figure(figsize=(4, 3), dpi=100); plt.plot([1, 2]); plt.title('tight')
fig.savefig('/sandbox/tight.png', dpi=120, bbox_inches='tight')
fig2 = plt.figure(figsize=(2, 1)); plt.plot([3, 1])
buf = io.BytesIO(); fig2.savefig(buf, format='png', dpi=80)
fig3 = plt.figure(figsize=(3, 2)); plt.plot([0, 1]); fig3.savefig('/sandbox/v.svg')
fig4 = plt.figure(figsize=(3, 2)); plt.plot([1, 0]); fig4.savefig('/sandbox/p.pdf', dpi=50)
fig5 = plt.figure(figsize=(2, 2)); plt.plot([0, 0]); fig5.savefig('/dev/null', format='png', dpi=40)
]]))
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal(5, #r.plots)
        -- a file savefig wrote that is not a regular file is not read back: the plot is drawn
        is_png(r.plots[5], 80, 80)
        -- the same pixels as the program's own file
        local own = assert(s:exec({ "cat", "/sandbox/tight.png" })).stdout
        is_png(r.plots[1], artifacts.png_size(own))
        assert.is_true(own == r.plots[1].data, "the plot differs from the file savefig wrote")
        assert.is_true(r.plots[1].width < 480 and r.plots[1].height < 360)
        is_png(r.plots[2], 160, 80)
        assert.equal("svg", r.plots[3].format)
        assert.matches("<svg", r.plots[3].data, 1, true)
        is_png(r.plots[4], 150, 100)
    end)

    it("clears plots between runs unless asked to keep them", function()
        assert.equal(1, #assert(s:run("import matplotlib.pyplot as plt; plt.plot([1])")).plots)
        assert.equal(0, #assert(s:run("print('no plot')")).plots)
        assert.equal(1, #assert(s:run("import matplotlib.pyplot as plt; plt.plot([1])")).plots)
        assert.equal(2, #assert(s:run("import matplotlib.pyplot as plt; plt.plot([2])", { keep_plots = true })).plots)
    end)

    it("returns files from the output folder as artifacts, bounded in size", function()
        local r = assert(s:run("import os; os.makedirs('/sandbox/output/sub', exist_ok=True); "
            .. "open('/sandbox/output/a.txt','w').write('hello'); open('/sandbox/output/sub/b.bin','wb').write(bytes(10))",
            { artifacts = true }))
        assert.same({ "a.txt", "sub/b.bin" }, { r.files[1].name, r.files[2].name })
        assert.equal("hello", r.files[1].data)
        assert.equal(10, r.files[2].size)
        local r2, err = s:run("open('/sandbox/output/big','wb').write(bytes(100000))", { artifacts = true, artifacts_max = 1000 })
        assert.is_nil(r2)
        assert.matches("larger than the limit", err)
    end)

    it("--json carries plots base64-encoded and --save-plots writes them", function()
        local st, out = helpers.cli({ "run", "-p", "permissive", "--json", "-c", "import matplotlib.pyplot as plt; plt.figure(figsize=(3,2), dpi=50); plt.plot([1])" })
        assert.equal(0, st)
        local j = cjson.decode(out)
        assert.equal(1, #j.plots)
        assert.equal("png", j.plots[1].format)
        assert.equal(150, j.plots[1].width)
        assert.equal(100, j.plots[1].height)
        assert.equal("iVBORw0KGgo", j.plots[1].data:sub(1, 11)) -- base64 of the PNG magic
        local dir = helpers.tmpdir() .. "/saved" -- (made by --save-plots)
        local st2, _, err = helpers.cli({ "run", "-p", "permissive", "--save-plots", dir, "-c", "import matplotlib.pyplot as plt; plt.plot([1])" })
        assert.equal(0, st2)
        assert.matches("saved", err)
        local png = helpers.read(dir .. "/plot-1.png")
        assert.equal("\137PNG", png:sub(1, 4))
        os.execute("rm -rf " .. helpers.shell_quote(dir))
    end)

    it("returns Plotly HTML small, and --save-plots makes it work offline", function()
        local lacks = helpers.image_lacks(s, "python3 -c 'import plotly'", "Plotly")
        if lacks then pending(lacks) return end
        local code = "import plotly.graph_objects as go; go.Figure(go.Bar(x=['a', 'b'], y=[1, 3])).show()"
        -- in results the HTML loads plotly.js from Plotly's CDN: one copy of the script per plot
        -- would be ~8.6 MB (Debian ships it unminified), too much for JSON and MCP results
        local st, out = helpers.cli({ "run", "-p", "permissive", "--json", "-c", code })
        assert.equal(0, st)
        local html = artifacts.unbase64(cjson.decode(out).plots[1].data)
        assert.is_true(#html < 100000)
        assert.matches('<script src="https://cdn.plot.ly/plotly-', html, 1, true)
        -- saved for a person: the script the host's python3-plotly ships goes beside the plots, once
        local dir = helpers.tmpdir()
        local err
        st, _, err = helpers.cli({ "run", "-p", "permissive", "--save-plots", dir, "-c", code .. "\n" .. code })
        assert.equal(0, st, err)
        local names = {}
        for name in io.popen("ls " .. helpers.shell_quote(dir)):lines() do names[#names + 1] = name end
        local js = names[3]
        assert.same({ "plot-1.html", "plot-2.html" }, { names[1], names[2] })
        assert.matches("^plotly%-%d+%.%d+%.%d+%.js$", js)
        assert.equal(3, #names)
        assert.matches("* plotly.js v", helpers.read(dir .. "/" .. js):sub(1, 40), 1, true)
        for i = 1, 2 do
            html = helpers.read(dir .. "/plot-" .. i .. ".html")
            assert.matches('<script src="' .. js .. '"></script>', html, 1, true)
            assert.not_matches("cdn.plot.ly", html, 1, true)
        end
        assert.matches("saved " .. dir .. "/" .. js, err, 1, true)
        os.execute("rm -rf " .. helpers.shell_quote(dir))
    end)
end)

describe("R plots #conformance #unpriv", function()
    it("captures base graphics and ggplot2, one PNG per page", function()
        local s = assert(llmbox.session({ lang = "r" }))
        local missing = helpers.missing_toolchain(s)
        if missing then
            s:close()
            pending(missing)
            return
        end
        local r = assert(s:run([[
plot(1:10)
hist(c(1, 2, 2, 3, 3, 3))
library(ggplot2)
print(ggplot(data.frame(x = 1:3, y = c(2, 4, 1)), aes(x, y)) + geom_line())
rm(list = ls())
cat("done\n")
]]))
        local r2 = assert(s:run('cat("no plot\n")'))
        s:close()
        assert.equal(0, r.exit_code, r.stderr)
        assert.equal("done\n", r.stdout)
        assert.equal(3, #r.plots)
        for _, p in ipairs(r.plots) do is_png(p, 672, 480) end
        assert.equal(0, #r2.plots)
    end)
end)
