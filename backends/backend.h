/* The backend contract: every driver (native now; docker, podman, kubernetes later) implements
 * these operations and declares what it can do, so callers ask instead of guess. A driver that
 * cannot honour a request fails with a clear error; none ever falls back to running code with less
 * isolation. The Lua binding (runtime/lua_core.c) reaches drivers only through this table. */
#ifndef LLMBOX_BACKEND_H
#define LLMBOX_BACKEND_H

#include "../runtime/llmbox.h"

enum lb_backend_cap {
	LB_CAP_POOL = 1 << 0,		      /* sessions may be pre-created and pooled */
	LB_CAP_PERSISTENT_WORKSPACE = 1 << 1, /* /sandbox survives across runs of a session */
	LB_CAP_NETWORK_POLICY = 1 << 2,	      /* network can be cut to loopback */
	LB_CAP_SECCOMP = 1 << 3,	      /* the policy's syscall rules are enforced */
	LB_CAP_IMAGES = 1 << 4,		      /* runs inside container images */
	LB_CAP_INTERACTIVE = 1 << 5,	      /* one interpreter lives across runs (cells) */
	LB_CAP_EXISTING_SANDBOX = 1 << 6,     /* keeps a sandbox and attaches to it by id */
	LB_CAP_EGRESS = 1 << 7,		      /* outbound network that never reaches the host */
	LB_CAP_COMMIT = 1 << 8,		      /* saves a sandbox's workspace as an image */
	LB_CAP_ROOTFS =
		1 << 9, /* runs a root filesystem (an unpacked image) instead of the host's */
	LB_CAP_RUN_LIMITS = 1 << 10, /* lowers memory and the CPU quota for one run */
};

/* Capability bits and the names Lua sees (core.backends(), `llmbox backends`), in one place. */
#define LB_CAP_NAMES(X)                                                                            \
	X(LB_CAP_POOL, "pool")                                                                     \
	X(LB_CAP_PERSISTENT_WORKSPACE, "persistent_workspace")                                     \
	X(LB_CAP_NETWORK_POLICY, "network_policy")                                                 \
	X(LB_CAP_SECCOMP, "seccomp")                                                               \
	X(LB_CAP_IMAGES, "images")                                                                 \
	X(LB_CAP_INTERACTIVE, "interactive")                                                       \
	X(LB_CAP_EXISTING_SANDBOX, "existing_sandbox")                                             \
	X(LB_CAP_EGRESS, "egress")                                                                 \
	X(LB_CAP_COMMIT, "commit")                                                                 \
	X(LB_CAP_ROOTFS, "rootfs")                                                                 \
	X(LB_CAP_RUN_LIMITS, "run_limits")

typedef struct lb_open_config {
	lb_jail_config jail;
	lb_syscall_policy syscalls;
	/* bubblewrap and nsjail only (wrapped.c): the tool's command line (its path first) as
	 * llmbox.backends.bubblewrap / .nsjail made it from the policy (bwrap's without the fds
	 * the driver adds); jail-ready, the program the tool starts once the jail is built
	 * (jail_ready.c); bwrap: the files to place before the mounts; nsjail: its
	 * configuration (given to it as fd 3). */
	const char *const *wrap_argv;
	size_t wrap_argc;
	const char *wrap_ready;
	const lb_file *wrap_files; /* (their modes are bwrap's: read-only) */
	size_t n_wrap_files;
	const char *wrap_config;
	size_t wrap_config_len;
} lb_open_config;

typedef struct lb_backend {
	const char *name;
	unsigned caps;
	/* Returns an opaque session owned by the caller, released with close(). */
	void *(*open)(const lb_open_config *cfg, lb_error *err);
	int (*run)(void *session, const lb_run_spec *spec, lb_result *res, lb_error *err);
	/* Files and directories; `skipped` lists entries that were not copied (see llmbox.h). */
	int (*copy_in)(void *session, const char *host_path, const char *path, unsigned mode,
		       char *skipped, size_t skipped_len, lb_error *err);
	int (*copy_out)(void *session, const char *path, const char *host_path, uint64_t max,
			char *skipped, size_t skipped_len, lb_error *err);
	/* A run's results, in memory, as a tar stream through the driver (see lb_collect). */
	int (*collect)(void *session, const char *path, uint64_t max, lb_entry_fn fn, void *ud,
		       lb_error *err);
	void (*close)(void *session);
	/* Pools (LB_CAP_POOL). prestart starts a run whose program waits for its request
	 * (spec->prestart, see lb_run_begin); the pending run it returns is the driver's, owned by
	 * the caller, and released by pending_finish or pending_abandon. reset empties the
	 * session's writable state for its next user. NULL where the driver cannot. */
	int (*prestart)(void *session, const lb_run_spec *spec, void **pending, lb_error *err);
	int (*pending_wait)(void *pending, int timeout_ms); /* 1 ready, 0 not yet, -1 dead */
	int (*pending_finish)(void *pending, const lb_run_io *io, lb_result *res, lb_error *err);
	void (*pending_abandon)(void *pending);
	int (*reset)(void *session, lb_error *err);
	void (*pending_discard)(void *pending); /* pending_abandon that never waits */
	/* Runs that never block the caller (see lb_active in llmbox.h): start and pending_start
	 * return a run driven by run_fds / run_step and ended by run_end, or by run_discard, which
	 * never waits. The run is the caller's; spec->on_output (io->on_output) is called from
	 * run_step and run_end. */
	int (*start)(void *session, const lb_run_spec *spec, void **run, lb_error *err);
	int (*pending_start)(void *pending, const lb_run_io *io, void **run, lb_error *err);
	int (*run_fds)(void *run, struct pollfd *pf, int max, int *timeout_ms);
	int (*run_step)(void *run, int wait_ms);
	void (*run_abort)(void *run, const char *why);
	int (*run_end)(void *run, lb_result *res, lb_error *err);
	void (*run_discard)(void *run);
	/* Opening and emptying a session without blocking (see lb_jail_task in llmbox.h):
	 * open_start and reset_start return a task driven by task_fds / task_step (1: over) and
	 * ended by task_end (an open's session in *session) or task_discard, which never waits.
	 * The task is the caller's; a reset's does not borrow the session. */
	int (*open_start)(const lb_open_config *cfg, void **task, lb_error *err);
	int (*reset_start)(void *session, void **task, lb_error *err);
	int (*task_fds)(void *task, struct pollfd *pf, int max, int *timeout_ms);
	int (*task_step)(void *task, int wait_ms);
	int (*task_end)(void *task, void **session, lb_error *err);
	void (*task_discard)(void *task);
	/* Egress (LB_CAP_EGRESS, see lb_egress_open): the session's runs get a network namespace
	 * of their own with user-mode networking and the ruleset (installs: the library installs'
	 * runs only, install_network); egress_denied: what it refused since the last call (nft's
	 * JSON, *out malloc'd). NULL where the driver cannot. */
	int (*egress)(void *session, const char *ruleset, const char *pasta, bool installs,
		      lb_error *err);
	int (*egress_denied)(void *session, bool installs, char **out, lb_error *err);
} lb_backend;

extern const lb_backend lb_backend_native;
extern const lb_backend lb_backend_bubblewrap;
extern const lb_backend lb_backend_nsjail;
extern const lb_backend lb_backend_nsjail;

/* A jail session (native.c): the jail's namespaces and the seccomp program of its policy. Once
 * bwrap or nsjail has built a jail, its session is one of these too, so those drivers
 * (wrapped.c) share every operation below but opening. lb_native_session_new takes ownership of
 * both (NULL: no memory, and the caller still owns them). */
void *lb_native_session_new(lb_jail *jail, lb_filter *filter);
void lb_native_close(void *session);
int lb_native_egress(void *session, const char *ruleset, const char *pasta, bool installs,
		     lb_error *err);
int lb_native_egress_denied(void *session, bool installs, char **out, lb_error *err);
int lb_native_run(void *session, const lb_run_spec *spec, lb_result *res, lb_error *err);
int lb_native_copy_in(void *session, const char *host_path, const char *path, unsigned mode,
		      char *skipped, size_t skipped_len, lb_error *err);
int lb_native_copy_out(void *session, const char *path, const char *host_path, uint64_t max,
		       char *skipped, size_t skipped_len, lb_error *err);
int lb_native_collect(void *session, const char *path, uint64_t max, lb_entry_fn fn, void *ud,
		      lb_error *err);
int lb_native_prestart(void *session, const lb_run_spec *spec, void **pending, lb_error *err);
int lb_native_pending_wait(void *pending, int timeout_ms);
int lb_native_pending_finish(void *pending, const lb_run_io *io, lb_result *res, lb_error *err);
void lb_native_pending_abandon(void *pending);
void lb_native_pending_discard(void *pending);
int lb_native_start(void *session, const lb_run_spec *spec, void **run, lb_error *err);
int lb_native_pending_start(void *pending, const lb_run_io *io, void **run, lb_error *err);
int lb_native_reset(void *session, lb_error *err);
/* Emptying tasks, and the task operations for them and native's openings. */
int lb_native_reset_start(void *session, void **task, lb_error *err);
int lb_native_task_fds(void *task, struct pollfd *pf, int max, int *timeout_ms);
int lb_native_task_step(void *task, int wait_ms);
int lb_native_task_end(void *task, void **session, lb_error *err);
void lb_native_task_discard(void *task);

/* The core's own run steps (lb_active) with the contract's signatures: drivers whose runs are
 * the core's (native) use them as their run_* operations, and so does core.spawn (spawn.c). */
int lb_active_op_fds(void *run, struct pollfd *pf, int max, int *timeout_ms);
int lb_active_op_step(void *run, int wait_ms);
void lb_active_op_abort(void *run, const char *why);
int lb_active_op_end(void *run, lb_result *res, lb_error *err);
void lb_active_op_discard(void *run);
/* Only the run_* operations: for runs of lb_spawn. */
extern const lb_backend lb_spawn_ops;

/* NULL-terminated list of compiled-in drivers. */
extern const lb_backend *const lb_backends[];

#endif
