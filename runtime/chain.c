/* The process chain of a run, from fork to reaping (the caller is never changed):
 *
 *   caller ── C1: joins the run's cgroups and the jail's namespaces, unshares new pid, ipc and
 *   │             mount namespaces for this run, clones C2 (sharing C1's memory), keeps only
 *   │             CAP_KILL, then waits for the caller's word to end the run (lb_run_stop): it
 *   │             kills C2, reaps it and exits.
 *   │        └─ C2: pid 1 of the run's pid namespace. Mounts this run's /proc, becomes the
 *   │                sandbox user with no capabilities, writes the run's files, forks C3, reaps.
 *   │                When C3 ends, C2 reports C3's status and exits, and the kernel kills
 *   │                everything left in the pid namespace: nothing a run started survives it.
 *   │             └─ C3: the program. setsid, stdio pipes, rlimits, seccomp, execve.
 *   └─ the caller supervises the run (supervise.c), then stops and reaps C1.
 *
 * Every process is reaped by its own parent, on every path: the caller never kills C1, because
 * C2 would then outlive it as an orphan that only the nearest subreaper (or pid 1 of the
 * caller's pid namespace, which may be llmbox itself, in a container started without --init)
 * could bury. Killing C2 empties the run's pid namespace, so one kill, by C2's own parent, ends
 * the whole run; and C1, which alone may reap C2, cannot be confused by a recycled pid.
 *
 * Two error channels are kept apart (the isolate way): a CLOEXEC report pipe carries "the sandbox
 * broke" records from C1/C2/C3 setup, and the status pipe carries the program's own result.
 */
#define _GNU_SOURCE
#include "run.h"

#include <dirent.h>
#include <linux/capability.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

double lb_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void lb_reset_signals(void)
{
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
}

/* execvpe() searches the caller's PATH, not the program's: search the program's own. */
const char *lb_resolve_command(const char *cmd, const char *const *envp, char *buf, size_t len)
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

/* C3: becomes the program. Never returns. */
void lb_exec_program(const lb_run_spec *spec, const lb_filter *filter, struct child_fds *fds,
		     const lb_cgroup *cg)
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
	if (lb_apply_rlimits(&spec->limits, cg, &e) < 0)
		lb_child_relay(rep, &e);
	char buf[4096];
	const char *prog = lb_resolve_command(spec->argv[0], spec->envp, buf, sizeof buf);
	if (!prog)
		lb_child_fail(rep, ENOENT, "%c%s: command not found", EXEC_MARK, spec->argv[0]);
	/* Last step before execve, so the filter constrains the program and nothing of ours. */
	if (lb_filter_load(filter, &e) < 0)
		lb_child_relay(rep, &e);
	execve(prog, (char *const *)spec->argv, (char *const *)spec->envp);
	lb_child_fail(rep, errno, "%ccannot execute %s", EXEC_MARK, prog);
}

/* The run's own /etc/hosts (its mount namespace is its own): written to a new file of a random
 * name on the jail's /tmp as the sandbox user (the jail's root has no uid on the host to own
 * it), bound read-only over /etc/hosts, and unlinked: the mount keeps it, and only it. */
static void run_hosts(const char *text, int rep)
{
	unsigned char rnd[8];
	char path[64];
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		lb_child_fail(rep, errno, "getrandom");
	snprintf(path, sizeof path, "/tmp/.llmbox-hosts-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0],
		 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	setfsuid(LB_SANDBOX_UID);
	setfsgid(LB_SANDBOX_GID);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
	setfsuid(0);
	setfsgid(0);
	if (fd < 0 || lb_write_all(fd, text, strlen(text)) < 0)
		lb_child_fail(rep, errno, "writing the run's hosts file");
	close(fd);
	if (mount(path, "/etc/hosts", NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, "/etc/hosts", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
		  NULL) < 0)
		lb_child_fail(rep, errno, "binding the run's /etc/hosts");
	unlink(path);
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
_Noreturn static void run_init(const lb_run_spec *spec, const lb_filter *filter,
			       struct child_fds *fds, const lb_cgroup *cg)
{
	int rep = fds->report_w;
	lb_error e;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	close(fds->stop_r);
	/* If C1 died before PDEATHSIG was armed, its end of the lifeline is closed: give up. */
	struct pollfd lp = {.fd = fds->lifeline_r, .events = POLLIN};
	if (poll(&lp, 1, 0) != 0)
		_exit(127);
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		lb_child_fail(rep, errno, "mounting the run's /proc");
	if (spec->hosts)
		run_hosts(spec->hosts, rep);
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
		lb_exec_program(spec, filter, fds, cg);
	close(fds->out_w);
	close(fds->err_w);
	if (fds->in_r >= 0)
		close(fds->in_r);
	if (fds->ctl >= 0)
		close(fds->ctl); /* the program's end only: its death must read as EOF */
	close(rep);
	struct status_msg msg = {0};
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

/* C2's stack: its frames, and C3's until execve (vfork), hold a few pages; the rest is never
 * touched. */
#define INIT_STACK (1 << 20)

struct init_args {
	const lb_run_spec *spec;
	const lb_filter *filter;
	struct child_fds *fds;
	const lb_cgroup *cg;
	int lifeline_w;
};

static int init_main(void *arg)
{
	struct init_args *a = arg;
	close(a->lifeline_w);
	run_init(a->spec, a->filter, a->fds, a->cg);
}

/* C1, once C2 runs: waits for the caller's word (a byte, or EOF if the caller is gone), then
 * ends the run. C2 may have ended on its own by then; as C2's parent, C1 alone can reap it, so
 * the pid it kills cannot have been recycled. Waiting for C2 also waits for the kernel to empty
 * the run's pid namespace (an init's exit is reported once all its namespace is gone). */
_Noreturn static void end_run_when_told(pid_t init, int stop_r)
{
	char c;
	while (read(stop_r, &c, 1) < 0 && errno == EINTR)
		;
	kill(init, SIGKILL);
	while (waitpid(init, NULL, 0) < 0 && errno == EINTR)
		;
	_exit(0);
}

/* C1 after C2 is cloned: all it has left to do is kill C2 (as the sandbox user, in the jail's
 * user namespace) and reap it, so it keeps CAP_KILL and nothing else: were C2, which shares its
 * memory, ever subverted, it would gain no more than that. A raw capset, since C1 must not call
 * malloc beside C2 (glibc, which knows nothing of C2, takes no lock). If that fails, the run
 * does not go on with a more privileged C1: C2 is killed and reaped, and the setup fails. */
static void keep_only_kill(pid_t init, int rep)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {0};
	data[CAP_TO_INDEX(CAP_KILL)].effective = data[CAP_TO_INDEX(CAP_KILL)].permitted =
		CAP_TO_MASK(CAP_KILL);
	if (syscall(SYS_capset, &hdr, data) == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0)
		return;
	int code = errno;
	kill(init, SIGKILL);
	while (waitpid(init, NULL, 0) < 0 && errno == EINTR)
		;
	lb_child_fail(rep, code, "dropping the capabilities of the run's first child");
}

/* C1. Never returns. */
static void enter_and_fork(lb_jail *j, const lb_run_spec *spec, const lb_filter *filter,
			   struct child_fds *fds, const lb_cgroup *cg, pid_t parent)
{
	int rep = fds->report_w;
	lb_error e;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	lb_reset_signals();
	if (lb_cgroup_join(cg, &e) < 0)
		lb_child_relay(rep, &e);
	if (lb_jail_enter(j, &e) < 0)
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
	/* C2 shares C1's memory (CLONE_VM) instead of copying it: C1 is a copy of the caller,
	 * whose page tables a fork would copy once more and C2's exit tear down again (the larger
	 * the caller, the slower every run). C1's memory is its own, and from here on C1 only makes
	 * system calls (capset, prctl, read, kill, waitpid, _exit; never malloc), so the two share
	 * no data but errno. C2 runs on a stack of its own, its arguments in storage C1 does not
	 * reuse (static: C1 is a private copy); its files, credentials and filter are its own. */
	static struct init_args args;
	args = (struct init_args){spec, filter, fds, cg, lifeline[1]};
	void *stack = mmap(NULL, INIT_STACK, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	/* the lowest page a guard: an overflow faults instead of writing into other memory */
	if (stack == MAP_FAILED || mprotect(stack, 4096, PROT_NONE) < 0)
		lb_child_fail(rep, errno, "a stack for the run's init");
	pid_t init = clone(init_main, (char *)stack + INIT_STACK, CLONE_VM | SIGCHLD, &args);
	if (init < 0)
		lb_child_fail(rep, errno, "fork into the run's pid namespace");
	keep_only_kill(init, rep);
	int keep[] = {fds->stop_r, lifeline[1]};
	lb_close_fds_except(keep, 2);
	end_run_when_told(init, fds->stop_r);
}

void lb_close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

void lb_run_stop(lb_pending *p)
{
	if (p->stop < 0)
		return;
	/* A byte, not just EOF: a copy of this end that another fork of the caller holds for a
	 * moment must not delay the request. C1 may be gone already (a setup failure): no SIGPIPE.
	 */
	(void)lb_write_nosigpipe(p->stop, "x", 1);
	lb_close_fd(&p->stop);
}

/* Prestarted runs whose result is in but whose processes are still going away: tearing down a
 * run's pid and mount namespaces takes a millisecond or two, which a pool's caller need not wait
 * for. lb_run_begin, lb_reap and the Lua state's end (lua_core.c) collect them. */
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
		graves[n_graves++] = (struct grave){.c1 = p->c1, .cg = p->cg};
		p->c1 = -1;
		memset(&p->cg, 0, sizeof p->cg);
	}
	pthread_mutex_unlock(&graves_lock);
	return room;
}

void lb_bury_pid(pid_t pid)
{
	pthread_mutex_lock(&graves_lock);
	bool room = n_graves < MAX_GRAVES;
	if (room)
		graves[n_graves++] = (struct grave){.c1 = pid};
	pthread_mutex_unlock(&graves_lock);
	while (!room && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

void lb_run_collect(lb_pending *p, bool defer)
{
	lb_run_stop(p);
	if (p->c1 > 0 && !(defer && bury(p))) {
		while (waitpid(p->c1, NULL, 0) < 0 && errno == EINTR)
			;
		p->c1 = -1;
	}
	lb_cgroup_destroy(&p->cg);
}

void lb_run_discard(lb_pending *p)
{
	if (!p)
		return;
	/* Stopped now; its first child is collected by lb_reap, so the caller never waits. Without
	 * room in the graveyard, it is waited for here after all (it dies at once: it was told). */
	lb_run_collect(p, true);
	int *fds[] = {&p->out, &p->err, &p->status, &p->report, &p->in, &p->ctl};
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		lb_close_fd(fds[i]);
	free(p);
}

void lb_run_abandon(lb_pending *p)
{
	if (!p)
		return;
	lb_run_collect(p, false);
	int *fds[] = {&p->out, &p->err, &p->status, &p->report, &p->in, &p->ctl};
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		lb_close_fd(fds[i]);
	free(p);
}

int lb_run_begin(lb_jail *j, const lb_run_spec *spec, const lb_filter *filter, lb_pending **out,
		 lb_error *err)
{
	int o[2] = {-1, -1}, e[2] = {-1, -1}, in[2] = {-1, -1}, st[2] = {-1, -1}, rp[2] = {-1, -1},
	    ctl[2] = {-1, -1}, stop[2] = {-1, -1};
	*out = NULL;
	if (!spec->argv || !spec->argv[0])
		return lb_fail(err, EINVAL, "empty command");
	lb_pending *p = calloc(1, sizeof *p);
	if (!p)
		return lb_fail(err, ENOMEM, "out of memory");
	lb_reap(false);
	p->c1 = -1;
	p->prestarted = spec->prestart;
	p->out = p->err = p->status = p->report = p->in = p->ctl = p->stop = -1;
	p->limits = spec->limits;
	/* A prestarted program gets its stdin later: the pipe must exist now. */
	bool want_in = spec->stdin_data || spec->prestart;
	/* A prestarted run holds its descriptors until it is used: it may not take the ones that
	 * runs need (see lb_fd_check). */
	if (spec->prestart && lb_fd_check(LB_FDS_PENDING, "prestart a run", err) < 0)
		goto fail;
	if (pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0 || pipe2(st, O_CLOEXEC) < 0 ||
	    pipe2(rp, O_CLOEXEC) < 0 || pipe2(stop, O_CLOEXEC) < 0 ||
	    (want_in && pipe2(in, O_CLOEXEC) < 0) ||
	    (spec->prestart && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0)) {
		lb_fail_sys(err, errno, "creating the run's pipes");
		goto fail;
	}
	if (lb_cgroup_create(&p->cg, &spec->limits, err) < 0)
		goto fail;
	p->start = lb_now_ms();
	pid_t parent = getpid();
	p->c1 = fork();
	if (p->c1 < 0) {
		lb_fail_sys(err, errno, "fork");
		goto fail;
	}
	if (p->c1 == 0) {
		struct child_fds fds = {in[0], o[1], e[1], st[1], rp[1], -1, stop[0], ctl[1]};
		int keep[16] = {in[0], o[1], e[1], st[1], rp[1], stop[0], ctl[1]};
		lb_close_fds_except(keep, lb_jail_keep_fds(j, keep, 7));
		enter_and_fork(j, spec, filter, &fds, &p->cg, parent);
	}
	p->out = o[0];
	p->err = e[0];
	p->status = st[0];
	p->report = rp[0];
	p->in = in[1];
	p->ctl = ctl[0];
	p->stop = stop[1];
	int *child_ends[] = {&o[1], &e[1], &st[1], &rp[1], &in[0], &ctl[1], &stop[0]};
	for (size_t i = 0; i < sizeof child_ends / sizeof child_ends[0]; i++)
		lb_close_fd(child_ends[i]);
	if (p->in >= 0)
		fcntl(p->in, F_SETFL, O_NONBLOCK);
	*out = p;
	return 0;
fail:;
	int *all[] = {&o[0],  &o[1],  &e[0],  &e[1],   &in[0],	&in[1],	  &st[0],
		      &st[1], &rp[0], &rp[1], &ctl[0], &ctl[1], &stop[0], &stop[1]};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		lb_close_fd(all[i]);
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
