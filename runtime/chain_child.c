/* The jail side of a run's process chain (chain.c has the caller's side): what C1, C2 and C3 do.
 * C1 is llmbox's run helper (run_helper.c), exec'd by the caller for each run, so none of this
 * runs in a copy of the caller's memory; spawn.c's jail-less children use lb_exec_program too.
 */
#define _GNU_SOURCE
#include "run.h"

#include <dirent.h>
#include <linux/capability.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

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

/* C2 shares the run helper's command line, environment block and name, and /proc/1/cmdline is
 * readable by anyone in the pid namespace (unlike /proc/1/environ or /proc/1/mem, which the
 * non-dumpable flag protects). The helper's hold only descriptor numbers, but pid 1 shows one
 * fixed name however it was started: "llmbox-init". Needs the run's /proc mounted. */
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

	/* vfork: copying C2's address space for a child that execs at once costs more than sharing
	 * it (page tables, on some VMs ~1.5 ms for a large one). The child only makes system calls
	 * on its own stack until execve (or _exit), while C2 waits; its fds, cwd, rlimits and
	 * filter are its own (no CLONE_FILES, CLONE_FS or CLONE_THREAD). */
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
 * malloc beside C2 (the C library, which knows nothing of C2, takes no lock). If that fails, the
 * run does not go on with a more privileged C1: C2 is killed and reaped, and the setup fails. */
static void keep_only_kill(pid_t init, int rep)
{
	if (lb_caps_keep_only(CAP_KILL) == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0)
		return;
	int code = errno;
	kill(init, SIGKILL);
	while (waitpid(init, NULL, 0) < 0 && errno == EINTR)
		;
	lb_child_fail(rep, code, "dropping the capabilities of the run's first child");
}

void lb_child_begin(int rep, pid_t parent, const lb_cgroup *cg)
{
	lb_error e;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	lb_reset_signals();
	if (lb_cgroup_join(cg, &e) < 0)
		lb_child_relay(rep, &e);
}

void lb_chain_first_child(const lb_jail *j, const lb_run_spec *spec, const lb_filter *filter,
			  struct child_fds *fds, const lb_cgroup *cg, pid_t parent)
{
	int rep = fds->report_w;
	lb_error e;
	lb_child_begin(rep, parent, cg);
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
	/* C2 shares C1's memory (CLONE_VM) instead of copying it: the helper's few pages and the
	 * run's description, nothing of the caller's. From here on C1 only makes system calls
	 * (capset, prctl, read, kill, waitpid, _exit; never malloc), so the two share no data but
	 * errno. C2 runs on a stack of its own, its arguments in storage C1 does not reuse; its
	 * files, credentials and filter are its own. */
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
