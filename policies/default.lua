-- The default llmbox policy: what a session gets when nobody chose one.
--
-- A policy is a Lua file that returns a table. llmbox checks it when it loads: an unknown key, a
-- wrong type or a bad value is an error naming this file and the key. Sizes are bytes or strings
-- such as "512M" (K = 1024); durations are seconds or strings such as "30s", "500ms", "5m".
-- To make your own, copy this file next to it (or into a directory listed in LLMBOX_POLICY_PATH)
-- or write a short file that says `extends = "default"` and changes only what differs;
-- see strict.lua and permissive.lua. A file without `extends` starts from the limits, mounts,
-- environment and syscall rules shown here (forgetting a key never loosens the jail), but no
-- code-check rules: those come only from the file or its parent. Either way a plain list of
-- rules (syscalls.deny, deny_ioctls, checks patterns and restricted_modules) may only add to
-- what it inherits; { append = }, { remove = } and { replace = } say what you mean (README).
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
            -- useful with network mode "egress".
            { src = "/etc/ssl/certs", optional = true },
        },
    },

    network = {
        -- "none": a private network namespace with loopback only. Code can run a local server
        -- and talk to it, but cannot reach the host or the internet.
        -- "egress" (native backend): outbound connections through user-mode networking, never
        -- to the host, link-local (cloud metadata) or private addresses unless `allow` names
        -- them; with `allow` (e.g. { "pypi.org:443", "198.51.100.0/24:80" }: CIDR or name, an
        -- optional port; names resolved once when the session opens), nothing else.
        mode = "none",
    },

    libraries = {
        -- run{ libraries = {...} } and s:install{...}: refused unless allowed here. An install
        -- runs the package manager inside this jail as the sandbox user, writing to the
        -- workspace; with network = true it gets egress of its own for the install only (never
        -- the host's network; the program never gets it), to network_allow (default: the
        -- sources' hosts, else the public registries). Offline sources, e.g. for pip:
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
        -- the address families socket() may create; every other is refused: vsock is not
        -- confined by network namespaces (on a VM host it reaches the hypervisor's services),
        -- and packet, alg, xdp, tipc, rds and the like are kernel surface no program here needs.
        -- netlink_route: netlink for interface and address queries only.
        socket_families = { "unix", "inet", "inet6", "netlink_route" },
    },

    checks = {
        -- Static checks of the code before it runs. They catch intent ("this code runs shell
        -- commands") and give a clear refusal; they are not the security boundary — the jail is.
        -- mode: "enforce" refuses unsafe code, "warn" runs it and reports, "off" skips checks.
        mode = "enforce",
        -- a violation at or above this severity (low < medium < high < critical) makes code unsafe
        threshold = "high",
        -- Longer code is not checked: "enforce" refuses it, "warn" runs it with a warning.
        -- Checking takes time linear in the code's size (a few MB: well under a second).
        max_code_size = "4M",
        -- Rules per language, plus "*" for every language. A pattern rule is a Lua pattern
        -- (not a regex: escape . ( ) % + - * ? [ ] ^ $ with %) matched against the code with
        -- comments removed; strings are kept, so os.system("...") is caught and "# os.system("
        -- in a comment is not; with `strings = false` string contents are blanked too, so
        -- print("system") is not system(). `patterns = { ... }` matches when any one of them does.
        -- Severities follow one scheme: running programs, loading native code and raw memory
        -- are "high"; evaluating strings, calling by computed names, networking are "medium".
        -- In a policy that extends this one, a plain list may only add to these rules; write
        -- { append = {...} }, { remove = {...} } or { replace = {...} } (see README, Policies).
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
                    -- `from os import system` (then `system(...)`) and the other functions of os
                    -- that run programs: the import itself is caught, in every form
                    { name = "os.system", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.popen", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.execl", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.execle", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.execlp", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.execlpe", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.execv", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.execve", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.execvp", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.execvpe", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.spawnl", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.spawnle", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.spawnlp", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.spawnlpe", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.spawnv", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.spawnve", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.spawnvp", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.spawnvpe", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.posix_spawn", severity = "high", message = "imports a function that runs programs" },
                    { name = "os.posix_spawnp", severity = "high", message = "imports a function that runs programs" },
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
                    { id = "os-fork", pattern = "os%.fork%s*%(", severity = "medium",
                        message = "forks the process" },
                    -- the same functions reached another way: `from os import *`,
                    -- getattr(os, "system"), then an alias or a computed name
                    { id = "os-star-import", severity = "high", strings = false,
                        message = "imports every function of os, those that run programs too",
                        pattern = "%f[%w_]from%s+os%s+import%s*%*" },
                    { id = "os-by-name", severity = "high", message = "reaches a function that runs programs by name",
                        patterns = { "getattr%s*%(%s*os%s*,%s*[\"']system", "getattr%s*%(%s*os%s*,%s*[\"']popen",
                            "getattr%s*%(%s*os%s*,%s*[\"']exec", "getattr%s*%(%s*os%s*,%s*[\"']spawn",
                            "getattr%s*%(%s*os%s*,%s*[\"']posix_spawn" } },
                    { id = "os-reflection", severity = "medium", strings = false,
                        message = "reaches os functions by a computed name or an alias",
                        patterns = { "%f[%w_]getattr%s*%(%s*os%s*,", "%f[%w_]os%s*%.%s*__dict__",
                            "%f[%w_]vars%s*%(%s*os%s*%)", "%f[%w_]import%s+os%s+as%s" } },
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
                            "%f[%w_]curl%f[^%w_][^\n]*|%s*sudo%f[^%w_][^|;&\n]*sh%f[^%w_]",
                            "%f[%w_]wget%f[^%w_][^\n]*|%s*sudo%f[^%w_][^|;&\n]*sh%f[^%w_]",
                            "%f[%w_]curl%f[^%w_][^\n]*|%s*[%w/]*python[%d.]*%f[^%w_.]",
                            "%f[%w_]wget%f[^%w_][^\n]*|%s*[%w/]*python[%d.]*%f[^%w_.]",
                            "sh%s+<%(%s*curl%f[^%w_]", "sh%s+<%(%s*wget%f[^%w_]",
                        } },
                    { id = "dev-tcp", pattern = "/dev/[tu][cd]p/", severity = "high",
                        message = "opens a network connection through bash's /dev/tcp" },
                    { id = "fork-bomb", pattern = ":%s*%(%s*%)%s*{%s*:%s*|%s*:%s*&", severity = "medium",
                        message = "is a fork bomb (the process limit stops it, the run fails)" },
                    { id = "eval", severity = "medium", strings = false, message = "evaluates a string as commands",
                        pattern = "%f[%w_]eval%f[^%w_]" },
                    { id = "netcat", severity = "medium", strings = false, message = "opens network connections",
                        patterns = { "%f[%w_]nc%f[^%w_.%-]", "%f[%w_]ncat%f[^%w_]", "%f[%w_]socat%f[^%w_]",
                            "%f[%w_]telnet%f[^%w_]" } },
                    { id = "preload", severity = "medium", message = "injects a library into every program it runs",
                        pattern = "LD_PRELOAD%s*=" },
                },
            },
            javascript = {
                restricted_modules = {
                    { name = "child_process", severity = "high", message = "runs other programs" },
                    { name = "vm", severity = "medium", message = "evaluates strings as code" },
                    { name = "module", severity = "medium", message = "builds its own require()" },
                    { name = "worker_threads", severity = "low", message = "starts threads" },
                    { name = "net", severity = "medium", message = "opens network sockets" },
                    { name = "dgram", severity = "medium", message = "opens network sockets" },
                    { name = "tls", severity = "medium", message = "opens network sockets" },
                    { name = "http", severity = "medium", message = "makes HTTP requests" },
                    { name = "https", severity = "medium", message = "makes HTTP requests" },
                    { name = "http2", severity = "medium", message = "makes HTTP requests" },
                },
                patterns = {
                    { id = "process-binding", severity = "high", message = "reaches Node's internal C++ bindings",
                        patterns = { "process%.binding%s*%(", "process%._linkedBinding%s*%(" } },
                    { id = "native-addon", severity = "high", message = "loads native code",
                        patterns = { "process%s*%.%s*dlopen%s*%(", "%.node[\"'`]%s*%)" } },
                    -- require(name), require("child_" + "process"), import(x): what is loaded is
                    -- computed, so the module checks above cannot see it
                    { id = "dynamic-require", severity = "medium", strings = false,
                        message = "loads a module by a computed name",
                        patterns = { "%f[%w_$]require%s*%(%s*[^%s\"'`)]", "%f[%w_$]import%s*%(%s*[^%s\"'`)]",
                            "%f[%w_$]require%s*%(%s*[\"'`]%s*[\"'`]%s*[^%s)]",
                            "%f[%w_$]import%s*%(%s*[\"'`]%s*[\"'`]%s*[^%s)]" } },
                    { id = "computed-require", severity = "high", strings = false,
                        message = "loads a module whose name is put together from pieces",
                        patterns = { "%f[%w_$]require%s*%(%s*[\"'`]%s*[\"'`]%s*%+",
                            "%f[%w_$]import%s*%(%s*[\"'`]%s*[\"'`]%s*%+" } },
                    { id = "eval", severity = "medium", strings = false, message = "evaluates a string as code",
                        patterns = { "%f[%w_$.]eval%s*%(", "%f[%w_$]Function%s*%(" } },
                    -- process["bin" + "ding"], globalThis["require"]: members reached by a computed name
                    { id = "computed-member", severity = "medium", strings = false,
                        message = "reaches process or the global object by a computed name",
                        patterns = { "%f[%w_$]process%s*%[", "%f[%w_$]globalThis%s*%[", "%f[%w_$]global%s*%[" } },
                },
            },
            java = {
                restricted_modules = {
                    { name = "java.lang.reflect", severity = "medium", message = "calls methods by name (reflection)" },
                    { name = "java.lang.invoke", severity = "medium", message = "calls methods by name (method handles)" },
                    { name = "javax.script", severity = "medium", message = "evaluates strings as code" },
                    { name = "javax.tools", severity = "medium", message = "compiles code at run time" },
                    { name = "java.lang.foreign", severity = "high", message = "calls C functions and writes raw memory" },
                    { name = "sun.misc", severity = "high", message = "writes raw memory (sun.misc.Unsafe)" },
                    { name = "jdk.internal", severity = "high", message = "reaches the JDK's internals" },
                    { name = "com.sun.jna", severity = "high", message = "calls C functions (JNA)" },
                    { name = "java.net", severity = "medium", message = "opens network connections" },
                    { name = "javax.net", severity = "medium", message = "opens network connections" },
                },
                -- java.lang is imported without an import statement, so its classes are matched by
                -- name, in the code only (strings = false: "Runtime" in a message is not a call)
                patterns = {
                    { id = "process", severity = "high", strings = false, message = "runs other programs",
                        patterns = { "%f[%w_$]ProcessBuilder%f[^%w_$]", "%f[%w_$]getRuntime%s*%(%s*%)%s*%.%s*exec%s*%(",
                            "%.%s*exec%s*%(" } },
                    -- Class.forName("java.lang.Runtime"), getMethod("exec"): the same, by name
                    { id = "process-by-name", severity = "high", message = "runs other programs, reached by name",
                        patterns = { "forName%s*%(%s*\"java%.lang%.Runtime\"", "forName%s*%(%s*\"java%.lang%.ProcessBuilder\"",
                            "getMethod%s*%(%s*\"exec\"", "getDeclaredMethod%s*%(%s*\"exec\"" } },
                    { id = "native-code", severity = "high", strings = false, message = "loads native code",
                        patterns = { "%f[%w_$]System%s*%.%s*loadLibrary%s*%(", "%f[%w_$]System%s*%.%s*load%s*%(",
                            "%.%s*loadLibrary%s*%(", "%f[%w_$]native%f[^%w_$]", "%f[%w_$]Unsafe%f[^%w_$]" } },
                    { id = "reflection", severity = "medium", strings = false,
                        message = "loads classes or calls methods by name (reflection)",
                        patterns = { "%f[%w_$]Class%s*%.%s*forName%s*%(", "%.%s*getMethod%s*%(",
                            "%.%s*getDeclaredMethod%s*%(", "%.%s*setAccessible%s*%(", "%f[%w_$]MethodHandles%f[^%w_$]",
                            "%f[%w_$]URLClassLoader%f[^%w_$]", "%.%s*defineClass%s*%(" } },
                    { id = "script-engine", severity = "medium", strings = false, message = "evaluates strings as code",
                        patterns = { "%f[%w_$]ScriptEngineManager%f[^%w_$]", "%f[%w_$]ToolProvider%f[^%w_$]" } },
                    { id = "network", severity = "medium", strings = false, message = "opens network connections",
                        patterns = { "%f[%w_$]Socket%s*%(", "%f[%w_$]ServerSocket%f[^%w_$]", "%f[%w_$]HttpClient%f[^%w_$]",
                            "%f[%w_$]URL%s*%(", "%f[%w_$]DatagramSocket%f[^%w_$]" } },
                },
            },
            cpp = {
                -- headers are modules here: #include <dlfcn.h> is reported as module:dlfcn.h
                restricted_modules = {
                    { name = "dlfcn.h", severity = "high", message = "loads shared libraries at run time" },
                    { name = "spawn.h", severity = "high", message = "runs other programs" },
                    { name = "sys/ptrace.h", severity = "high", message = "traces other processes" },
                    { name = "sys/socket.h", severity = "medium", message = "opens network sockets" },
                    { name = "netinet/in.h", severity = "medium", message = "opens network sockets" },
                    { name = "arpa/inet.h", severity = "medium", message = "opens network sockets" },
                    { name = "netdb.h", severity = "medium", message = "resolves network names" },
                },
                patterns = {
                    -- a name, not only a call: `auto run = &system;` counts too
                    { id = "process", severity = "high", strings = false, message = "runs other programs",
                        patterns = { "%f[%w_]system%f[^%w_]", "%f[%w_]popen%f[^%w_]", "%f[%w_]exec[lv]p?e?%f[^%w_]",
                            "%f[%w_]execvpe%f[^%w_]", "%f[%w_]fexecve%f[^%w_]", "%f[%w_]posix_spawnp?%f[^%w_]" } },
                    { id = "fork", severity = "medium", strings = false, message = "forks the process",
                        patterns = { "%f[%w_]fork%s*%(", "%f[%w_]vfork%s*%(", "%f[%w_]clone%s*%(" } },
                    { id = "native-code", severity = "high", strings = false,
                        message = "loads native code, or runs assembly or raw syscalls",
                        patterns = { "%f[%w_]dlopen%f[^%w_]", "%f[%w_]dlsym%f[^%w_]", "%f[%w_]asm%f[^%w_]",
                            "%f[%w_]__asm__%f[^%w_]", "%f[%w_]__asm%f[^%w_]", "%f[%w_]syscall%s*%(" } },
                    { id = "network", severity = "medium", strings = false, message = "opens network sockets",
                        patterns = { "%f[%w_]socket%s*%(" } },
                },
            },
            go = {
                restricted_modules = {
                    { name = "os/exec", severity = "high", message = "runs other programs" },
                    { name = "syscall", severity = "high", message = "makes raw system calls" },
                    { name = "golang.org/x/sys/unix", severity = "high", message = "makes raw system calls" },
                    { name = "unsafe", severity = "high", message = "reads and writes raw memory" },
                    { name = "C", severity = "high", message = "calls C code (cgo)" },
                    { name = "plugin", severity = "high", message = "loads native code at run time" },
                    { name = "net", severity = "medium", message = "opens network connections" },
                },
                patterns = {
                    -- os.StartProcess is in package os, which every program imports
                    { id = "start-process", severity = "high", strings = false, message = "runs other programs",
                        pattern = "%f[%w_]StartProcess%s*%(" },
                },
            },
            r = {
                restricted_modules = {
                    { name = "processx", severity = "high", message = "runs other programs" },
                    { name = "sys", severity = "high", message = "runs other programs" },
                    { name = "callr", severity = "high", message = "runs other R processes" },
                    { name = "Rcpp", severity = "high", message = "compiles and loads native code" },
                    { name = "inline", severity = "high", message = "compiles and loads native code" },
                    { name = "reticulate", severity = "medium", message = "runs Python code" },
                    { name = "httr", severity = "medium", message = "makes HTTP requests" },
                    { name = "httr2", severity = "medium", message = "makes HTTP requests" },
                    { name = "curl", severity = "medium", message = "makes HTTP requests" },
                    { name = "RCurl", severity = "medium", message = "makes HTTP requests" },
                },
                patterns = {
                    -- %f[%w_.] keeps system.time() and my_system() out
                    { id = "shell-out", severity = "high", strings = false, message = "runs other programs",
                        patterns = { "%f[%w_.]system2?%s*%(", "%f[%w_.]shell%s*%(", "%f[%w_.]shell%.exec%s*%(",
                            "%f[%w_.]pipe%s*%(" } },
                    -- do.call("system", ...), match.fun("system"): the same, by name
                    { id = "shell-out-by-name", severity = "high", message = "runs other programs, called by name",
                        patterns = { "%f[%w_.]do%.call%s*%(%s*[\"']system2?[\"']", "%f[%w_.]match%.fun%s*%(%s*[\"']system2?[\"']",
                            "%f[%w_.]get%s*%(%s*[\"']system2?[\"']" } },
                    { id = "native-code", severity = "high", strings = false, message = "loads or calls native code",
                        patterns = { "%f[%w_.]dyn%.load%s*%(", "%f[%w_.]library%.dynam%s*%(", "%f[%w_.]%.Call%s*%(",
                            "%f[%w_.]%.C%s*%(", "%f[%w_.]%.External%s*%(", "%f[%w_.]%.Fortran%s*%(" } },
                    { id = "eval", severity = "medium", strings = false, message = "evaluates a string as code",
                        patterns = { "%f[%w_.]eval%s*%(%s*parse%s*%(", "%f[%w_.]parse%s*%(%s*text%s*=",
                            "%f[%w_.]str2lang%s*%(", "%f[%w_.]str2expression%s*%(" } },
                    { id = "call-by-name", severity = "medium", strings = false,
                        message = "calls a function named by a string",
                        patterns = { "%f[%w_.]do%.call%s*%(%s*[\"']", "%f[%w_.]match%.fun%s*%(", "%f[%w_.]get%s*%(%s*[\"']" } },
                    { id = "network", severity = "medium", strings = false, message = "opens network connections",
                        patterns = { "%f[%w_.]url%s*%(", "%f[%w_.]socketConnection%s*%(", "%f[%w_.]make%.socket%s*%(",
                            "%f[%w_.]download%.file%s*%(" } },
                },
            },
            ruby = {
                restricted_modules = {
                    { name = "open3", severity = "high", message = "runs other programs" },
                    { name = "pty", severity = "high", message = "spawns programs on a pseudo-terminal" },
                    { name = "fiddle", severity = "high", message = "calls C functions and writes raw memory" },
                    { name = "ffi", severity = "high", message = "calls C functions" },
                    { name = "socket", severity = "medium", message = "opens network sockets" },
                    { name = "net/http", severity = "medium", message = "makes HTTP requests" },
                    { name = "open-uri", severity = "medium", message = "fetches URLs" },
                    { name = "net/ftp", severity = "medium", message = "opens FTP connections" },
                    { name = "net/smtp", severity = "medium", message = "sends mail" },
                },
                patterns = {
                    -- system / exec / spawn as calls or symbols (send(:system, ...)), backticks and
                    -- %x(), in the code only: "system" inside a string is not a call
                    { id = "shell-out", severity = "high", strings = false, message = "runs other programs",
                        patterns = { "%f[%w_]system%f[^%w_?!:]", "%f[%w_]exec%f[^%w_?!:]", "%f[%w_]spawn%f[^%w_?!:]",
                            "`", "%%x[^%w%s]", "%f[%w_]popen%f[^%w_]", "%f[%w_]Open3%f[^%w_]", "%f[%w_]PTY%f[^%w_]" } },
                    -- send("system", ...), open("|ls"), IO.read("|ls"): the same, through a string
                    { id = "shell-out-by-name", severity = "high", message = "runs other programs, called by name",
                        patterns = { "send%s*%(?%s*[:\"']system", "send%s*%(?%s*[:\"']exec", "send%s*%(?%s*[:\"']spawn",
                            "send%s*%(?%s*[:\"']popen", "send%s*%(?%s*[:\"']`", "method%s*%(?%s*[:\"']system",
                            "%f[%w_]open%s*%(?%s*[\"']|", "%f[%w_]IO%s*%.%s*%a+%s*%(?%s*[\"']|" } },
                    -- send("sys" + "tem", ...), send("#{x}"): a method named by a computed string
                    { id = "computed-call", severity = "high", strings = false,
                        message = "calls a method named by a computed string",
                        patterns = { "send%s*%(?%s*[\"']%s*[\"']%s*[%+%%<]", "send%s*%(?%s*\"%s*[^%s\"]",
                            "method%s*%(?%s*[\"']%s*[\"']%s*[%+%%<]" } },
                    { id = "fork", severity = "medium", strings = false, message = "forks the process",
                        pattern = "%f[%w_]fork%f[^%w_?!]" },
                    { id = "eval", severity = "medium", strings = false, message = "evaluates a string as code",
                        patterns = { "%f[%w_]eval%f[^%w_?!]", "%f[%w_]instance_eval%f[^%w_]", "%f[%w_]class_eval%f[^%w_]",
                            "%f[%w_]module_eval%f[^%w_]" } },
                    { id = "call-by-name", severity = "medium", strings = false,
                        message = "calls a method or loads a constant named by a string or symbol",
                        patterns = { "%f[%w_]send%f[^%w_?!]", "%f[%w_]__send__%f[^%w_]", "%f[%w_]public_send%f[^%w_]",
                            "%f[%w_]const_get%f[^%w_]" } },
                    { id = "dynamic-require", severity = "medium", strings = false,
                        message = "loads a library by a computed name",
                        patterns = { "%f[%w_]require%s*%(?%s*[%a_@$]", "%f[%w_]require%s*%(?%s*[\"']%s*[\"']%s*[%+%%<]" } },
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
