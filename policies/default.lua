-- The default llmbox policy: what a session gets when nobody chose one.
--
-- A policy is a Lua file that returns a table. llmbox checks it when it loads: an unknown key, a
-- wrong type or a bad value is an error naming this file and the key. Sizes are bytes or strings
-- such as "512M" (K = 1024); durations are seconds or strings such as "30s", "500ms", "5m".
-- To make your own, copy this file next to it (or into a directory listed in LLMBOX_POLICY_PATH)
-- or write a short file that says `extends = "default"` and changes only what differs;
-- see strict.lua and permissive.lua. A file without `extends` still gets the limits, mounts,
-- environment and syscall rules shown here for every key it leaves out (forgetting a key never
-- loosens the jail), but no code-check rules: those come only from the file or its parent.
--
-- The code runs as an unprivileged user in fresh namespaces, so what the program can reach is
-- decided by the kernel (mounts, rlimits, cgroups, seccomp), not by the checks at the bottom.

return {
    description = "Balanced defaults: 30 s, 512M memory, no network, dangerous syscalls refused, "
        .. "obviously dangerous Python and shell refused.",

    limits = {
        timeout = "30s",      -- wall clock for one run; the whole process tree is killed after it
        cpu = "30s",          -- CPU time (RLIMIT_CPU); stops busy loops that sleep-based timers miss
        memory = "512M",      -- address space / cgroup memory of the run
        processes = 64,       -- processes + threads (bounds fork bombs)
        open_files = 256,     -- file descriptors per process
        file_size = "64M",    -- the largest file a program may write (RLIMIT_FSIZE)
        output = "1M",        -- stdout + stderr kept; producing more kills the run
        workspace = "256M",   -- size of the writable /sandbox (a tmpfs, gone after the session)
        tmp = "64M",          -- size of the private /tmp (a tmpfs)
        -- cpus = 1,          -- a CPU quota, in CPUs (0.5, 1, 2): a cgroup caps the run's CPU share;
                              -- unset: none. Refused on hosts without a cpu cgroup (`llmbox doctor`)
        -- cgroup = "require" refuses to run on a host where no cgroup can hold the run (memory
        -- and processes then fall back to rlimits: enforced, but not reported as fired);
        -- "auto" (the default) accepts the fallback. `llmbox doctor` says which one you get.
        cgroup = "auto",
    },

    filesystem = {
        -- Host paths bind-mounted read-only. The jail also provides, without being asked: /bin,
        -- /lib, /lib64 and /sbin as symlinks into /usr (on merged-/usr hosts), a minimal /dev,
        -- /proc, /tmp, /sandbox and a made-up /etc/passwd, /etc/group and /etc/hosts.
        -- List only what interpreters need: never the whole /etc (host secrets, configs) or /home.
        -- An entry is a path (the same path inside) or { src = ..., dst = ..., optional = true };
        -- optional entries are skipped when missing on the host instead of failing the run.
        ro = {
            "/usr",  -- interpreters, compilers, shared libraries, Python packages
            -- the dynamic loader's cache: without it every program still starts, only slower
            { src = "/etc/ld.so.cache", optional = true },
            -- the host's time zone, so times print as the operator expects
            { src = "/etc/localtime", optional = true },
            -- Debian's alternatives: /usr/bin/awk, java, cc, c++, vi ... are symlinks through here.
            -- CPython itself does not need it, but `awk` in a shell script does. It holds symlinks
            -- only, nothing secret.
            { src = "/etc/alternatives", optional = true },
            -- public CA certificates (OpenSSL's /usr/lib/ssl/certs points here). Harmless, and
            -- useful once a network mode other than "none" exists.
            { src = "/etc/ssl/certs", optional = true },
        },
    },

    network = {
        -- "none": a private network namespace with loopback only. Code can run a local server
        -- and talk to it, but cannot reach the host or the internet.
        mode = "none",
    },

    libraries = {
        -- run{ libraries = {...} } and s:install{...}: refused unless allowed here. An install
        -- runs the package manager inside this jail as the sandbox user, writing to the
        -- workspace; with network = true it gets the host's network for the install only (the
        -- program never does). Offline sources, e.g. for pip:
        --   sources = { python = { find_links = { "/srv/wheels" } } }   (mounted read-only)
        allow = false,
        network = false,
    },

    env = {
        -- The program's environment is exactly these variables, plus the host variables named
        -- in `pass` when they are set on the host. Nothing else leaks in (tokens, proxies, ...).
        set = {
            PATH = "/usr/local/bin:/usr/bin:/bin",
            HOME = "/sandbox",
            LANG = "C.UTF-8",
        },
        pass = { "TZ" },
    },

    syscalls = {
        -- "allow": every syscall is allowed except those in `deny` (a deny list).
        -- "deny": only those in `allow` are allowed (an allow list; see strict.lua).
        default = "allow",
        -- what a refused syscall gets: "errno" returns EPERM (programs see "Operation not
        -- permitted" and usually carry on), "kill" kills the process at once.
        action = "errno",
        -- Most of these already fail for an unprivileged user in a user namespace; refusing them
        -- in seccomp as well removes kernel attack surface (several were the entry point of
        -- real container escapes) and does not depend on how the host configured namespaces.
        deny = {
            -- mounts and namespaces: the jail's file system view must stay as built
            "mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
            "mount_setattr", "move_mount", "open_tree", "fsopen", "fsmount", "fsconfig", "fspick",
            -- looking into or writing other processes' memory
            "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
            -- large kernel interfaces with a history of privilege escalation bugs
            "bpf", "perf_event_open", "userfaultfd",
            "keyctl", "add_key", "request_key",
            "io_uring_setup", "io_uring_enter", "io_uring_register",
            -- loading kernels and modules, rebooting, swap, process accounting
            "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
            "reboot", "swapon", "swapoff", "acct",
            -- the system clock is shared with the host
            "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
            -- kernel log, file handles (open_by_handle_at escaped Docker once), quotas, fanotify
            "syslog", "open_by_handle_at", "name_to_handle_at", "quotactl", "fanotify_init",
            -- obsolete or hardware-level: nothing a program written today needs
            "lookup_dcookie", "vhangup", "iopl", "ioperm", "uselib",
            -- personality() can turn off address-space randomisation (ADDR_NO_RANDOMIZE)
            "personality",
        },
        allow = {},
        -- clone()/clone3() asking for new namespaces (CLONE_NEW*) would give the program a user
        -- namespace of its own to attack the kernel from. Plain fork and threads still work.
        deny_namespace_clone = true,
        -- TIOCSTI pushes characters into a terminal's input (typing commands into the caller's
        -- shell if a tty leaked in); TIOCLINUX does similar things on a Linux console.
        deny_ioctls = { "TIOCSTI", "TIOCLINUX" },
    },

    checks = {
        -- Static checks of the code before it runs. They catch intent ("this code runs shell
        -- commands") and give a clear refusal; they are not the security boundary — the jail is.
        -- mode: "enforce" refuses unsafe code, "warn" runs it and reports, "off" skips checks.
        mode = "enforce",
        -- a violation at or above this severity (low < medium < high < critical) makes code unsafe
        threshold = "high",
        -- Rules per language, plus "*" for every language. A pattern rule is a Lua pattern
        -- (not a regex: escape . ( ) % + - * ? [ ] ^ $ with %) matched against the code with
        -- comments removed; strings are kept, so os.system("...") is caught and "# os.system("
        -- in a comment is not. `patterns = { ... }` matches when any one of them does.
        rules = {
            python = {
                -- Importing these is reported as rule "module:<name>". A name also covers its
                -- submodules ("urllib.request" covers "urllib.request.x", "os" covers "os.path").
                restricted_modules = {
                    -- run other programs or call C directly: the usual way out of "just Python"
                    { name = "subprocess", severity = "high", message = "runs other programs" },
                    { name = "pty", severity = "high", message = "spawns programs on a pseudo-terminal" },
                    { name = "ctypes", severity = "high", message = "calls C functions and writes raw memory" },
                    { name = "cffi", severity = "high", message = "calls C functions and writes raw memory" },
                    -- networking: there is no network in the jail, so these fail anyway; flagged so
                    -- the report shows the intent, refused by strict (threshold "medium")
                    { name = "socket", severity = "medium", message = "opens network sockets" },
                    { name = "urllib.request", severity = "medium", message = "fetches URLs" },
                    { name = "http.client", severity = "medium", message = "makes HTTP requests" },
                    { name = "requests", severity = "medium", message = "makes HTTP requests" },
                    { name = "ftplib", severity = "medium", message = "opens FTP connections" },
                    { name = "smtplib", severity = "medium", message = "sends mail" },
                    { name = "telnetlib", severity = "medium", message = "opens telnet connections" },
                    -- dynamic imports hide what is really imported from these checks
                    { name = "importlib", severity = "medium", message = "imports modules dynamically" },
                    { name = "builtins", severity = "medium", message = "reaches __import__ and friends" },
                    -- `os` is deliberately absent: data-science code does `import os;
                    -- os.path.join(...)` all the time, and every finding is shown to the user.
                    -- Its dangerous calls (os.system, os.popen, os.exec*, ...) are caught by the
                    -- patterns below instead. To see every `import os` anyway, add
                    -- { name = "os", severity = "low" } — "low" reports without refusing.
                },
                patterns = {
                    { id = "os-system", pattern = "os%.system%s*%(", severity = "high",
                        message = "runs a shell command" },
                    { id = "os-popen", pattern = "os%.popen%s*%(", severity = "high",
                        message = "runs a shell command" },
                    { id = "os-exec", severity = "high", message = "replaces the process with another program",
                        patterns = { "os%.exec[lv]p?e?%s*%(", "os%.posix_spawnp?%s*%(", "os%.spawn[lv]p?e?%s*%(" } },
                    -- `from os import system` then `system(...)`: catch the import itself
                    { id = "os-import-exec", severity = "high", message = "imports a function that runs programs",
                        patterns = {
                            "from%s+os%s+import%s*%(?[%w_,%s\\]*%f[%w_]system%f[^%w_]",
                            "from%s+os%s+import%s*%(?[%w_,%s\\]*%f[%w_]popen%f[^%w_]",
                            "from%s+os%s+import%s*%(?[%w_,%s\\]*%f[%w_]exec[lv]p?e?%f[^%w_]",
                            "from%s+os%s+import%s*%(?[%w_,%s\\]*%f[%w_]spawn[lv]p?e?%f[^%w_]",
                            "from%s+os%s+import%s*%(?[%w_,%s\\]*%f[%w_]posix_spawnp?%f[^%w_]",
                        } },
                    { id = "os-fork", pattern = "os%.fork%s*%(", severity = "medium",
                        message = "forks the process" },
                    -- %f[%w_.] keeps method calls such as model.eval() and df.eval() out
                    { id = "eval", pattern = "%f[%w_.]eval%s*%(", severity = "medium",
                        message = "evaluates a string as code" },
                    { id = "exec", pattern = "%f[%w_.]exec%s*%(", severity = "medium",
                        message = "executes a string as code" },
                    { id = "dunder-import", pattern = "__import__%s*%(", severity = "medium",
                        message = "imports a module by a computed name" },
                    { id = "subclasses-walk", pattern = "__subclasses__%s*%(", severity = "medium",
                        message = "walks the class hierarchy (a classic way around import checks)" },
                },
            },
            shell = {
                restricted_modules = {},
                patterns = {
                    -- rm -rf /, rm -fr /*, rm -r -f / ...; the file system is read-only or a
                    -- throw-away tmpfs, but the intent is worth refusing
                    { id = "rm-root", severity = "high", message = "deletes the whole file system",
                        patterns = {
                            "%f[%w_]rm%s[^;&|\n]*%-%a*[rR][^;&|\n]*%s/%*?%f[%s;&|)%z]",
                            "%-%-no%-preserve%-root",
                        } },
                    { id = "download-and-run", severity = "high", message = "downloads a script and runs it",
                        patterns = {
                            "%f[%w_]curl%f[^%w_][^\n]*|%s*[%w/]*sh%f[^%w_]",
                            "%f[%w_]wget%f[^%w_][^\n]*|%s*[%w/]*sh%f[^%w_]",
                            "%f[%w_]curl%f[^%w_][^\n]*|%s*sudo%s+[%-%a%s]*[%w/]*sh%f[^%w_]",
                            "%f[%w_]wget%f[^%w_][^\n]*|%s*sudo%s+[%-%a%s]*[%w/]*sh%f[^%w_]",
                            "%f[%w_]curl%f[^%w_][^\n]*|%s*[%w/]*python[%d.]*%f[^%w_.]",
                            "%f[%w_]wget%f[^%w_][^\n]*|%s*[%w/]*python[%d.]*%f[^%w_.]",
                            "sh%s+<%(%s*curl%f[^%w_]", "sh%s+<%(%s*wget%f[^%w_]",
                        } },
                    { id = "dev-tcp", pattern = "/dev/[tu][cd]p/", severity = "high",
                        message = "opens a network connection through bash's /dev/tcp" },
                    { id = "fork-bomb", pattern = ":%s*%(%s*%)%s*{%s*:%s*|%s*:%s*&", severity = "medium",
                        message = "is a fork bomb (the process limit stops it, the run fails)" },
                },
            },
            javascript = {
                restricted_modules = {
                    { name = "child_process", severity = "high", message = "runs other programs" },
                    { name = "worker_threads", severity = "low", message = "starts threads" },
                    { name = "net", severity = "medium", message = "opens network sockets" },
                    { name = "dgram", severity = "medium", message = "opens network sockets" },
                    { name = "http", severity = "medium", message = "makes HTTP requests" },
                    { name = "https", severity = "medium", message = "makes HTTP requests" },
                },
                patterns = {
                    { id = "process-binding", pattern = "process%.binding%s*%(", severity = "high",
                        message = "reaches Node's internal C++ bindings" },
                },
            },
            ["*"] = {
                restricted_modules = {},
                patterns = {
                    { id = "engine-socket", severity = "high",
                        message = "reaches for a container engine's socket",
                        patterns = { "docker%.sock", "podman%.sock", "containerd%.sock" } },
                },
            },
        },
    },
}
