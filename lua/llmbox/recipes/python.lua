-- Python: CPython 3 from the host's /usr, run as a script file so tracebacks name real lines.
return {
    name = "python",
    aliases = { "py", "python3" },
    extensions = { "py" },
    description = "CPython 3 (the host's /usr/bin/python3)",
    file = "main.py",
    run = { "/usr/bin/python3", "-u", "{file}" },
    env = {
        PYTHONDONTWRITEBYTECODE = "1", -- /usr is read-only; don't try to write .pyc files
        PYTHONUNBUFFERED = "1",        -- stream output as it is printed
        PYTHONIOENCODING = "utf-8",
        MPLCONFIGDIR = "/tmp/.matplotlib",
    },
    version = { "/usr/bin/python3", "--version" },
    checks = "python",
    example = 'print("hello from python")',
}
