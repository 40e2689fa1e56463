-- POSIX shell: the host's /bin/sh (dash on Debian).
return {
    name = "shell",
    aliases = { "sh", "bash-compatible-sh" },
    extensions = { "sh" },
    description = "POSIX shell (the host's /bin/sh)",
    image = "debian:bookworm-slim",
    file = "main.sh",
    run = { "/bin/sh", "{file}" },
    env = {},
    -- dash has no --version: report what the package says, from inside the sandbox.
    version = { "/bin/sh", "-c", "readlink -f /bin/sh" },
    checks = "shell",
    example = 'echo "hello from sh"',
}
