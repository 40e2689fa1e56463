/* container-exec: llmbox's helper inside docker and podman containers (placed at open in the
 * container's root-only tmpfs, see lua/llmbox/backends/engines.lua). The run's wrapper is
 * root's, with only CAP_KILL, CAP_SETUID and CAP_SETGID; this helper runs a command as the
 * sandbox user and, for the program itself, reports what the engine cannot: the peak memory
 * and CPU time of that one process tree.
 *
 * In a Kubernetes pod (lua/llmbox/backends/kubernetes.lua: a read-only configMap volume at
 * /.llmbox) everything, this helper too, is the sandbox user already: there is nothing to drop
 * but capabilities (none) and new privileges, and the spared interpreter is named in
 * /tmp/llmbox/.spare, the one place a pod has.
 *
 *   container-exec [--report FD] [--cells NONCE_FD] -- ARGV...
 *   container-exec --keep PIDS_EVENTS
 *   container-exec --sweep
 *
 * The child drops to uid/gid 1000 with no supplementary groups and no capabilities (inheritable
 * ones included), then executes ARGV. The helper stays root's, so the program cannot signal it,
 * waits for the child and writes "MAXRSS_KB UTIME_US STIME_US\n" to FD (not inherited by the
 * child). Its exit status is the child's, 128 + the signal's number when a signal ended it, as a
 * shell reports it; 126 when the drop or the exec failed (said on stderr).
 *
 * --cells: the program is an interactive one (llmbox.interactive), whose control channel is a
 * socket at fd 3 (runtime/cell.c has its words). An exec has only stdin, stdout and stderr, so
 * the helper carries the channel: what comes on its stdin goes to the socket as it is (cells,
 * interrupts); what the program answers goes out as frames on stderr,
 *   "\0llmbox-cell:NONCE SEQ LEN\n" then LEN bytes,
 * each preceded by "\0llmbox-sync:NONCE SEQ\n" on stdout, so the client knows that the output
 * the program wrote on stdout before its answer has arrived too. NONCE is read from NONCE_FD
 * (the wrapper's, which the program never sees), so the program cannot forge a frame; every
 * frame and marker is one write below PIPE_BUF, so the program's own writes never split one.
 *
 * --sweep: what a run's wrapper does once its program has ended: kills every process of the
 * sandbox user, but an interactive session's interpreter (SPARE_FILE, below).
 *
 * --keep: the container's keeper (container.KEEPER execs it in its place once the helper is
 * there). Root's, with CAP_KILL: on SIGUSR1 (a kill request the engine's init passes on) it
 * kills every process but init, itself and an interactive interpreter's tree; on SIGUSR2, or a
 * new refused fork in the pids cgroup's events file, looked at five times a second, every
 * process but init and itself. Unlike a shell's, its wait needs no process: a fork bomb that
 * fills the pids ceiling cannot stop it.
 *
 * Static, with no dependency: it runs in images llmbox knows nothing of (busybox's included). */
#define _GNU_SOURCE
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SANDBOX_ID 1000

#define USAGE "usage: container-exec [--report FD] [--cells NONCE_FD] -- ARGV...\n"

/* A pod's helper: the sandbox user already, as everything in the pod. */
static bool is_sandbox_user(void)
{
	uid_t r, e, s;
	return getresuid(&r, &e, &s) == 0 && r == SANDBOX_ID && e == SANDBOX_ID && s == SANDBOX_ID;
}

static int drop_privileges(void)
{
	/* (a pod's user may not change its groups, and need not: the pod set them) */
	if (!is_sandbox_user() &&
	    (setgroups(0, NULL) != 0 || setresgid(SANDBOX_ID, SANDBOX_ID, SANDBOX_ID) != 0 ||
	     setresuid(SANDBOX_ID, SANDBOX_ID, SANDBOX_ID) != 0))
		return -1;
	/* Leaving uid 0 clears the permitted, effective and ambient sets; inheritable ones would
	 * survive, so they go too. */
	struct __user_cap_header_struct head = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof data);
	if (syscall(SYS_capset, &head, data) != 0)
		return -1;
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

/* 1: stop the run (SIGUSR1), sparing an interactive interpreter; 2: stop everything (SIGUSR2) */
static volatile sig_atomic_t kill_requested;

static void on_kill_request(int sig)
{
	kill_requested = sig == SIGUSR2 ? 2 : kill_requested ? kill_requested : 1;
}

/* A small file's start, NUL-terminated; -1 when it cannot be read or is empty. */
static int read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* The "max N" count of the pids cgroup's events file: forks it refused; -1 when unreadable. */
static long refused_forks(const char *events)
{
	char buf[256];
	if (read_small(events, buf, sizeof buf) < 0)
		return -1;
	const char *at = strstr(buf, "max ");
	return at ? strtol(at + 4, NULL, 10) : -1;
}

/* kill(-1) reaches every process it may signal but init and itself, all at once: rounds until
 * none is left (ESRCH). A killed process still answers until it has exited, which on a busy
 * host can outlast 100 rounds back to back (CI saw a run's daemons alive after its end): a
 * millisecond between rounds, for two seconds at most. */
static void sweep_all(void)
{
	for (int i = 0; i < 2000; i++) {
		if (kill(-1, SIGKILL) != 0 && errno == ESRCH)
			break;
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	}
}

/* An interactive session's interpreter outlives the runs beside it: its helper (--cells) names
 * its parent, the interpreter's wrapper, here ("PID STARTTIME"), and sweeps after a run or a
 * stopped run spare that tree. Root's private directory: no program can write it. A pod has
 * no such place (its programs could name a tree of theirs to be spared by the sweeps within
 * their session; every session's end, and a pool's emptying, sweeps everything). */
#define SPARE_FILE (is_sandbox_user() ? "/tmp/llmbox/.spare" : "/.llmbox/spare")

/* A process's state, parent and start time (clock ticks since boot), from /proc/PID/stat. */
static int read_stat(long pid, char *state, long *ppid, unsigned long long *start)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	if (read_small(path, buf, sizeof buf) < 0)
		return -1;
	char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
	if (!p || sscanf(p + 1, " %c %ld", state, ppid) != 2)
		return -1;
	/* the state, after the name, is field 3; the start time is field 22 */
	char *q = p + 2;
	for (int field = 3; field < 22; field++) {
		if (!(q = strchr(q, ' ')))
			return -1;
		q++;
	}
	*start = strtoull(q, NULL, 10);
	return 0;
}

/* The spared tree's root, if SPARE_FILE names a live process (its start time guards against
 * a reused pid); 0 when none. */
static long spared_root(void)
{
	char buf[64], state;
	long pid, ppid;
	unsigned long long start, now;
	if (read_small(SPARE_FILE, buf, sizeof buf) < 0 ||
	    sscanf(buf, "%ld %llu", &pid, &start) != 2 ||
	    read_stat(pid, &state, &ppid, &now) != 0 || now != start)
		return 0;
	return pid;
}

static bool in_tree(long pid, long root)
{
	for (int depth = 0; depth < 256 && pid > 1; depth++) {
		if (pid == root)
			return true;
		char state;
		unsigned long long start;
		if (read_stat(pid, &state, &pid, &start) != 0)
			return false;
	}
	return false;
}

/* Whether pid is this process's parent, or its parent's, ...: a pod's run wrapper, which is
 * the sandbox user's and sweeps through this helper once its program has ended. */
static bool is_ancestor(long pid)
{
	return pid != getpid() && in_tree(getpid(), pid);
}

/* Kills every process (of uid `only`, unless it is -1) but init, itself, its ancestors and the
 * spared tree, in rounds until none is left, or 100 of them. */
static void sweep(long only)
{
	long keep = spared_root();
	if (keep == 0 && only < 0) {
		sweep_all();
		return;
	}
	long self = getpid();
	for (int round = 0; round < 100; round++) {
		DIR *d = opendir("/proc");
		if (!d)
			return;
		int killed = 0;
		struct dirent *e;
		while ((e = readdir(d))) {
			char *end, state;
			long pid = strtol(e->d_name, &end, 10), ppid;
			unsigned long long start;
			if (*end != '\0' || pid <= 1 || pid == self)
				continue;
			char path[64];
			struct stat st;
			snprintf(path, sizeof path, "/proc/%ld", pid);
			if (only >= 0 && (stat(path, &st) != 0 || (long)st.st_uid != only))
				continue;
			if (read_stat(pid, &state, &ppid, &start) != 0 || state == 'Z' ||
			    (keep && in_tree(pid, keep)) || is_ancestor(pid))
				continue;
			if (kill((pid_t)pid, SIGKILL) == 0)
				killed++;
		}
		closedir(d);
		if (!killed)
			break;
	}
}

static int keep(const char *events)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_kill_request; /* no SA_RESTART: the wait ends at once */
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) != 0 || sigaction(SIGUSR2, &sa, NULL) != 0)
		return 126;
	signal(SIGCHLD, SIG_IGN); /* what the shell it replaced left is reaped by the kernel */
	long seen = refused_forks(events);
	for (;;) {
		struct timespec tick = {0, 200 * 1000 * 1000};
		nanosleep(&tick, NULL);
		long now = refused_forks(events);
		if (kill_requested || now != seen) {
			/* a refused fork ends everything, as native's supervisor ends the run that
			 * forked: the interpreter's tree may be the fork bomb */
			bool all = kill_requested == 2 || now != seen;
			kill_requested = 0;
			if (all) {
				unlink(SPARE_FILE);
				sweep_all();
			} else {
				sweep(-1);
			}
			/* forks refused while it killed are not a new event */
			seen = refused_forks(events);
		}
	}
}

/* The frames of --cells: at most this much of the program's answer each (with its header,
 * below PIPE_BUF: one atomic write). */
#define FRAME_DATA 3072
#define NONCE_MAX  64

static volatile sig_atomic_t child_ended;

static void on_child(int sig)
{
	(void)sig;
	child_ended = 1;
}

/* One write, whole: the pipe is shared with the program, which may have made it non-blocking. */
static int write_whole(int fd, const char *buf, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, buf, n);
		if (w < 0 && errno == EAGAIN) {
			struct pollfd p = {fd, POLLOUT, 0};
			poll(&p, 1, 1000);
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The nonce the frames carry: hex, from the wrapper, on a descriptor the program never gets. */
static int read_nonce(int fd, char *nonce)
{
	ssize_t n = read(fd, nonce, NONCE_MAX);
	close(fd);
	while (n > 0 && (nonce[n - 1] == '\n' || nonce[n - 1] == '\r'))
		n--;
	if (n < 16)
		return -1;
	for (ssize_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdef", nonce[i]))
			return -1;
	nonce[n] = '\0';
	return 0;
}

/* Names the interpreter's wrapper, this helper's parent, as the tree sweeps spare (SPARE_FILE).
 * Best effort: without it, a stopped run beside the interpreter ends the interpreter too. */
static void spare_parent(void)
{
	long pid = getppid(), ppid;
	unsigned long long start;
	char state, line[64];
	if (read_stat(pid, &state, &ppid, &start) != 0)
		return;
	int n = snprintf(line, sizeof line, "%ld %llu\n", pid, start);
	int fd = open(SPARE_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return;
	if (write(fd, line, (size_t)n) != n)
		unlink(SPARE_FILE);
	close(fd);
}

/* Relays the control channel (see --cells) until the program has ended and its socket is
 * drained; a client gone (EPIPE) ends the program. */
static void relay_cells(int ctl, const char *nonce, pid_t pid)
{
	unsigned long seq = 0;
	bool in_open = true, ctl_open = true;
	sigset_t none;
	sigemptyset(&none);
	while (ctl_open) {
		struct pollfd p[2] = {{ctl, POLLIN, 0}, {in_open ? 0 : -1, POLLIN, 0}};
		int r = ppoll(p, 2, child_ended ? &(struct timespec){0, 0} : NULL, &none);
		if (r < 0 && errno != EINTR)
			break;
		if (r <= 0) {
			if (child_ended && r == 0)
				break; /* ended, and nothing more is waiting on the socket */
			continue;
		}
		char buf[FRAME_DATA + 200];
		if (p[1].revents) {
			ssize_t n = read(0, buf, sizeof buf);
			if (n > 0) {
				if (write_whole(ctl, buf, (size_t)n) != 0)
					in_open = false;
			} else if (n == 0 || errno != EINTR) {
				/* the client closed the exec's stdin: the program reads the end */
				shutdown(ctl, SHUT_WR);
				in_open = false;
			}
		}
		if (p[0].revents) {
			char data[FRAME_DATA];
			ssize_t n = read(ctl, data, sizeof data);
			if (n <= 0) {
				if (n < 0 && errno == EINTR)
					continue;
				ctl_open = false;
				break;
			}
			seq++;
			int h = snprintf(buf, sizeof buf, "%cllmbox-sync:%s %lu\n", 0, nonce, seq);
			int f = snprintf(buf + h, sizeof buf - (size_t)h,
					 "%cllmbox-cell:%s %lu %zd\n", 0, nonce, seq, n);
			memcpy(buf + h + f, data, (size_t)n);
			if (write_whole(1, buf, (size_t)h) != 0 ||
			    write_whole(2, buf + h, (size_t)(f + n)) != 0) {
				kill(pid, SIGKILL); /* nobody reads its answers any more */
				break;
			}
		}
	}
	close(ctl);
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--keep") == 0)
		return keep(argv[2]);
	if (argc == 2 && strcmp(argv[1], "--sweep") == 0) {
		sweep(SANDBOX_ID);
		return 0;
	}
	int report = -1, cells = -1, i = 1;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		bool is_report = strcmp(argv[i], "--report") == 0;
		if ((is_report || strcmp(argv[i], "--cells") == 0) && i + 1 < argc) {
			char *end;
			long fd = strtol(argv[++i], &end, 10);
			if (*end != '\0' || fd < 4 || fd > 1023) {
				fprintf(stderr,
					"container-exec: %s: expected a descriptor above 3\n",
					argv[i - 1]);
				return 126;
			}
			*(is_report ? &report : &cells) = (int)fd;
		} else {
			fprintf(stderr, "%s", USAGE);
			return 126;
		}
	}
	if (i + 1 >= argc) {
		fprintf(stderr, "%s", USAGE);
		return 126;
	}
	char **cmd = argv + i + 1;
	char nonce[NONCE_MAX + 1];
	int ctl[2] = {-1, -1};
	if (cells >= 0) {
		if (read_nonce(cells, nonce) != 0) {
			fprintf(stderr, "container-exec: --cells: no nonce on its descriptor\n");
			return 126;
		}
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) != 0) {
			fprintf(stderr, "container-exec: socketpair: %s\n", strerror(errno));
			return 126;
		}
		/* SIGCHLD is blocked but in ppoll, so an end between checks is never missed */
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_child;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGCHLD, &sa, NULL);
		sigset_t chld;
		sigemptyset(&chld);
		sigaddset(&chld, SIGCHLD);
		sigprocmask(SIG_BLOCK, &chld, NULL);
		signal(SIGPIPE, SIG_IGN);
	}
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "container-exec: fork: %s\n", strerror(errno));
		return 126;
	}
	if (pid == 0) {
		if (report >= 0)
			close(report);
		if (cells >= 0) {
			/* the control socket at fd 3, and no stdin: cells come on the socket */
			sigset_t all;
			sigemptyset(&all);
			sigprocmask(SIG_SETMASK, &all, NULL);
			signal(SIGCHLD, SIG_DFL);
			signal(SIGPIPE, SIG_DFL);
			int null = open("/dev/null", O_RDONLY);
			/* (dup2 onto itself would keep close-on-exec) */
			int moved = ctl[1] == 3 ? fcntl(3, F_SETFD, 0) : dup2(ctl[1], 3) - 3;
			if (moved != 0 || null < 0 || dup2(null, 0) != 0) {
				fprintf(stderr, "container-exec: the control socket: %s\n",
					strerror(errno));
				_exit(126);
			}
			if (null > 3)
				close(null);
		}
		if (drop_privileges() != 0) {
			fprintf(stderr, "container-exec: dropping to the sandbox user: %s\n",
				strerror(errno));
			_exit(126);
		}
		execvp(cmd[0], cmd);
		int err = errno;
		fprintf(stderr, "container-exec: %s: %s\n", cmd[0], strerror(err));
		_exit(err == ENOENT ? 127 : 126);
	}
	if (cells >= 0) {
		close(ctl[1]);
		spare_parent();
		relay_cells(ctl[0], nonce, pid);
	}
	int status;
	struct rusage ru;
	while (wait4(pid, &status, 0, &ru) < 0) {
		if (errno != EINTR) {
			fprintf(stderr, "container-exec: wait: %s\n", strerror(errno));
			return 126;
		}
	}
	if (report >= 0) {
		char line[96];
		int n = snprintf(line, sizeof line, "%ld %lld %lld\n", ru.ru_maxrss,
				 (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
				 (long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec);
		if (write(report, line, (size_t)n) != n)
			fprintf(stderr, "container-exec: writing the report: %s\n",
				strerror(errno));
	}
	if (cells >= 0)
		unlink(SPARE_FILE);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}
