/* The supervisor: one run inside a jail, from fork to result.
 *
 * Process chain (all forked, the caller is never changed):
 *   caller ── C1: joins the run's cgroups and the jail's namespaces, unshares new pid, ipc and
 *   │             mount namespaces for this run, forks C2, reports C2's host pid, waits.
 *   │        └─ C2: pid 1 of the run's pid namespace. Mounts this run's /proc, becomes the
 *   │                sandbox user with no capabilities, writes the run's files, forks C3, reaps.
 *   │                When C3 ends, C2 reports C3's status and exits, and the kernel kills
 *   │                everything left in the pid namespace: nothing a run started survives it.
 *   │             └─ C3: the program. setsid, stdio pipes, rlimits, seccomp, execve.
 *   └─ the caller polls stdout/stderr (streamed to on_output), feeds stdin, enforces the wall
 *      clock and the output cap, and kills the tree (SIGKILL to C2 = the whole pid namespace).
 *
 * Two error channels are kept apart (the isolate way): a CLOEXEC report pipe carries "the sandbox
 * broke" records from C1/C2/C3 setup, and the status pipe carries the program's own result.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

/* Marks a report record as "execve of the program failed": the program's failure, not ours. */
#define EXEC_MARK '\x01'

struct status_msg {
	int kind; /* 1: C2's host pid; 2: the program's wait status */
	pid_t pid;
	int wstatus;
	int probe; /* kind 2: spec->probe is a directory with entries */
	struct rusage ru;
};

const char *lb_limit_name(enum lb_limit l)
{
	static const char *const names[] = {NULL,	 "timeout", "cpu",	"memory",
					    "processes", "output",  "file_size"};
	return (unsigned)l < sizeof names / sizeof names[0] ? names[l] : NULL;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void reset_signals(void)
{
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
}

/* execvpe() searches the caller's PATH, not the program's: search the program's own. */
static const char *resolve_command(const char *cmd, const char *const *envp, char *buf, size_t len)
{
	if (strchr(cmd, '/'))
		return cmd;
	if (!*cmd)
		return NULL;
	const char *path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *const *e = envp; e && *e; e++)
		if (strncmp(*e, "PATH=", 5) == 0)
			path = *e + 5;
	while (*path) {
		const char *end = strchrnul(path, ':');
		int n = snprintf(buf, len, "%.*s/%s", (int)(end - path), path, cmd);
		struct stat st;
		/* a truncated name would run another program; a directory is not a command */
		if (end > path && n > 0 && (size_t)n < len && stat(buf, &st) == 0 &&
		    S_ISREG(st.st_mode) && access(buf, X_OK) == 0)
			return buf;
		path = *end ? end + 1 : end;
	}
	return NULL;
}

struct child_fds {
	int in_r, out_w, err_w, status_w, report_w, lifeline_r;
	int ctl; /* prestarted runs: the program's end of the control socket (fd 3), else -1 */
};

/* C3: becomes the program. Never returns. */
static void exec_program(const lb_run_spec *spec, const lb_filter *filter, struct child_fds *fds,
			 bool memory_in_cgroup)
{
	lb_error e;
	/* Out of the way of fds 0 to 3, which the dup2 calls below overwrite. */
	int rep = fcntl(fds->report_w, F_DUPFD_CLOEXEC, 10);
	int ctl = fds->ctl >= 0 ? fcntl(fds->ctl, F_DUPFD_CLOEXEC, 10) : -1;
	if (rep < 0 || (fds->ctl >= 0 && ctl < 0))
		lb_child_fail(fds->report_w, errno, "moving descriptors");
	setsid();
	int in = fds->in_r >= 0 ? fds->in_r : open("/dev/null", O_RDONLY);
	if (in < 0 || dup2(in, 0) < 0 || dup2(fds->out_w, 1) < 0 || dup2(fds->err_w, 2) < 0 ||
	    (ctl >= 0 && dup2(ctl, 3) < 0))
		lb_child_fail(rep, errno, "setting up stdio");
	int keep[] = {rep, ctl >= 0 ? 3 : rep};
	lb_close_fds_except(keep, 2);
	const char *cwd = spec->cwd ? spec->cwd : "/sandbox";
	if (chdir(cwd) < 0)
		lb_child_fail(rep, errno, "working directory %s", cwd);
	umask(022);
	if (lb_apply_rlimits(&spec->limits, memory_in_cgroup, &e) < 0)
		lb_child_relay(rep, &e);
	char buf[4096];
	const char *prog = resolve_command(spec->argv[0], spec->envp, buf, sizeof buf);
	if (!prog)
		lb_child_fail(rep, ENOENT, "%c%s: command not found", EXEC_MARK, spec->argv[0]);
	/* Last step before execve, so the filter constrains the program and nothing of ours. */
	if (lb_filter_load(filter, &e) < 0)
		lb_child_relay(rep, &e);
	execve(prog, (char *const *)spec->argv, (char *const *)spec->envp);
	lb_child_fail(rep, errno, "%ccannot execute %s", EXEC_MARK, prog);
}

static void write_files(const lb_run_spec *spec, int rep)
{
	if (!spec->n_files && !spec->n_clean)
		return;
	_cleanup_fd_ int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		lb_child_fail(rep, errno, "open /");
	for (size_t i = 0; i < spec->n_clean; i++) {
		const char *c = spec->clean[i];
		while (*c == '/')
			c++;
		char parent[4096];
		snprintf(parent, sizeof parent, "%s", c);
		char *slash = strrchr(parent, '/');
		if (!slash || strstr(c, ".."))
			continue; /* only trees below a top-level directory, never ".." */
		*slash = '\0';
		_cleanup_fd_ int pfd = lb_open_beneath(root, parent, O_RDONLY | O_DIRECTORY, 0);
		if (pfd >= 0)
			lb_remove_tree_at(pfd, slash + 1);
	}
	for (size_t i = 0; i < spec->n_files; i++) {
		const lb_file *f = &spec->files[i];
		if (lb_mkdirs_beneath(root, f->path, 0755) < 0)
			lb_child_fail(rep, errno, "creating the directories of %s", f->path);
		_cleanup_fd_ int fd =
			lb_open_beneath(root, f->path, O_WRONLY | O_CREAT | O_TRUNC, f->mode);
		if (fd < 0 || lb_write_all(fd, f->data, f->len) < 0)
			lb_child_fail(rep, errno, "writing %s", f->path);
	}
}

/* C2 is a fork of the caller without an exec, so its command line, environment block and name
 * are still the caller's, and /proc/1/cmdline is readable by anyone in the pid namespace (unlike
 * /proc/1/environ or /proc/1/mem, which the non-dumpable flag protects). Blank them: a caller
 * started with --api-key=... must not tell the sandbox. Needs the run's /proc mounted. */
static void scrub_identity(int rep)
{
	prctl(PR_SET_NAME, "llmbox-init");
	char buf[4096];
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? lb_read_full(fd, buf, sizeof buf - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		lb_child_fail(rep, errno, "reading /proc/self/stat");
	buf[n] = '\0';
	/* Fields after the command name (which may hold spaces), counted from field 3. */
	char *p = strrchr(buf, ')');
	unsigned long v[52] = {0};
	int field = 2;
	for (char *save = NULL, *tok = p ? strtok_r(p + 1, " ", &save) : NULL; tok && field < 51;
	     tok = strtok_r(NULL, " ", &save))
		v[++field] = strtoul(tok, NULL, 10);
	/* arg_start, arg_end, env_start, env_end are fields 48 to 51 (proc(5)). */
	if (field < 51 || v[49] < v[48] || v[51] < v[50])
		lb_child_fail(rep, EINVAL, "unexpected /proc/self/stat layout");
	memset((void *)v[48], 0, v[49] - v[48]);
	memset((void *)v[50], 0, v[51] - v[50]);
	static const char name[] = "llmbox-init";
	if (v[49] - v[48] > sizeof name)
		memcpy((void *)v[48], name, sizeof name);
}

/* C2: pid 1 of the run's pid namespace. Never returns. */
static void run_init(const lb_run_spec *spec, const lb_filter *filter, struct child_fds *fds,
		     bool memory_in_cgroup)
{
	int rep = fds->report_w;
	lb_error e;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* If C1 died before PDEATHSIG was armed, its end of the lifeline is closed: give up. */
	struct pollfd lp = {.fd = fds->lifeline_r, .events = POLLIN};
	if (poll(&lp, 1, 0) != 0)
		_exit(127);
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		lb_child_fail(rep, errno, "mounting the run's /proc");
	scrub_identity(rep);
	if (lb_become_sandbox_user(&e) < 0)
		lb_child_relay(rep, &e);
	/* Changing ids clears the parent-death signal: arm it again, then check that C1 did not die
	 * in between. Without this a run outlives a caller killed with SIGKILL. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (poll(&lp, 1, 0) != 0)
		_exit(127);
	/* Not dumpable: the program (same uid) cannot ptrace or read /proc/1 of its init. */
	prctl(PR_SET_DUMPABLE, 0);
	write_files(spec, rep);

	/* vfork: C2 is a copy of the caller's whole address space, and copying it once more costs
	 * ~1.5 ms on some VMs. The child only makes system calls on its own stack until execve (or
	 * _exit), while C2 waits; its fds, cwd, rlimits and filter are its own (no CLONE_FILES,
	 * CLONE_FS or CLONE_THREAD). */
	pid_t prog = vfork();
	if (prog < 0)
		lb_child_fail(rep, errno, "fork of the program");
	if (prog == 0)
		exec_program(spec, filter, fds, memory_in_cgroup);
	close(fds->out_w);
	close(fds->err_w);
	if (fds->in_r >= 0)
		close(fds->in_r);
	if (fds->ctl >= 0)
		close(fds->ctl); /* the program's end only: its death must read as EOF */
	close(rep);
	struct status_msg msg = {.kind = 2};
	for (;;) {
		int st;
		struct rusage ru;
		pid_t p = wait4(-1, &st, 0, &ru);
		if (p < 0 && errno == EINTR)
			continue;
		if (p < 0)
			break;
		if (p == prog) {
			msg.wstatus = st;
			msg.ru = ru;
			break;
		}
	}
	if (spec->probe) {
		DIR *d = opendir(spec->probe);
		for (struct dirent *de; d && !msg.probe && (de = readdir(d));)
			msg.probe = strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
		if (d)
			closedir(d);
	}
	(void)lb_write_all(fds->status_w, &msg, sizeof msg);
	_exit(0);
}

/* C1. Never returns. */
static void enter_and_fork(lb_jail *j, const lb_run_spec *spec, const lb_filter *filter,
			   struct child_fds *fds, lb_cgroup *cg, pid_t parent)
{
	int rep = fds->report_w;
	lb_error e;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	reset_signals();
	for (int i = 0; i < 2; i++)
		if (cg->procs_fd[i] >= 0 && lb_write_all(cg->procs_fd[i], "0", 1) < 0)
			lb_child_fail(rep, errno, "joining the run's cgroup");
	if (lb_jail_enter_net(j, !spec->host_network, &e) < 0)
		lb_child_relay(rep, &e);
	/* Joining a user namespace may clear the parent-death signal (new credentials). */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	if (unshare(CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWNS) < 0)
		lb_child_fail(rep, errno, "creating the run's namespaces");
	int lifeline[2];
	if (pipe2(lifeline, O_CLOEXEC) < 0)
		lb_child_fail(rep, errno, "pipe2");
	fds->lifeline_r = lifeline[0];
	pid_t init = fork();
	if (init < 0)
		lb_child_fail(rep, errno, "fork into the run's pid namespace");
	if (init == 0) {
		close(lifeline[1]);
		run_init(spec, filter, fds, cg->mem_dir[0] != '\0');
	}
	struct status_msg msg = {.kind = 1, .pid = init};
	(void)lb_write_all(fds->status_w, &msg, sizeof msg);
	close(fds->status_w);
	close(fds->out_w);
	close(fds->err_w);
	if (fds->in_r >= 0)
		close(fds->in_r);
	if (fds->ctl >= 0)
		close(fds->ctl);
	close(rep);
	while (waitpid(init, NULL, 0) < 0 && errno == EINTR)
		;
	_exit(0);
}

struct buf {
	char *data;
	size_t len, cap;
};

static int buf_append(struct buf *b, const char *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *d = realloc(b->data, cap);
		if (!d)
			return -1;
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

/* Streamed output reaches on_output in whole lines where it can. Programs often write a line in
 * pieces (python -u writes the text, then "\n"), and a caller that copies each chunk to a shared
 * pipe (parallel `llmbox run | ...`) would interleave half lines. So a chunk is handed on up to
 * its last newline, and the partial line after it waits for its end at most LINE_WAIT_MS (a
 * prompt without a newline is not held back noticeably) or until LINE_HOLD_MAX bytes. Only the
 * chunking changes: the stored output, the limits and the order of bytes are the same. */
#define LINE_WAIT_MS  20
#define LINE_HOLD_MAX 65536

struct stream_state {
	size_t sent;	   /* bytes of the stream's buffer handed to on_output */
	double held_since; /* when the oldest byte not yet handed on arrived; 0: none */
};

/* Hands on what `b` holds beyond st->sent: up to its last newline, or all of it when `all`.
 * Returns nonzero when the callback failed. */
static int stream_out(const lb_run_io *io, enum lb_stream which, const struct buf *b,
		      struct stream_state *st, bool all)
{
	size_t end = b->len;
	if (!all && b->len - st->sent < LINE_HOLD_MAX) {
		const char *nl = memrchr(b->data + st->sent, '\n', b->len - st->sent);
		end = nl ? (size_t)(nl - b->data) + 1 : st->sent;
	}
	size_t from = st->sent;
	if (end > from) {
		st->sent = end;
		st->held_since = 0;
	}
	if (st->sent < b->len && !st->held_since)
		st->held_since = now_ms();
	return end > from ? io->on_output(io->ud, which, b->data + from, end - from) : 0;
}

/* A started run: its children, the host's ends of their pipes, its cgroup. Owned by the caller
 * of lb_run_begin until lb_run_finish or lb_run_abandon frees it. */
struct lb_pending {
	bool prestarted;
	pid_t c1;
	int out, err, status, report, in, ctl; /* host ends, -1 when closed */
	bool ready;
	lb_cgroup cg;
	lb_limits limits;
	double start;
};

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

/* Prestarted runs whose result is in but whose processes are still going away: tearing down a
 * run's pid and mount namespaces takes a millisecond or two, which a pool's caller need not wait
 * for. lb_run_begin and lb_reap collect them. If the process exits first, init reaps the zombies
 * and the next run's sweep removes the cgroup directories. */
#define MAX_GRAVES 256
static struct grave {
	pid_t c1;
	lb_cgroup cg;
} graves[MAX_GRAVES];
static size_t n_graves;
static pthread_mutex_t graves_lock = PTHREAD_MUTEX_INITIALIZER;

void lb_reap(bool block)
{
	pthread_mutex_lock(&graves_lock);
	size_t keep = 0;
	for (size_t i = 0; i < n_graves; i++) {
		pid_t r;
		while ((r = waitpid(graves[i].c1, NULL, block ? 0 : WNOHANG)) < 0 && errno == EINTR)
			;
		if (r == 0)
			graves[keep++] = graves[i];
		else
			lb_cgroup_destroy(&graves[i].cg);
	}
	n_graves = keep;
	pthread_mutex_unlock(&graves_lock);
}

static bool bury(lb_pending *p)
{
	pthread_mutex_lock(&graves_lock);
	bool room = n_graves < MAX_GRAVES;
	if (room) {
		for (int i = 0; i < 2; i++)
			if (p->cg.procs_fd[i] >= 0) {
				close(p->cg.procs_fd[i]);
				p->cg.procs_fd[i] = -1;
			}
		graves[n_graves++] = (struct grave){.c1 = p->c1, .cg = p->cg};
		p->c1 = -1;
		p->cg.mem_dir[0] = p->cg.pids_dir[0] = '\0';
	}
	pthread_mutex_unlock(&graves_lock);
	return room;
}

void lb_run_abandon(lb_pending *p)
{
	if (!p)
		return;
	if (p->c1 > 0) {
		/* C1 dies; C2 (pid 1 of the run) has PDEATHSIG, and its death empties the pid
		 * namespace. */
		kill(p->c1, SIGKILL);
		while (waitpid(p->c1, NULL, 0) < 0 && errno == EINTR)
			;
	}
	int *fds[] = {&p->out, &p->err, &p->status, &p->report, &p->in, &p->ctl};
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		close_fd(fds[i]);
	lb_cgroup_destroy(&p->cg);
	free(p);
}

int lb_run_begin(lb_jail *j, const lb_run_spec *spec, const lb_filter *filter, lb_pending **out,
		 lb_error *err)
{
	int o[2] = {-1, -1}, e[2] = {-1, -1}, in[2] = {-1, -1}, st[2] = {-1, -1}, rp[2] = {-1, -1},
	    ctl[2] = {-1, -1};
	*out = NULL;
	if (!spec->argv || !spec->argv[0])
		return lb_fail(err, EINVAL, "empty command");
	lb_pending *p = calloc(1, sizeof *p);
	if (!p)
		return lb_fail(err, ENOMEM, "out of memory");
	lb_reap(false);
	p->c1 = -1;
	p->prestarted = spec->prestart;
	p->out = p->err = p->status = p->report = p->in = p->ctl = -1;
	p->cg.procs_fd[0] = p->cg.procs_fd[1] = -1;
	p->limits = spec->limits;
	/* A prestarted program gets its stdin later: the pipe must exist now. */
	bool want_in = spec->stdin_data || spec->prestart;
	if (pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0 || pipe2(st, O_CLOEXEC) < 0 ||
	    pipe2(rp, O_CLOEXEC) < 0 || (want_in && pipe2(in, O_CLOEXEC) < 0) ||
	    (spec->prestart && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0)) {
		lb_fail_sys(err, errno, "pipe2");
		goto fail;
	}
	if (lb_cgroup_create(&p->cg, &spec->limits, err) < 0)
		goto fail;
	p->start = now_ms();
	pid_t parent = getpid();
	p->c1 = fork();
	if (p->c1 < 0) {
		lb_fail_sys(err, errno, "fork");
		goto fail;
	}
	if (p->c1 == 0) {
		struct child_fds fds = {in[0], o[1], e[1], st[1], rp[1], -1, ctl[1]};
		int keep[16] = {
			in[0], o[1], e[1], st[1], rp[1], p->cg.procs_fd[0], p->cg.procs_fd[1],
			ctl[1]};
		lb_close_fds_except(keep, lb_jail_keep_fds(j, keep, 8));
		enter_and_fork(j, spec, filter, &fds, &p->cg, parent);
	}
	p->out = o[0];
	p->err = e[0];
	p->status = st[0];
	p->report = rp[0];
	p->in = in[1];
	p->ctl = ctl[0];
	int *child_ends[] = {&o[1], &e[1], &st[1], &rp[1], &in[0], &ctl[1]};
	for (size_t i = 0; i < sizeof child_ends / sizeof child_ends[0]; i++)
		close_fd(child_ends[i]);
	if (p->in >= 0)
		fcntl(p->in, F_SETFL, O_NONBLOCK);
	*out = p;
	return 0;
fail:;
	int *all[] = {&o[0],  &o[1],  &e[0],  &e[1],  &in[0],  &in[1],
		      &st[0], &st[1], &rp[0], &rp[1], &ctl[0], &ctl[1]};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		close_fd(all[i]);
	lb_run_abandon(p);
	return -1;
}

int lb_run_wait_ready(lb_pending *p, int timeout_ms)
{
	if (p->ctl < 0)
		return -1;
	struct pollfd pf = {.fd = p->ctl, .events = POLLIN};
	int n;
	while ((n = poll(&pf, 1, p->ready ? 0 : timeout_ms)) < 0 && errno == EINTR)
		;
	if (n == 0)
		return p->ready ? 1 : 0;
	char c;
	ssize_t r = n > 0 ? recv(p->ctl, &c, 1, MSG_DONTWAIT) : -1;
	if (r == 1 && c == 'R' && !p->ready) {
		p->ready = true;
		return 1;
	}
	return -1; /* EOF or anything unexpected: the program is gone or broken */
}

int lb_run_finish(lb_pending *p, const lb_run_io *io, lb_result *res, lb_error *err)
{
	struct buf bufs[3] = {{0}};
	int rc = -1;
	pid_t c2 = -1;
	const lb_limits *lim = &p->limits;
	memset(res, 0, sizeof *res);

	if (p->ctl >= 0) {
		/* The request, then EOF: the prestarted program reads until the end. */
		const char *req = io->request ? io->request : "";
		size_t off = 0;
		while (off < io->request_len) {
			ssize_t w = send(p->ctl, req + off, io->request_len - off, MSG_NOSIGNAL);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				lb_fail_sys(err, errno,
					    "handing the code to the prestarted program");
				lb_run_abandon(p);
				return -1;
			}
			off += (size_t)w;
		}
		/* EOF for the program; the socket stays open for its exit report (see llmbox.h) */
		shutdown(p->ctl, SHUT_WR);
		p->start = now_ms(); /* its wall clock starts with the request */
	}

	double timeout = io->timeout > 0 ? io->timeout : lim->timeout;
	uint64_t max_output = io->output ? io->output : lim->output;
	double deadline = timeout > 0 ? p->start + timeout * 1e3 : 0;
	size_t stdin_off = 0, total_out = 0;
	bool killed = false, got_status = false, aborted = false;
	double pids_checked = p->start;
	struct status_msg final = {0};
	struct stream_state streams[2] = {{0}};
	int fdv[5] = {p->out, p->err, p->status, p->in, p->ctl};
	p->out = p->err = p->status = p->in = p->ctl = -1; /* owned by fdv from here */
	char report_line[128];
	size_t report_len = 0;
	if (fdv[3] >= 0 && (!io->stdin_data || io->stdin_len == 0)) {
		close(fdv[3]);
		fdv[3] = -1;
	}

#define KILL_TREE()                                                                                \
	do {                                                                                       \
		if (c2 > 0)                                                                        \
			kill(c2, SIGKILL);                                                         \
		kill(p->c1, SIGKILL);                                                              \
		killed = true;                                                                     \
	} while (0)

	/* Done when the output has ended and the status is in: the status pipe's own EOF waits for
	 * the teardown of the run's namespaces, which the result does not need. */
	while (fdv[0] >= 0 || fdv[1] >= 0 || (fdv[2] >= 0 && !got_status)) {
		struct pollfd pf[5];
		for (int i = 0; i < 5; i++) {
			pf[i].fd = fdv[i];
			pf[i].events = i == 3 ? POLLOUT : POLLIN;
			pf[i].revents = 0;
		}
		int wait = -1;
		if (p->cg.version && lim->processes)
			wait = 100; /* watch pids.events: a fork bomb ends the run */
		if (deadline && !killed) {
			double left = deadline - now_ms();
			int l = left <= 0 ? 0 : (int)left + 1;
			wait = wait < 0 || l < wait ? l : wait;
		}
		for (int i = 0; i < 2; i++) {
			if (!streams[i].held_since)
				continue;
			double left = streams[i].held_since + LINE_WAIT_MS - now_ms();
			int l = left <= 0 ? 0 : (int)left + 1;
			wait = wait < 0 || l < wait ? l : wait;
		}
		int n = poll(pf, 5, wait);
		if (n < 0 && errno != EINTR) {
			lb_fail_sys(err, errno, "poll");
			KILL_TREE();
			aborted = true;
			break;
		}
		for (int i = 0; i < 2 && n > 0; i++) {
			if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			char chunk[65536];
			ssize_t r = read(fdv[i], chunk, sizeof chunk);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				close_fd(&fdv[i]);
				continue; /* what is held is handed on below */
			}
			size_t keep = (size_t)r;
			if (max_output && total_out + keep > max_output) {
				keep = max_output - total_out;
				if (!killed) {
					KILL_TREE();
					res->limit = LB_LIMIT_OUTPUT;
				}
				res->truncated = true;
			}
			total_out += keep;
			if (keep == 0)
				continue;
			if (buf_append(&bufs[i], chunk, keep) < 0) {
				lb_fail(err, ENOMEM, "out of memory for the run's output");
				KILL_TREE();
				aborted = true;
				continue;
			}
			if (io->on_output && !aborted &&
			    stream_out(io, i == 0 ? LB_STDOUT : LB_STDERR, &bufs[i], &streams[i],
				       false)) {
				lb_fail(err, ECANCELED, "the output callback failed");
				KILL_TREE();
				aborted = true;
			}
		}
		/* a partial line whose end did not come in time, or whose stream ended */
		for (int i = 0; i < 2 && io->on_output && !aborted; i++) {
			if (streams[i].held_since &&
			    (fdv[i] < 0 || now_ms() - streams[i].held_since >= LINE_WAIT_MS) &&
			    stream_out(io, i == 0 ? LB_STDOUT : LB_STDERR, &bufs[i], &streams[i],
				       true)) {
				lb_fail(err, ECANCELED, "the output callback failed");
				KILL_TREE();
				aborted = true;
			}
		}
		if (fdv[2] >= 0 && (pf[2].revents & (POLLIN | POLLHUP | POLLERR))) {
			struct status_msg m;
			ssize_t r = lb_read_full(fdv[2], &m, sizeof m);
			if (r == (ssize_t)sizeof m && m.kind == 1) {
				c2 = m.pid;
				if (killed)
					kill(c2, SIGKILL);
			} else if (r == (ssize_t)sizeof m && m.kind == 2) {
				final = m; /* the kernel's word wins over the program's report */
				got_status = true;
			} else {
				close_fd(&fdv[2]);
			}
		}
		if (fdv[3] >= 0 && (pf[3].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t w = lb_write_nosigpipe(fdv[3], io->stdin_data + stdin_off,
						       io->stdin_len - stdin_off);
			if (w > 0)
				stdin_off += (size_t)w;
			if ((w < 0 && errno != EAGAIN && errno != EINTR) ||
			    stdin_off >= io->stdin_len)
				close_fd(&fdv[3]);
		}
		if (fdv[4] >= 0 && (pf[4].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t r = read(fdv[4], report_line + report_len,
					 sizeof report_line - 1 - report_len);
			if (r > 0)
				report_len += (size_t)r;
			report_line[report_len] = '\0';
			int code, probe;
			unsigned long long ut, st, rss;
			if (!got_status && !killed && strchr(report_line, '\n') &&
			    sscanf(report_line, "exit %d %llu %llu %llu %d", &code, &ut, &st, &rss,
				   &probe) == 5 &&
			    code >= 0 && code <= 255) {
				/* The program is done and says how; what is left of the run would
				 * die with its init anyway: end it now instead of waiting for the
				 * interpreter's teardown. */
				final.wstatus = code << 8;
				final.ru.ru_utime.tv_sec = (time_t)(ut / 1000000);
				final.ru.ru_utime.tv_usec = (suseconds_t)(ut % 1000000);
				final.ru.ru_stime.tv_sec = (time_t)(st / 1000000);
				final.ru.ru_stime.tv_usec = (suseconds_t)(st % 1000000);
				final.ru.ru_maxrss = (long)rss;
				final.probe = probe != 0;
				got_status = true;
				kill(p->c1, SIGKILL);
				if (c2 > 0)
					kill(c2, SIGKILL);
			}
			if (r <= 0 || strchr(report_line, '\n') ||
			    report_len >= sizeof report_line - 1)
				close_fd(&fdv[4]);
		}
		if (!killed && deadline && now_ms() >= deadline) {
			KILL_TREE();
			res->limit = LB_LIMIT_TIMEOUT;
		}
		/* pids.events at most every 100 ms, not on every chunk of output */
		if (!killed && p->cg.version && lim->processes && now_ms() - pids_checked >= 100) {
			pids_checked = now_ms();
			bool oom, pids_max;
			uint64_t peak;
			lb_cgroup_read(&p->cg, &oom, &pids_max, &peak);
			if (pids_max) {
				KILL_TREE();
				res->limit = LB_LIMIT_PROCESSES;
			}
		}
	}
#undef KILL_TREE
	for (int i = 0; i < 5; i++)
		close_fd(&fdv[i]);
	res->duration_ms = now_ms() - p->start;
	lb_error rep;
	bool setup_failed = lb_read_report(p->report, &rep);
	/* Read before the cgroup may go to the graveyard below. */
	bool oom = false, pids_max = false;
	uint64_t peak = 0;
	lb_cgroup_read(&p->cg, &oom, &pids_max, &peak);
	/* A prestarted run that ended normally is collected later (see bury). */
	if (!(p->prestarted && got_status && !killed && !setup_failed && bury(p))) {
		while (waitpid(p->c1, NULL, 0) < 0 && errno == EINTR)
			;
		p->c1 = -1;
	}
	if (aborted)
		goto out;
	if (setup_failed && rep.msg[0] == EXEC_MARK) {
		/* The command could not be started: the program's failure, told like a shell. */
		res->exit_code = rep.code == ENOENT ? 127 : 126;
		buf_append(&bufs[1], "llmbox: ", 8);
		buf_append(&bufs[1], rep.msg + 1, strlen(rep.msg + 1));
		buf_append(&bufs[1], "\n", 1);
		/* streamed like the program's own stderr would have been */
		if (io->on_output)
			stream_out(io, LB_STDERR, &bufs[1], &streams[1], true);
	} else if (setup_failed && !killed) {
		if (err)
			*err = rep;
		goto out;
	} else if (got_status) {
		int st = final.wstatus;
		if (WIFEXITED(st)) {
			res->exit_code = WEXITSTATUS(st);
		} else if (WIFSIGNALED(st)) {
			res->signal = WTERMSIG(st);
			res->exit_code = 128 + res->signal;
		}
		res->cpu_ms = (double) final.ru.ru_utime.tv_sec * 1e3 +
			      (double) final.ru.ru_utime.tv_usec / 1e3 +
			      (double) final.ru.ru_stime.tv_sec * 1e3 +
			      (double) final.ru.ru_stime.tv_usec / 1e3;
		res->max_rss = (uint64_t) final.ru.ru_maxrss * 1024;
		res->probe_found = final.probe != 0;
	} else {
		res->signal = SIGKILL;
		res->exit_code = 128 + SIGKILL;
	}

	if (peak)
		res->max_rss = peak;
	if (res->limit == LB_LIMIT_NONE) {
		if (oom)
			res->limit = LB_LIMIT_MEMORY;
		else if (res->signal == SIGXCPU || (res->signal == SIGKILL && lim->cpu > 0 &&
						    res->cpu_ms >= lim->cpu * 1e3 - 50))
			res->limit = LB_LIMIT_CPU;
		else if (res->signal == SIGXFSZ ||
			 (lim->file_size && res->exit_code == 128 + SIGXFSZ))
			/* 128 + SIGXFSZ: how a shell reports a child the limit killed. */
			res->limit = LB_LIMIT_FILE_SIZE;
		else if (pids_max && res->exit_code != 0)
			res->limit = LB_LIMIT_PROCESSES;
	}
	res->out = bufs[0].data ? bufs[0].data : strdup("");
	res->out_len = bufs[0].len;
	res->err = bufs[1].data ? bufs[1].data : strdup("");
	res->err_len = bufs[1].len;
	bufs[0].data = bufs[1].data = NULL;
	rc = 0;
out:
	lb_run_abandon(p); /* kills what is left (nothing after a normal end), frees the rest */
	free(bufs[0].data);
	free(bufs[1].data);
	return rc;
}

int lb_run(lb_jail *j, const lb_run_spec *spec, const lb_filter *filter, lb_result *res,
	   lb_error *err)
{
	lb_pending *p;
	memset(res, 0, sizeof *res);
	if (spec->prestart)
		return lb_fail(err, EINVAL, "lb_run: a prestarted run needs lb_run_begin");
	if (lb_run_begin(j, spec, filter, &p, err) < 0)
		return -1;
	lb_run_io io = {.stdin_data = spec->stdin_data,
			.stdin_len = spec->stdin_len,
			.on_output = spec->on_output,
			.ud = spec->ud};
	return lb_run_finish(p, &io, res, err);
}

void lb_result_free(lb_result *res)
{
	free(res->out);
	free(res->err);
	res->out = res->err = NULL;
}
