/* llmbox runtime: the public C API of the native jail.
 *
 * Usage pattern (the Lua binding in lua_core.c is the main caller):
 *
 *   lb_error err;
 *   lb_filter *f = lb_filter_build(&syscall_policy, &err); // once per policy
 *   lb_jail *j = lb_jail_open(&jail_config, &err);         // one live jail = one session
 *   lb_result r;
 *   lb_run(j, &run_spec, f, &r, &err);                     // any number of runs
 *   lb_copy_in(j, "in", "/sandbox/in", 0644, NULL, 0, &err); // files and directories
 *   lb_jail_close(j);                                      // destroys it and its workspace
 *   lb_filter_free(f);
 *
 * Every function returns 0 (or a non-NULL handle) on success and -1 (or NULL) on failure, with
 * `err` filled: errors are returned, never turned into exit(), because the caller may be a daemon,
 * an nginx worker or a threaded program. Nothing here changes the calling process: every jail step
 * happens in forked children.
 *
 * Ownership: handles are owned by the caller and freed with their close or free function. Strings
 * and arrays passed in specs are borrowed for the duration of the call only.
 */
#ifndef LLMBOX_H
#define LLMBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define LLMBOX_VERSION "0.1.0"

/* The uid/gid every sandboxed program runs as, inside the jail. Outside it maps to the caller's uid
 * (ordinary user) or to lb_jail_config.host_uid (root), never to host root. */
#define LB_SANDBOX_UID 1000
#define LB_SANDBOX_GID 1000

typedef struct lb_error {
	int code;	/* errno-style cause, 0 when not applicable */
	char msg[1024]; /* human-readable: what failed, with its arguments, and how to fix it */
} lb_error;

/* ---- seccomp filters (seccomp.c) ---- */

typedef struct lb_syscall_policy {
	bool default_allow;	 /* true: deny-list mode; false: allow-list mode */
	bool kill;		 /* refused calls kill the process instead of failing with EPERM */
	const char *const *deny; /* syscall names, refused in deny-list mode */
	size_t n_deny;
	const char *const *allow; /* syscall names, allowed in allow-list mode */
	size_t n_allow;
	bool deny_namespace_clone; /* clone() with CLONE_NEW* flags, and clone3 (opaque args) */
	const unsigned long *deny_ioctls; /* ioctl request numbers, compared on their low 32 bits */
	size_t n_deny_ioctls;
	/* socket(): only these address families (AF_*) when restrict_sockets, the rest refused;
	 * AF_NETLINK only for NETLINK_ROUTE when netlink_route_only */
	bool restrict_sockets;
	const int *socket_families;
	size_t n_socket_families;
	bool netlink_route_only;
} lb_syscall_policy;

typedef struct lb_filter lb_filter;

lb_filter *lb_filter_build(const lb_syscall_policy *policy, lb_error *err);
void lb_filter_free(lb_filter *f);
/* The compiled program as a sealed memfd (CLOEXEC, at offset 0) of struct sock_filter, the form
 * bwrap's --seccomp takes; the caller closes it. */
int lb_filter_memfd(const lb_filter *f, lb_error *err);
/* The compiled program: *len bytes of struct sock_filter, owned by f. */
const void *lb_filter_program(const lb_filter *f, size_t *len);
/* An address family by the name policies give it ("unix", "inet", "vsock"...; "netlink_route"
 * is AF_NETLINK); -1 when unknown. */
int lb_socket_family(const char *name);
/* Resolves a syscall name on the native architecture; -1 when unknown. */
int lb_syscall_number(const char *name);
/* The native architecture's name for syscall number nr, or NULL; valid until the next call in
 * this thread. */
const char *lb_syscall_name(int nr);
/* Resolves an ioctl name from the set the policies may name; 0 when unknown. */
unsigned long lb_ioctl_number(const char *name);

/* ---- jails (jail.c) ---- */

typedef struct lb_mount {
	const char *src; /* host path */
	const char *dst; /* path inside the jail */
	bool optional;	 /* skip silently when src does not exist on the host */
	bool in_root;	 /* src is a path inside lb_jail_config.rootfs, resolved there */
} lb_mount;

typedef struct lb_jail_config {
	const lb_mount *ro; /* read-only bind mounts */
	size_t n_ro;
	uint64_t workspace_size; /* bytes, tmpfs at /sandbox (kept across runs of one jail) */
	uint64_t tmp_size;	 /* bytes, tmpfs at /tmp and at /dev/shm */
	const char *hostname;	 /* NULL: "llmbox" */
	const char *hosts_extra; /* NULL, or lines the jail's /etc/hosts gets after its own */
	/* NULL: the host's root. Else a root filesystem (an image's): the mounts marked in_root and
	 * the top-level links (/bin, /lib...) come from it, resolved inside it. */
	const char *rootfs;
	uid_t host_uid; /* used when the caller is root: the unprivileged host uid to map to */
	gid_t host_gid;
} lb_jail_config;

typedef struct lb_jail lb_jail;
/* The files of a jail's /etc, one per i from 0 until false: the name below /etc and the content
 * (static, the hostname, or written to buf). The native jail writes them; the wrapped backends
 * hand the same to bwrap and nsjail. */
bool lb_jail_etc(size_t i, const char *hostname, const char **name, const char **content, char *buf,
		 size_t len);

lb_jail *lb_jail_open(const lb_jail_config *cfg, lb_error *err);
void lb_jail_close(lb_jail *j);
/* Runs of the jail join netns (a dup of it) from now on instead of its own network namespace. */
int lb_jail_use_netns(lb_jail *j, int netns, lb_error *err);

/* ---- egress (egress.c) ---- */

/* A network namespace for a jail's runs, in the jail's user namespace, with outbound-only
 * user-mode networking (pasta, from Debian's passt; NULL: "pasta" on PATH) and an nftables
 * ruleset (nft's syntax) loaded before anything runs there. It holds a table "inet llmbox" with
 * the sets "denied" and "denied6" the ruleset adds refused destinations to. */
typedef struct lb_egress lb_egress;
lb_egress *lb_egress_open(const lb_jail *j, const char *ruleset, const char *pasta, lb_error *err);
int lb_egress_netns(const lb_egress *e);
/* The sets "denied" and "denied6" as nft's JSON, emptied: what was refused since the last call.
 * *out is malloc'd, the caller's. */
int lb_egress_denied(const lb_egress *e, const lb_jail *j, char **out, lb_error *err);
/* Stops pasta and lets the namespace go (it lasts while a jail still holds it). */
void lb_egress_close(lb_egress *e);
/* Empties the jail's writable trees (/sandbox, /tmp, /dev/shm) for its next user, when a pool
 * allows a jail to be reused. Runs leave nothing else behind: each had its own pid, ipc and mount
 * namespaces, and its whole process tree died with it. */
int lb_jail_reset(lb_jail *j, lb_error *err);

/* Opening and emptying a jail without blocking, for event loops: the work is a child's, and the
 * caller watches one fd (lb_jail_task_fd; -1 when the next step needs no waiting), steps when it
 * is readable (lb_jail_task_step: 1 when the work is over; wait_ms 0 never blocks, -1 waits),
 * and ends the task (lb_jail_task_end: the opened jail in *jail, or -1 with err; it finishes
 * the work first if it is not over). lb_jail_task_discard never waits: an unfinished opening is
 * abandoned (its setup children go on EOF and lb_reap collects them), an emptying's helper is
 * killed. lb_jail_open and lb_jail_reset are these steps in a loop. An emptying does not
 * borrow j past lb_jail_reset_begin. */
typedef struct lb_jail_task lb_jail_task;
lb_jail_task *lb_jail_open_begin(const lb_jail_config *cfg, lb_error *err);
lb_jail_task *lb_jail_reset_begin(lb_jail *j, lb_error *err);
int lb_jail_task_fd(const lb_jail_task *t);
int lb_jail_task_step(lb_jail_task *t, int wait_ms);
int lb_jail_task_end(lb_jail_task *t, lb_jail **jail, lb_error *err);
void lb_jail_task_discard(lb_jail_task *t);

/* ---- runs (chain.c: the process chain, supervise.c: lb_run_finish, verdict.c) ---- */

typedef struct lb_limits {
	double timeout;	     /* wall clock seconds, 0 = none */
	double cpu;	     /* CPU seconds, 0 = none */
	uint64_t memory;     /* bytes, 0 = none */
	uint64_t processes;  /* 0 = none */
	uint64_t open_files; /* 0 = inherit */
	uint64_t file_size;  /* bytes, 0 = none */
	uint64_t output;     /* bytes of stdout+stderr kept; more kills the run; 0 = none */
	double cpus;	     /* CPUs' worth of time per period (a cgroup quota), 0 = none; a run
				that asks for one where no cpu cgroup can enforce it is refused */
} lb_limits;

typedef struct lb_file {
	const char *path; /* absolute path inside the jail; parents are created */
	const char *data;
	size_t len;
	unsigned mode;
} lb_file;

enum lb_stream { LB_STDOUT = 1, LB_STDERR = 2 };

/* Called as output arrives. Return non-zero to abort the run (the tree is killed, lb_run fails). */
typedef int (*lb_output_fn)(void *ud, enum lb_stream stream, const char *buf, size_t len);

typedef struct lb_run_spec {
	const char *const *argv; /* NULL-terminated; argv[0] is searched in PATH from envp */
	const char *const *envp; /* NULL-terminated, the complete environment */
	const char *cwd;	 /* NULL: /sandbox */
	const char *stdin_data;	 /* NULL: /dev/null */
	size_t stdin_len;
	/* written inside the jail, as the sandbox user, before the program starts */
	const lb_file *files;
	size_t n_files;
	/* Trees removed (beneath the jail's root, as the sandbox user) before the files are
	 * written: results of the previous run that must not show up in this one. */
	const char *const *clean;
	size_t n_clean;
	/* A library install's network (libraries.network): the session's install egress (a network
	 * namespace of its own, see lb_egress_open) instead of the jail's, for this run only; a
	 * session without one refuses the run. Never the host's network. */
	bool install_network;
	/* NULL, or this run's /etc/hosts (the install's names, pinned when its egress was made):
	 * bind-mounted read-only over the jail's in the run's own mount namespace. */
	const char *hosts;
	/* Prestarted run (lb_run_begin only): the program gets fd 3, a socket on which it writes
	 * the byte 'R' once it is ready, then reads its request until EOF (see lb_run_finish).
	 * When done it may close its stdout and stderr and write one line on that socket,
	 * "exit STATUS UTIME_US STIME_US MAXRSS_KB PROBE\n": the run then ends at once (what is
	 * left of it is killed) instead of after the interpreter's own teardown. The program can
	 * only misreport its own result this way; the kernel's status wins when it comes first. */
	bool prestart;
	/* A directory checked when the program ends (lb_result.probe_found): callers skip copying
	 * out results that are not there, e.g. plots. NULL: none. */
	const char *probe;
	lb_limits limits;
	lb_output_fn on_output;
	void *ud;
} lb_run_spec;

/* Which limit ended a run. */
enum lb_limit {
	LB_LIMIT_NONE = 0,
	LB_LIMIT_TIMEOUT,
	LB_LIMIT_CPU,
	LB_LIMIT_MEMORY,
	LB_LIMIT_PROCESSES,
	LB_LIMIT_OUTPUT,
	LB_LIMIT_FILE_SIZE,
};
const char *lb_limit_name(enum lb_limit l);

typedef struct lb_result {
	int exit_code; /* the program's exit status, or 128 + signal */
	int signal;    /* signal that ended the program, 0 if it exited */
	enum lb_limit limit;
	bool truncated;	  /* output was cut at limits.output */
	bool probe_found; /* lb_run_spec.probe had entries when the program ended */
	double duration_ms;
	/* CPU time of the whole run (every process, from its cgroup), or of the program alone
	 * (its rusage) where no cgroup counts it; -1 when unknown: a run killed before it could
	 * report, on a host without a cpu accounting cgroup. */
	double cpu_ms;
	uint64_t max_rss; /* bytes; peak of the cgroup when one is used */
	char *out;	  /* captured stdout (malloc'd, NUL-terminated, may contain NULs); free with
			     lb_result_free */
	size_t out_len;
	char *err;
	size_t err_len;
	/* interactive cells */
	bool state_lost;  /* the program is gone: the next cell needs a new one */
	bool interrupted; /* a limit interrupted the cell, which ended with its state kept */
	char *value;	  /* the repr of the cell's last expression (malloc'd), or NULL */
	size_t value_len;
} lb_result;

int lb_run(lb_jail *j, const lb_run_spec *spec, const lb_filter *filter, lb_result *res,
	   lb_error *err);

/* A run in two halves, for pools: lb_run_begin starts the process tree (for a prestarted run, a
 * program that waits for its code, e.g. an interpreter that has already started), and
 * lb_run_finish hands it its request and stdin, then supervises it exactly like lb_run. The wall
 * clock starts at lb_run_finish for prestarted runs. The pending run owns its processes, pipes and
 * cgroup, and is freed by lb_run_finish or lb_run_abandon (which kills it). It does not need the
 * jail any more: closing the jail first is allowed. */
typedef struct lb_pending lb_pending;

typedef struct lb_run_io {
	const char *request; /* prestarted runs: sent on fd 3, then EOF */
	size_t request_len;
	/* Interactive runs (cells): the request is one cell (cell.c has the words), the program
	 * answers it on fd 3 with this tag, and the run goes on after it: lb_active_end gives the
	 * pending run back, alive, unless the cell ended it (lb_result.state_lost). A timeout or
	 * the output cap interrupts the cell ("I"); a cell still running `grace` seconds later
	 * ends the run. */
	const char *cell_tag; /* NULL: an ordinary run */
	double grace;
	const char *stdin_data; /* NULL: EOF at once */
	size_t stdin_len;
	double timeout;	 /* seconds; 0: the spec's limits.timeout */
	uint64_t output; /* bytes; 0: the spec's limits.output */
	lb_output_fn on_output;
	void *ud;
} lb_run_io;

int lb_run_begin(lb_jail *j, const lb_run_spec *spec, const lb_filter *filter, lb_pending **out,
		 lb_error *err);
/* Stops a pending run and frees it without waiting for its processes: lb_reap collects them
 * (what a garbage collector may call; lb_run_abandon waits). */
void lb_run_discard(lb_pending *p);

/* Supervising a run without blocking, for event loops (the Lua binding, a daemon):
 *
 *   lb_active *a;
 *   lb_active_begin(pending, &io, &a, &err);     // takes the pending run, hands it its request
 *   while (!lb_active_step(a, 0)) {               // 0: never blocks; -1: may sleep in poll
 *       n = lb_active_fds(a, pf, max, &timeout);  // wait for these, or for `timeout` ms
 *       ...the caller's loop...
 *   }
 *   lb_active_end(a, &res, &err);                 // the result; frees a
 *
 * io->on_output is called from inside lb_active_step (and lb_active_end, for the message of a
 * command that could not start); a caller that must not run its own code there queues the
 * chunks and hands them on after the step. lb_active_abort stops the run for a failure on the
 * caller's side, which lb_active_end then returns. lb_active_end on a run that is not over stops
 * it first (and waits for its streams to end); lb_active_discard never waits. */
typedef struct lb_active lb_active;

/* A supervised process without a jail, for backends whose sandbox is another program (bwrap,
 * nsjail): argv runs with the spec's stdin, environment, working directory (required) and
 * limits (rlimits as given, cgroups where the host has them), in its own session; when it ends
 * or is stopped, every process it started is killed (its group, and every orphan of its tree,
 * which reparents to its supervisor, a child subreaper). The pending run it returns is driven
 * like any other: lb_active_begin with the stdin in io. filter: a seccomp program loaded just
 * before execve, or NULL. files, clean, probe and prestart need a jail and are refused. */
int lb_spawn(const lb_run_spec *spec, const lb_filter *filter, lb_pending **out, lb_error *err);
struct pollfd;
int lb_active_begin(lb_pending *p, const lb_run_io *io, lb_active **out, lb_error *err);
/* Fills at most max entries; *timeout_ms: when the next step is due without any I/O (-1: not
 * before I/O). */
int lb_active_fds(const lb_active *a, struct pollfd *pf, int max, int *timeout_ms);
/* Does what is ready, waiting at most wait_ms for something to be (-1: until the next step is
 * due). Returns 1 when the run is over. */
int lb_active_step(lb_active *a, int wait_ms);
void lb_active_abort(lb_active *a, const char *why);
int lb_active_end(lb_active *a, lb_result *res, lb_error *err);
void lb_active_discard(lb_active *a);
/* Prestarted runs: 1 ready, 0 not yet (after waiting up to timeout_ms), -1 dead or broken. */
int lb_run_wait_ready(lb_pending *p, int timeout_ms);
int lb_run_finish(lb_pending *p, const lb_run_io *io, lb_result *res, lb_error *err);
void lb_run_abandon(lb_pending *p);
/* Collects the processes and cgroups of finished prestarted runs, which lb_run_finish leaves to
 * go away on their own; block waits for all of them. lb_run_begin calls it without blocking. */
void lb_reap(bool block);
void lb_result_free(lb_result *res);

/* ---- file transfer (transfer.c) ----
 * Copies a regular file or a whole directory between the host and the workspace. Paths inside the
 * jail are resolved beneath /sandbox (relative paths are relative to it; an absolute path must
 * start with /sandbox/); symlinks, magic links and ".." are never followed, on either side.
 * Symlinks, devices, FIFOs and sockets inside a copied directory are skipped and listed in
 * `skipped` (newline-separated, may be NULL). copy_out writes a single file under a temporary
 * name and renames it over host_path when complete; max_bytes (0: none) bounds the copy. */
int lb_copy_in(lb_jail *j, const char *host_path, const char *jail_path, unsigned mode,
	       char *skipped, size_t skipped_len, lb_error *err);
int lb_copy_out(lb_jail *j, const char *jail_path, const char *host_path, uint64_t max_bytes,
		char *skipped, size_t skipped_len, lb_error *err);
/* Results a run left (plots, artifacts): the regular files below jail_path (beneath /sandbox or
 * the jail's /tmp) reach fn in memory, as a tar stream from the jail side checked like any
 * untrusted archive; nothing is written on the host. name is the path below jail_path ("" when
 * jail_path is a file); data is valid during the call only; fn returns non-zero to fail the
 * collection. max_bytes (0: none) bounds the total. Symlinks and other entries are skipped. */
typedef int (*lb_entry_fn)(void *ud, const char *name, const char *data, size_t len);
int lb_collect(lb_jail *j, const char *jail_path, uint64_t max_bytes, lb_entry_fn fn, void *ud,
	       lb_error *err);

/* Archives someone else made (an engine's GET .../archive, an image's layers), read as untrusted
 * like the streams above: the first entry names the archive's root (one plain name, as an engine
 * names the directory or file it was asked for), every other entry lies beneath it, names with
 * "..", "." or empty components are refused, and max_bytes (0: none) bounds the total. The
 * regular files reach fn as for lb_collect (name below the root); directories, links and
 * devices are skipped. */
int lb_tar_entries(int in_fd, uint64_t max_bytes, lb_entry_fn fn, void *ud, lb_error *err);
/* The other way: files (absolute paths, no ".", ".." or empty components) as a tar archive in
 * memory, each named by its path without the leading "/" and owned by uid:gid, for a sandbox
 * whose side unpacks it (`tar -x -C /` in a container); parents are left to the unpacker.
 * *out is malloc'd: the caller frees it. */
int lb_tar_pack(const lb_file *files, size_t n, uid_t uid, gid_t gid, char **out, size_t *len,
		lb_error *err);
/* Copies for sandboxes that unpack and pack their own side (containers): lb_tar_host makes the
 * archive of a host file or directory that lb_copy_in would send (entries "llmbox" and
 * "llmbox/...", or root's name instead of "llmbox" when root is not NULL: "." makes a build
 * context; symlinks and other entries skipped and listed in `skipped`), in memory (*out is
 * malloc'd); lb_tar_extract receives a foreign archive read from in_fd (as lb_tar_entries
 * reads one) at host_path as lb_copy_out does: a single file under a temporary name renamed
 * over host_path when complete, a directory beneath host_path; its links and special files
 * are skipped and listed in `skipped` under the names lb_copy_out gives them ("llmbox/..."). */
int lb_tar_host(const char *host_path, const char *root, char **out, size_t *len, char *skipped,
		size_t skipped_len, lb_error *err);
int lb_tar_extract(int in_fd, const char *host_path, uint64_t max_bytes, char *skipped,
		   size_t skipped_len, lb_error *err);

/* ---- HTTP for the engine drivers (http.c) ----
 * One libcurl multi handle that an event loop drives: lb_http_fds gives the sockets to watch
 * and the ms until curl's timer (-1 none); lb_http_step polls them for at most wait_ms (-1:
 * until something is due), lets curl work, and returns how many requests are still running
 * (-1 when poll fails). A request's body is kept until taken (lb_http_body, lb_http_consume),
 * so streamed responses reach the caller as they arrive. The caller owns the handle and each
 * request; a request keeps its handle alive, so they may be released in any order. */
typedef struct lb_http lb_http;
typedef struct lb_http_req lb_http_req;

typedef struct lb_http_request {
	const char *method;	    /* NULL: GET */
	const char *url;	    /* http:// or https:// (with unix_socket the host is a name) */
	const char *unix_socket;    /* connect to this socket instead of the URL's host */
	const char *const *headers; /* "Name: value" lines, NULL-terminated; may be NULL */
	const char *body;	    /* copied; NULL: no body */
	size_t body_len;
	const char *ca_file, *cert_file, *key_file; /* TLS: whom to trust, our certificate */
	/* the same as PEM in memory (a kubeconfig's *-data); copied */
	const char *ca_pem, *cert_pem, *key_pem;
	size_t ca_pem_len, cert_pem_len, key_pem_len;
	long timeout_ms, connect_timeout_ms; /* 0: none */
	uint64_t max_body; /* a longer response fails the request with EFBIG; 0: none */
	bool connect_only; /* only connect (and TLS): the request is then a raw stream */
} lb_http_request;

typedef struct lb_http_response {
	long status;
	char *headers; /* the header lines as received (malloc'd: the caller frees them) */
	size_t headers_len;
} lb_http_response;

lb_http *lb_http_new(lb_error *err);
void lb_http_free(lb_http *h);
lb_http_req *lb_http_begin(lb_http *h, const lb_http_request *rq, lb_error *err);
int lb_http_fds(lb_http *h, struct pollfd *pf, int max, int *timeout_ms);
int lb_http_step(lb_http *h, int wait_ms);
bool lb_http_done(const lb_http_req *r);
const char *lb_http_body(const lb_http_req *r, size_t *len);
void lb_http_consume(lb_http_req *r, size_t len);
/* Ends and frees the request: 0 with res filled (any HTTP status), or -1 with err naming the
 * peer and the cause (ETIMEDOUT, ECONNREFUSED, EPROTO for TLS, EFBIG for max_body). */
int lb_http_end(lb_http_req *r, lb_http_response *res, lb_error *err);
void lb_http_discard(lb_http_req *r); /* ends it unfinished */
/* A connect_only request, once done, is a raw stream over the connection (an engine's
 * "Upgrade: tcp" exec, which carries stdin): send and recv return 0 (*n bytes moved; recv's 0
 * means the peer closed), 1 when the caller should wait on lb_http_fd, -1 with err. A stream
 * ends with lb_http_discard. shutdown_write ends what the peer reads (plain connections only). */
int lb_http_fd(lb_http_req *r);
int lb_http_send(lb_http_req *r, const char *buf, size_t len, size_t *sent, lb_error *err);
int lb_http_recv(lb_http_req *r, char *buf, size_t cap, size_t *got, lb_error *err);
int lb_http_shutdown_write(lb_http_req *r, lb_error *err);

/* ---- websocket client (ws.c): the Kubernetes backend's exec and attach streams ----
 * One connection, TLS always verified (ca_pem, else the system's CAs; the host name checked),
 * driven by the caller's loop like lb_http: watch lb_ws_fds, call lb_ws_step (0: never waits).
 * Messages go out whole (binary) and arrive whole, in order, in lb_ws_take (malloc'd: the
 * caller frees them). A refused upgrade leaves the server's HTTP status in lb_ws_status. */
typedef struct lb_ws lb_ws;
enum lb_ws_state { LB_WS_CONNECTING, LB_WS_OPEN, LB_WS_CLOSED, LB_WS_FAILED };
typedef struct lb_ws_options {
	const char *host, *path; /* path with its query */
	int port;
	bool tls;
	const char *protocols; /* the subprotocols offered, comma-separated, preferred first */
	const char *headers;   /* "Name: value\n" lines for the handshake (Authorization) */
	const char *ca_pem, *cert_pem, *key_pem;
	int connect_timeout_s; /* 0: 30 s */
} lb_ws_options;
lb_ws *lb_ws_open(const lb_ws_options *o, lb_error *err);
int lb_ws_fds(lb_ws *w, struct pollfd *pf, int max, int *timeout_ms);
int lb_ws_step(lb_ws *w, int wait_ms); /* returns the state */
int lb_ws_send(lb_ws *w, const void *data, size_t len, lb_error *err);
int lb_ws_take(lb_ws *w, unsigned char **data, size_t *len); /* 1: a message, 0: none yet */
void lb_ws_close(lb_ws *w); /* a close frame once what is queued has gone */
enum lb_ws_state lb_ws_state_of(const lb_ws *w);
const char *lb_ws_error(const lb_ws *w);
const char *lb_ws_protocol(const lb_ws *w); /* the one the server chose ("" before) */
int lb_ws_status(const lb_ws *w);
int lb_ws_close_code(const lb_ws *w);
bool lb_ws_pending(const lb_ws *w); /* messages not yet written */
void lb_ws_free(lb_ws *w);

/* ---- host probes (probe.c), for `llmbox doctor` ---- */

typedef struct lb_probe {
	bool is_root;
	bool userns; /* an unprivileged-style user namespace can be created */
	char userns_error[256];
	bool seccomp;	    /* a seccomp filter loaded in a test child */
	bool mount_setattr; /* kernel >= 5.12 */
	bool openat2;	    /* kernel >= 5.6 */
	int cgroup_version; /* 0 none usable, 1, 2 */
	bool cgroup_memory; /* a memory controller we may write to */
	bool cgroup_pids;
	bool cgroup_cpu;     /* CPU quotas (limits.cpus) can be enforced */
	bool cgroup_cpuacct; /* CPU time of killed runs can be counted */
	char cgroup_note[256];
	char kernel[160];
} lb_probe;

void lb_probe_host(lb_probe *p);

/* ---- the Lua module (lua_core.c) ---- */

/* Everything is built with -fvisibility=hidden: core.so exports only what is marked LB_EXPORT,
 * so another library in the same process (an nginx worker, a daemon) can neither call the
 * jail's internals nor have its own symbols of the same names bound in their place. The CLI
 * and the fuzz targets link the objects directly and need no export. */
#define LB_EXPORT __attribute__((visibility("default")))

struct lua_State;
/* require "llmbox.core" */
LB_EXPORT int luaopen_llmbox_core(struct lua_State *L);
/* require "llmbox.http_core" (http_core.so: the HTTP client, apart so that only its users load
 * libcurl) */
LB_EXPORT int luaopen_llmbox_http_core(struct lua_State *L);
/* require "llmbox.ws_core" (ws_core.so: the websocket client, apart so that only the Kubernetes
 * backend loads libwebsockets) */
LB_EXPORT int luaopen_llmbox_ws_core(struct lua_State *L);

#endif
