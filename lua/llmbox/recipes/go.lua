-- Go: `go build` compiles the code (a single file of package main, standard library only: there
-- is no network for modules) to /tmp/llmbox/main, which then runs. Compiler errors come back on
-- stderr with the compile step's exit code (r.phase == "compile").
return {
    name = "go",
    aliases = { "golang" },
    extensions = { "go" },
    description = "Go (the host's go toolchain: go build, then the binary)",
    image = "golang:1.22-bookworm",
    file = "main.go",
    compile = { "/usr/bin/go", "build", "-o", "{dir}/main", "{file}" },
    run = { "{dir}/main" },
    env = {
        -- Everything the go tool writes stays in the run's /tmp, never in the workspace or on
        -- the host: the build cache (the standard library comes precompiled with Debian's Go
        -- 1.19, so a build adds ~1M), GOPATH and the module cache, temporary build directories.
        GOCACHE = "{code}/go-cache",
        GOPATH = "{code}/go",
        GOMODCACHE = "{code}/go/pkg/mod",
        GOTMPDIR = "/tmp",
        TMPDIR = "/tmp",
        GOENV = "off",          -- no go env file from $HOME
        GOPROXY = "off",        -- no network: fail at once instead of trying to download
        GOTOOLCHAIN = "local",  -- newer go tools: never fetch another toolchain
        GOTELEMETRY = "off",
        -- The go tool, the compiler and the program each start about one thread per GOMAXPROCS,
        -- which defaults to the host's CPU count: on a 16-CPU host `go build` alone exceeds
        -- the default policy's 64 processes + threads. 4 keeps a build near 20.
        GOMAXPROCS = "4",
    },
    -- The toolchain's VERSION file: the go tool itself needs ~800M of address space to start.
    version = { "/bin/sh", "-c", 'head -n 1 "$(readlink -f /usr/bin/go | sed "s|/bin/go$||")/VERSION"' },
    checks = "go",
    example = 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hello from go")\n}',
    details = {
        package_manager = "go modules (not available: no network in the sandbox)",
        preinstalled = { "the Go standard library" },
        plots = false,
    },
}
