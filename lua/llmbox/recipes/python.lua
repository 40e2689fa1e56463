-- Python: CPython 3 from the host's /usr, run as a script file so tracebacks name real lines.
-- Plots: matplotlib (and seaborn) through llmbox's backend, Plotly through a renderer that the
-- startup hook registers when plotly.io is imported; both write to $LLMBOX_PLOTS_DIR.
return {
    name = "python",
    aliases = { "py", "python3" },
    extensions = { "py" },
    description = "CPython 3 (the host's /usr/bin/python3)",
    -- the image backends that run images use when the caller names none (`--image`, image =)
    image = "python:3.12-slim",
    file = "main.py",
    run = { "/usr/bin/python3", "-u", "{file}" },
    env = {
        PYTHONDONTWRITEBYTECODE = "1", -- /usr is read-only; don't try to write .pyc files
        PYTHONUNBUFFERED = "1",        -- stream output as it is printed
        PYTHONIOENCODING = "utf-8",
        -- the hooks first, then libraries installed into the workspace
        PYTHONPATH = "{code}/hooks:{workspace}/.llmbox/python",
        MPLBACKEND = "module://llmbox_mpl_backend",
        MPLCONFIGDIR = "/tmp/.matplotlib",
    },
    hooks = {
        { src = "sitecustomize.py", dst = "{code}/hooks/sitecustomize.py" },
        { src = "llmbox_mpl_backend.py", dst = "{code}/hooks/llmbox_mpl_backend.py" },
    },
    plots = true,
    -- pools start the interpreter ahead of time; it then runs the code as `run` would
    warm = {
        run = { "/usr/bin/python3", "-u", "{code}/hooks/llmbox_warm.py" },
        files = { { src = "llmbox_warm.py", dst = "{code}/hooks/llmbox_warm.py" },
            { src = "llmbox_preload.py", dst = "{code}/hooks/llmbox_preload.py" } },
        preload = {
            args = { "--preload" },
            check = { "/usr/bin/python3", "-c", "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)" },
        },
    },
    -- interactive sessions: one interpreter that runs each cell in the namespace of the last
    interactive = {
        run = { "/usr/bin/python3", "-u", "{code}/hooks/llmbox_kernel.py" },
        files = { { src = "llmbox_kernel.py", dst = "{code}/hooks/llmbox_kernel.py" },
            { src = "llmbox_preload.py", dst = "{code}/hooks/llmbox_preload.py" } },
        preload = {
            args = { "--preload" },
            check = { "/usr/bin/python3", "-c", "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)" },
        },
    },
    -- Debian keeps matplotlib's default matplotlibrc, and fontconfig its setup, in /etc
    mounts = { "/etc/matplotlibrc", "/etc/fonts" },
    version = { "/usr/bin/python3", "--version" },
    checks = "python",
    example = 'print("hello from python")',
    details = {
        package_manager = "pip (installs into /sandbox/.llmbox/python)",
        preinstalled = { "numpy", "matplotlib", "plotly", "the standard library" },
        plots = true,
    },
    -- pip into the workspace; offline sources from the policy or the session
    install = function(packages, sources)
        local argv = { "/usr/bin/python3", "-m", "pip", "install", "--target", "{workspace}/.llmbox/python",
            "--no-input", "--disable-pip-version-check", "--no-cache-dir", "--no-warn-script-location",
            "--progress-bar", "off", "--break-system-packages" }
        if #(sources.find_links or {}) > 0 then
            argv[#argv + 1] = "--no-index"
            for _, d in ipairs(sources.find_links) do
                argv[#argv + 1] = "--find-links"
                argv[#argv + 1] = d
            end
        elseif sources.index_url then
            argv[#argv + 1] = "--index-url"
            argv[#argv + 1] = sources.index_url
        end
        argv[#argv + 1] = "--"
        for _, p in ipairs(packages) do argv[#argv + 1] = p end
        return argv
    end,
}
