/* Internal helpers shared by the runtime's files. Not installed, not part of the API. */
#ifndef LLMBOX_INTERNAL_H
#define LLMBOX_INTERNAL_H

#include "llmbox.h"

#include <errno.h>
#include <grp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

/* Cleanup attributes: resources are released on every return path (the bubblewrap way). */
static inline void lb_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
static inline void lb_freep(void *p)
{
	free(*(void **)p);
}
#define _cleanup_fd_   __attribute__((cleanup(lb_closep)))
#define _cleanup_free_ __attribute__((cleanup(lb_freep)))

static inline int lb_steal_fd(int *fd)
{
	int r = *fd;
	*fd = -1;
	return r;
}

/* Fills err and returns -1, so callers can `return lb_fail(err, EINVAL, "...")`. */
int lb_fail(lb_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same for a failed system call: appends ": strerror(code)". */
int lb_fail_sys(lb_error *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Namespaces of a live jail, held as fds by the caller: while they are open the jail (and its
 * workspace tmpfs) exists; no process needs to stay alive for it. */
struct lb_jail {
	int userns, mntns, netns, utsns, cgroupns; /* cgroupns is -1 where unsupported */
	uid_t host_uid;
	gid_t host_gid;
};

/* Children report setup failures to the caller over a CLOEXEC pipe as one lb_error record, then
 * exit 127: "the sandbox broke" travels separately from the program's own exit status. */
void lb_child_fail(int report_fd, int code, const char *fmt, ...) __attribute__((noreturn))
__attribute__((format(printf, 3, 4)));

/* Passes an error a helper already described on to the caller as it is. */
void lb_child_relay(int report_fd, const lb_error *e) __attribute__((noreturn));

#define LB_PROGRESS (-1)
/* A progress record (code LB_PROGRESS, msg[0] = stage) on the same pipe. */
void lb_child_progress(int report_fd, char stage);

/* Reads one lb_error record from a report pipe. Returns 1 if one was read, 0 on EOF. */
int lb_read_report(int fd, lb_error *err);

/* In a forked child: joins the jail's namespaces (user first: it grants the capabilities the others
 * need). Groups are dropped first when the caller is root, so no host group leaks in. */
int lb_jail_enter(const lb_jail *j, lb_error *err);
/* Appends the jail's namespace fds to keep[] (for lb_close_fds_except); returns the new count. */
size_t lb_jail_keep_fds(const lb_jail *j, int *keep, size_t n);

/* In a forked child: become the sandbox user with no capabilities at all (effective, permitted,
 * inheritable, ambient, bounding) and no_new_privs. */
int lb_become_sandbox_user(lb_error *err);
int lb_caps_drop_all(lb_error *err);
/* One capability left in the effective and permitted sets (cap < 0: none), the inheritable set
 * empty: a bare capset, which calls no allocator (safe beside a CLONE_VM child). -1 with errno. */
int lb_caps_keep_only(int cap);

/* ---- llmbox-run (run_helper.c): the first child of every native jail and run, exec'd ---- */
/* Where it is. Set once, before the first jail (llmbox.backends.native does, from the C module's
 * path); checked to be an executable file. */
int lb_set_run_helper(const char *path, lb_error *err);
/* Its path as set (resolved), or NULL. */
const char *lb_run_helper(void);
/* vforks and execs it with the job in the memfd `job` (chain_wire.c), the descriptors in pass[]
 * left open across the exec under the same numbers, report_w for its setup failures. Returns its
 * pid, or -1 with err filled (it is not set, or vfork failed; an exec that fails is reported on
 * report_w). */
pid_t lb_exec_helper(int job, const int *pass, size_t n, int report_w, lb_error *err);
/* A jail's opening as a job for the helper, and what the helper then does with it (jail.c, K0). */
int lb_jail_job_encode(int fd, pid_t parent, const lb_jail_config *cfg, int report_w, int sync_r,
		       lb_error *err);
_Noreturn void lb_jail_first_child(const lb_jail_config *cfg, int report_w, int sync_r,
				   pid_t parent);

/* Empties the signal mask and sets every handler to its default (a new process of ours). */
void lb_reset_signals(void);

/* Closes every fd >= 3 except those listed. */
void lb_close_fds_except(const int *keep, size_t n);
/* Closes *fd if open and marks it closed (-1). */
void lb_close_fd(int *fd);
/* A child that is dying or about to (it was killed or told to go) is collected later by
 * lb_reap instead of waited for; waited for at once when too many are pending (chain.c). */
void lb_bury_pid(pid_t pid);

/* write() that cannot raise SIGPIPE in the caller (EPIPE is returned instead). */
ssize_t lb_write_nosigpipe(int fd, const void *buf, size_t len);
/* Removes the directory `name` beneath dirfd and everything in it, following no symlink. */
void lb_remove_tree_at(int dirfd, const char *name);

/* Writes all of buf (retrying on EINTR/short writes). */
int lb_write_all(int fd, const void *buf, size_t len);
ssize_t lb_read_full(int fd, void *buf, size_t len);
int lb_write_string_file(const char *path, const char *s);

/* Opens `path` (inside the jail) beneath `dirfd` without following any symlink or "..". */
int lb_open_beneath(int dirfd, const char *path, int flags, unsigned mode);
/* The host path that path names inside root, resolved as a chroot to root would (no symlink or
 * ".." leaves it); -1 with errno. */
int lb_resolve_in_root(const char *root, const char *path, char *out, size_t size);
/* Creates the parent directories of `path` beneath dirfd, without following symlinks. */
int lb_mkdirs_beneath(int dirfd, const char *path, unsigned mode);

/* ---- file descriptors (fds.c) ---- */
/* Held by the caller: a session (jail.c: its namespaces), a prestarted run waiting for its
 * request (chain.c: stdout, stderr, status, report, stdin, control, stop). */
#define LB_FDS_SESSION 5
#define LB_FDS_PENDING 7
/* Kept free for runs: one run takes 12 at its peak (a run with stdin: its pipes at fork time,
 * both ends), a copy out 10, a prestarted run 14 (measured by lowering RLIMIT_NOFILE under an
 * open session until each failed); the rest is room for the host program's own. */
#define LB_FDS_RESERVE 32
/* Fails with EMFILE and a message saying why and how to fix it when taking `holds` more
 * descriptors for good would leave fewer than LB_FDS_RESERVE free. `what`: "open a session". */
int lb_fd_check(unsigned holds, const char *what, lb_error *err);

/* ---- cgroups (cgroup.c) ---- */
enum lb_cg_controller { LB_CG_MEMORY, LB_CG_PIDS, LB_CG_CPUACCT, LB_CG_CPU, LB_CG_N };

typedef struct lb_cgroup {
	int version; /* 0: none */
	/* Per-run directories, "" when not used. v2 has one for everything (dir[LB_CG_MEMORY]);
	 * v1 one per controller, where two controllers mounted together share one. */
	char dir[LB_CG_N][256];
} lb_cgroup;

typedef struct lb_cgroup_support {
	int version;	   /* 0: none we may write to */
	bool memory, pids; /* limits enforced and their firing reported */
	bool cpu;	   /* CPU quotas (limits.cpus) */
	bool cpuacct;	   /* CPU time of a whole run, killed or not */
	char note[256];	   /* what was found, and how to get more */
} lb_cgroup_support;

typedef struct lb_cgroup_usage {
	bool oom;	   /* the memory limit killed something */
	bool pids_refused; /* the pids limit refused a fork */
	uint64_t peak;	   /* bytes of memory at the peak, 0 when unknown */
	double cpu_ms;	   /* CPU time of every process of the run, -1 when unknown */
} lb_cgroup_usage;

/* Which cgroup setup this host offers (version 0 when none we may write to). */
void lb_cgroup_detect(lb_cgroup_support *s);
/* Creates the run's cgroups with its limits; refuses a CPU quota no cgroup can enforce. On
 * failure, lb_cgroup_destroy removes what was made. */
int lb_cgroup_create(lb_cgroup *cg, const lb_limits *lim, lb_error *err);
/* In the run's first child (a fork: one thread): moves the calling process into the run's
 * cgroups. */
int lb_cgroup_join(const lb_cgroup *cg, lb_error *err);
/* Whether the run's cgroups enforce the memory (LB_CG_MEMORY) or processes (LB_CG_PIDS) limit. */
bool lb_cgroup_enforces(const lb_cgroup *cg, enum lb_cg_controller c);
/* Cheap enough to poll: has the pids limit refused a fork yet? */
bool lb_cgroup_pids_refused(const lb_cgroup *cg);
void lb_cgroup_read(const lb_cgroup *cg, lb_cgroup_usage *u);
void lb_cgroup_destroy(lb_cgroup *cg);

/* ---- rlimits (limits.c) ---- */
/* Sets rlimits for the program; the memory limit goes to RLIMIT_DATA (plus a loose RLIMIT_AS)
 * when the run's cgroups do not enforce it. */
int lb_apply_rlimits(const lb_limits *lim, const lb_cgroup *cg, lb_error *err);

/* seccomp.c */
int lb_filter_load(const lb_filter *f, lb_error *err);
/* A filter holding a copy of a compiled program (lb_filter_program's bytes), for the run helper;
 * NULL with err filled when it is not a whole number of BPF instructions. */
lb_filter *lb_filter_from_program(const void *prog, size_t len, lb_error *err);

/* ---- the Lua modules' shared helpers (lua_util.c) ---- */
struct lua_State;
/* Pushes nil, err->msg and the errno's name ("EINVAL" when none): 3 values. */
int lb_lua_push_error(struct lua_State *L, const lb_error *e);
/* llmbox serve's HTTP request parser (lua_httpparse.c): core.http_request_parser */
int lb_lua_http_request_parser(struct lua_State *L);
int lb_lua_http_response_parser(struct lua_State *L);
/* { fd, ... }, { "r" | "w" | "rw", ... }, timeout_ms | nil (-1): what run:fds() and the like
 * return. */
struct pollfd;
int lb_lua_push_fds(struct lua_State *L, const struct pollfd *pf, int n, int timeout);
/* Registers a userdata class: methods (a luaL_Reg array) as __index, gc as __gc. */
struct luaL_Reg;
void lb_lua_class(struct lua_State *L, const char *name, const struct luaL_Reg *methods,
		  int (*gc)(struct lua_State *L));

/* ---- interactive cells (cell.c) ---- */

/* The largest value an interactive program may answer a cell with (the repr of its last
 * expression; the program bounds it further). */
#define LB_CELL_VALUE_MAX (1u << 20)

/* An interactive program's answer to a cell (see cell.c). */
struct lb_cell_answer {
	bool matches; /* its tag is the cell's */
	int status;   /* 0..255 */
	unsigned long long cpu_us;
	bool plots;	   /* the plots directory has files */
	const char *value; /* points into the parsed buffer */
	size_t value_len;
};

/* Parses one answer at the start of buf: its length when whole, 0 when more is needed, -1 when
 * it is malformed (the program broke the protocol). */
long lb_cell_parse(const char *buf, size_t len, const char *tag, struct lb_cell_answer *out);

/* Applies one image layer (a tar, compressed or not, read from in_fd) onto the root filesystem
 * being built at root_fd (layer.c has the rules); *total counts the bytes written across layers,
 * bounded by max_bytes; entries left out (devices, FIFOs) are listed in skipped, one per line. */
int lb_layer_apply(int in_fd, int root_fd, uint64_t max_bytes, uint64_t *total, char *skipped,
		   size_t skipped_len, lb_error *err);

#endif
