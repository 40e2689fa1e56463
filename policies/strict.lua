-- The strict llmbox policy: for code you trust least (untrusted prompts, public endpoints).
--
-- It starts from default.lua (`extends`) and changes only what is written here. Tables of
-- settings merge key by key. A list that grants things (syscalls.allow below, mounts, env.pass)
-- written here is the whole list; a list of rules (syscalls.deny, deny_ioctls, code-check
-- patterns and modules) may only add to the inherited one: write `{ append = { ... } }`, or
-- `{ remove = { ... } }` / `{ replace = { ... } }` to drop rules on purpose. Everything not
-- mentioned — the read-only mounts, the environment, loopback-only network, the refused ioctls,
-- the code-check rules — is inherited.

return {
    extends = "default",
    description = "Least trust: 10 s, 256M memory, syscall allow-list, medium-severity findings refused.",

    limits = {
        timeout = "10s",
        cpu = "10s",
        memory = "256M",
        processes = 32,
        output = "256K",
        workspace = "64M",
        -- open_files, file_size and tmp stay as in default
    },

    syscalls = {
        -- An allow-list: any syscall not named below is refused. Modelled on Docker's default
        -- seccomp profile, minus what a short-lived script does not need: System V IPC and POSIX
        -- message queues, Linux AIO, clock adjustment, file handles, fanotify, vmsplice,
        -- memfd_secret and landlock. Checked with strace against CPython 3.11 (threads,
        -- subprocess, multiprocessing, asyncio, sockets), dash, coreutils and Node 20.
        default = "deny",
        -- "errno" rather than "kill": a syscall missing from the list fails with ENOSYS (as if
        -- this kernel lacked it, so libc falls back to an older call, e.g. statx -> fstat) and an
        -- explicit refusal with EPERM; the program carries on and can report the failure
        action = "errno",
        allow = {
            -- files and directories
            "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
            "preadv2", "pwritev2", "open", "openat", "openat2", "creat", "close", "close_range",
            "lseek", "fstat", "stat", "lstat", "newfstatat", "statx", "statfs", "fstatfs",
            "access", "faccessat", "faccessat2", "readlink", "readlinkat", "getdents", "getdents64",
            "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2",
            "link", "linkat", "symlink", "symlinkat", "mknod", "mknodat",
            "chmod", "fchmod", "fchmodat", "chown", "fchown", "fchownat", "lchown",
            "truncate", "ftruncate", "fsync", "fdatasync", "sync", "syncfs", "sync_file_range",
            "fallocate", "fadvise64", "readahead", "flock", "fcntl", "dup", "dup2", "dup3", "umask",
            "utime", "utimes", "utimensat", "futimesat", "getcwd", "chdir", "fchdir",
            "copy_file_range", "sendfile", "splice", "tee",
            "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
            "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
            "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
            -- memory
            "brk", "mmap", "munmap", "mprotect", "mremap", "madvise", "msync", "mincore",
            "mlock", "mlock2", "munlock", "mlockall", "munlockall", "membarrier", "memfd_create",
            "pkey_alloc", "pkey_free", "pkey_mprotect",
            -- processes and threads. clone/clone3 are listed, but deny_namespace_clone
            -- (inherited, true) still refuses clone() with namespace flags and answers clone3
            -- (whose flags seccomp cannot read) with ENOSYS, so glibc uses clone() instead.
            "clone", "clone3", "fork", "vfork", "execve", "execveat", "exit", "exit_group",
            "wait4", "waitid", "kill", "tkill", "tgkill", "pidfd_open", "pidfd_send_signal",
            "getpid", "getppid", "gettid", "getpgid", "getpgrp", "setpgid", "getsid", "setsid",
            -- identity: without capabilities a process can only shuffle its own ids
            "getuid", "geteuid", "getgid", "getegid", "getgroups", "getresuid", "getresgid",
            "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
            "setfsuid", "setfsgid", "capget", "capset",
            "prctl", "arch_prctl", "set_tid_address", "set_robust_list", "rseq",
            "futex", "futex_waitv", "sched_yield", "sched_getaffinity", "sched_setaffinity",
            "sched_getparam", "sched_setparam", "sched_getscheduler", "sched_setscheduler",
            "sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval",
            "sched_getattr", "sched_setattr", "getpriority", "setpriority",
            "getrlimit", "setrlimit", "prlimit64", "getrusage", "times", "sysinfo", "uname",
            "getcpu", "getrandom", "restart_syscall",
            -- a process may add seccomp filters of its own: they can only take rights away
            "seccomp",
            -- signals and timers
            "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigpending",
            "rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack",
            "signalfd", "signalfd4", "pause", "alarm", "getitimer", "setitimer",
            "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete",
            "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
            "timerfd_create", "timerfd_settime", "timerfd_gettime",
            -- waiting for I/O; ioctl is still filtered by deny_ioctls
            "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl",
            "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "pipe", "pipe2",
            "ioctl",
            -- sockets: the network namespace has loopback only, so these reach nothing outside
            "socket", "socketpair", "bind", "listen", "accept", "accept4", "connect",
            "getsockname", "getpeername", "getsockopt", "setsockopt", "sendto", "recvfrom",
            "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown",
        },
        -- `deny` is inherited from default but not used while default = "deny"
    },

    checks = {
        -- medium findings (sockets, URL fetching, eval/exec, dynamic imports, os.fork) are refused
        -- too; `import os` (low) still runs
        threshold = "medium",
    },
}
