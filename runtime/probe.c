/* Host probes for `llmbox doctor`: each one tries the real thing in a throwaway child. (The
 * doctor then opens a real jail on top of these; see lua/llmbox/doctor.lua.) */
#define _GNU_SOURCE
#include "internal.h"

#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>

static bool syscall_exists(long nr)
{
	/* Invalid arguments: an existing syscall fails with EBADF/EINVAL/EFAULT, a missing one with
	 * ENOSYS. */
	return syscall(nr, -1, NULL, 0, NULL, 0) == 0 || errno != ENOSYS;
}

/* Runs `try` in a forked child, so whatever it changes (namespaces, a seccomp filter) dies with
 * the child. Returns 0 when it worked, its errno when it failed, -1 when the probe itself could
 * not run. */
static int in_child(int (*try)(void))
{
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		int e = try() < 0 ? errno : 0;
		(void)!write(pipefd[1], &e, sizeof e);
		_exit(0);
	}
	close(pipefd[1]);
	int e = -1;
	if (pid < 0 || read(pipefd[0], &e, sizeof e) != (ssize_t)sizeof e)
		e = -1;
	close(pipefd[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return e;
}

static int try_userns(void)
{
	return unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
		       CLONE_NEWUTS);
}

/* Loads an allow-everything filter, as the jail loads its own (no_new_privs first). */
static int try_seccomp(void)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx) {
		errno = ENOMEM;
		return -1;
	}
	int rc = seccomp_load(ctx);
	seccomp_release(ctx);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return 0;
}

void lb_probe_host(lb_probe *p)
{
	memset(p, 0, sizeof *p);
	p->is_root = geteuid() == 0;
	struct utsname u;
	if (uname(&u) == 0)
		snprintf(p->kernel, sizeof p->kernel, "%.64s %.64s", u.sysname, u.release);

	int e = in_child(try_userns);
	p->userns = e == 0;
	if (!p->userns)
		snprintf(p->userns_error, sizeof p->userns_error, "%s",
			 e > 0 ? strerror(e) : "probe failed");
	p->seccomp = in_child(try_seccomp) == 0;
	p->mount_setattr = syscall_exists(SYS_mount_setattr);
	p->openat2 = syscall_exists(SYS_openat2);
	lb_cgroup_support cg;
	lb_cgroup_detect(&cg);
	p->cgroup_version = cg.version;
	p->cgroup_memory = cg.memory;
	p->cgroup_pids = cg.pids;
	p->cgroup_cpu = cg.cpu;
	p->cgroup_cpuacct = cg.cpuacct;
	snprintf(p->cgroup_note, sizeof p->cgroup_note, "%s", cg.note);
}
