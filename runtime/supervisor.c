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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

/* Marks a report record as "execve of the program failed": the program's failure, not ours. */
#define EXEC_MARK '\x01'

struct status_msg {
	int kind; /* 1: C2's host pid; 2: the program's wait status */
	pid_t pid;
	int wstatus;
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
};

/* C3: becomes the program. Never returns. */
static void exec_program(const lb_run_spec *spec, const lb_filter *filter, struct child_fds *fds,
			 bool memory_in_cgroup)
{
	lb_error e;
	int rep = fds->report_w;
	setsid();
	int in = fds->in_r >= 0 ? fds->in_r : open("/dev/null", O_RDONLY);
	if (in < 0 || dup2(in, 0) < 0 || dup2(fds->out_w, 1) < 0 || dup2(fds->err_w, 2) < 0)
		lb_child_fail(rep, errno, "setting up stdio");
	int keep[] = {rep};
	lb_close_fds_except(keep, 1);
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
	/* Not dumpable: the program (same uid) cannot ptrace or read /proc/1 of its init. */
	prctl(PR_SET_DUMPABLE, 0);
	write_files(spec, rep);

	pid_t prog = fork();
	if (prog < 0)
		lb_child_fail(rep, errno, "fork of the program");
	if (prog == 0)
		exec_program(spec, filter, fds, memory_in_cgroup);
	close(fds->out_w);
	close(fds->err_w);
	if (fds->in_r >= 0)
		close(fds->in_r);
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

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0) {
			close(p[i]);
			p[i] = -1;
		}
}

int lb_run(lb_jail *j, const lb_run_spec *spec, const lb_filter *filter, lb_result *res,
	   lb_error *err)
{
	int out[2] = {-1, -1}, errp[2] = {-1, -1}, in[2] = {-1, -1}, status[2] = {-1, -1},
	    report[2] = {-1, -1};
	lb_cgroup cg = {.procs_fd = {-1, -1}};
	struct buf bufs[3] = {{0}};
	int rc = -1;
	pid_t c1 = -1, c2 = -1;
	memset(res, 0, sizeof *res);
	if (!spec->argv || !spec->argv[0])
		return lb_fail(err, EINVAL, "empty command");

	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
	    pipe2(status, O_CLOEXEC) < 0 || pipe2(report, O_CLOEXEC) < 0 ||
	    (spec->stdin_data && pipe2(in, O_CLOEXEC) < 0)) {
		lb_fail_sys(err, errno, "pipe2");
		goto out;
	}
	if (lb_cgroup_create(&cg, &spec->limits, err) < 0)
		goto out;

	double start = now_ms();
	pid_t parent = getpid();
	c1 = fork();
	if (c1 < 0) {
		lb_fail_sys(err, errno, "fork");
		goto out;
	}
	if (c1 == 0) {
		struct child_fds fds = {in[0], out[1], errp[1], status[1], report[1], -1};
		int keep[16] = {in[0],	   out[1],	   errp[1],	  status[1],
				report[1], cg.procs_fd[0], cg.procs_fd[1]};
		lb_close_fds_except(keep, lb_jail_keep_fds(j, keep, 7));
		enter_and_fork(j, spec, filter, &fds, &cg, parent);
	}
	close(out[1]);
	close(errp[1]);
	close(status[1]);
	close(report[1]);
	out[1] = errp[1] = status[1] = report[1] = -1;
	if (in[0] >= 0) {
		close(in[0]);
		in[0] = -1;
		fcntl(in[1], F_SETFL, O_NONBLOCK);
	}

	double deadline = spec->limits.timeout > 0 ? start + spec->limits.timeout * 1e3 : 0;
	size_t stdin_off = 0, total_out = 0;
	bool killed = false, got_status = false, aborted = false;
	struct status_msg final = {0};
	int fdv[4] = {out[0], errp[0], status[0], in[1]};
	if (in[1] >= 0 && spec->stdin_len == 0) {
		close(in[1]);
		in[1] = fdv[3] = -1;
	}

#define KILL_TREE()                                                                                \
	do {                                                                                       \
		if (c2 > 0)                                                                        \
			kill(c2, SIGKILL);                                                         \
		kill(c1, SIGKILL);                                                                 \
		killed = true;                                                                     \
	} while (0)

	while (fdv[0] >= 0 || fdv[1] >= 0 || fdv[2] >= 0) {
		struct pollfd p[4];
		for (int i = 0; i < 4; i++) {
			p[i].fd = fdv[i];
			p[i].events = i == 3 ? POLLOUT : POLLIN;
			p[i].revents = 0;
		}
		int wait = -1;
		if (cg.version && spec->limits.processes)
			wait = 100; /* watch pids.events: a fork bomb ends the run */
		if (deadline && !killed) {
			double left = deadline - now_ms();
			int l = left <= 0 ? 0 : (int)left + 1;
			wait = wait < 0 || l < wait ? l : wait;
		}
		int n = poll(p, 4, wait);
		if (n < 0 && errno != EINTR) {
			lb_fail_sys(err, errno, "poll");
			KILL_TREE();
			aborted = true;
			break;
		}
		for (int i = 0; i < 2 && n > 0; i++) {
			if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			char chunk[65536];
			ssize_t r = read(fdv[i], chunk, sizeof chunk);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				close(fdv[i]);
				fdv[i] = -1;
				continue;
			}
			size_t keep = (size_t)r;
			if (spec->limits.output && total_out + keep > spec->limits.output) {
				keep = spec->limits.output - total_out;
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
			if (spec->on_output && !aborted &&
			    spec->on_output(spec->ud, i == 0 ? LB_STDOUT : LB_STDERR, chunk,
					    keep)) {
				lb_fail(err, ECANCELED, "the output callback failed");
				KILL_TREE();
				aborted = true;
			}
		}
		if (fdv[2] >= 0 && (p[2].revents & (POLLIN | POLLHUP | POLLERR))) {
			struct status_msg m;
			ssize_t r = lb_read_full(fdv[2], &m, sizeof m);
			if (r == (ssize_t)sizeof m && m.kind == 1) {
				c2 = m.pid;
				if (killed)
					kill(c2, SIGKILL);
			} else if (r == (ssize_t)sizeof m && m.kind == 2) {
				final = m;
				got_status = true;
			} else {
				close(fdv[2]);
				fdv[2] = -1;
			}
		}
		if (fdv[3] >= 0 && (p[3].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t w = lb_write_nosigpipe(fdv[3], spec->stdin_data + stdin_off,
						       spec->stdin_len - stdin_off);
			if (w > 0)
				stdin_off += (size_t)w;
			if ((w < 0 && errno != EAGAIN && errno != EINTR) ||
			    stdin_off >= spec->stdin_len) {
				close(fdv[3]);
				in[1] = fdv[3] = -1;
			}
		}
		if (!killed && deadline && now_ms() >= deadline) {
			KILL_TREE();
			res->limit = LB_LIMIT_TIMEOUT;
		}
		if (!killed && cg.version && spec->limits.processes) {
			bool oom, pids_max;
			uint64_t peak;
			lb_cgroup_read(&cg, &oom, &pids_max, &peak);
			if (pids_max) {
				KILL_TREE();
				res->limit = LB_LIMIT_PROCESSES;
			}
		}
	}
	for (int i = 0; i < 4; i++)
		if (fdv[i] >= 0)
			close(fdv[i]);
	out[0] = errp[0] = status[0] = in[1] = -1;
	while (waitpid(c1, NULL, 0) < 0 && errno == EINTR)
		;
	c1 = -1;
	res->duration_ms = now_ms() - start;

	lb_error rep;
	bool setup_failed = lb_read_report(report[0], &rep);
	if (aborted)
		goto out;
	if (setup_failed && rep.msg[0] == EXEC_MARK) {
		/* The command could not be started: the program's failure, told like a shell. */
		res->exit_code = rep.code == ENOENT ? 127 : 126;
		buf_append(&bufs[1], "llmbox: ", 8);
		buf_append(&bufs[1], rep.msg + 1, strlen(rep.msg + 1));
		buf_append(&bufs[1], "\n", 1);
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
	} else {
		res->signal = SIGKILL;
		res->exit_code = 128 + SIGKILL;
	}

	bool oom = false, pids_max = false;
	uint64_t peak = 0;
	lb_cgroup_read(&cg, &oom, &pids_max, &peak);
	if (peak)
		res->max_rss = peak;
	if (res->limit == LB_LIMIT_NONE) {
		if (oom)
			res->limit = LB_LIMIT_MEMORY;
		else if (res->signal == SIGXCPU ||
			 (res->signal == SIGKILL && spec->limits.cpu > 0 &&
			  res->cpu_ms >= spec->limits.cpu * 1e3 - 50))
			res->limit = LB_LIMIT_CPU;
		else if (res->signal == SIGXFSZ ||
			 (spec->limits.file_size && res->exit_code == 128 + SIGXFSZ))
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
	if (c1 > 0) {
		kill(c1, SIGKILL);
		while (waitpid(c1, NULL, 0) < 0 && errno == EINTR)
			;
	}
	close_pair(out);
	close_pair(errp);
	close_pair(in);
	close_pair(status);
	close_pair(report);
	lb_cgroup_destroy(&cg);
	free(bufs[0].data);
	free(bufs[1].data);
	return rc;
}

void lb_result_free(lb_result *res)
{
	free(res->out);
	free(res->err);
	res->out = res->err = NULL;
}
