/* Host probes for `llmbox doctor`: each one tries the real thing in a throwaway child. */
#define _GNU_SOURCE
#include "internal.h"

#include <fcntl.h>
#include <sched.h>
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

void lb_probe_host(lb_probe *p)
{
	memset(p, 0, sizeof *p);
	p->is_root = geteuid() == 0;
	struct utsname u;
	if (uname(&u) == 0)
		snprintf(p->kernel, sizeof p->kernel, "%.64s %.64s", u.sysname, u.release);

	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) == 0) {
		pid_t pid = fork();
		if (pid == 0) {
			int e = 0;
			if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
				    CLONE_NEWIPC | CLONE_NEWUTS) < 0)
				e = errno;
			(void)!write(pipefd[1], &e, sizeof e);
			_exit(0);
		}
		close(pipefd[1]);
		int e = -1;
		if (pid > 0 && read(pipefd[0], &e, sizeof e) == (ssize_t)sizeof e && e == 0)
			p->userns = true;
		else
			snprintf(p->userns_error, sizeof p->userns_error, "%s",
				 e > 0 ? strerror(e) : "probe failed");
		close(pipefd[0]);
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}
	p->seccomp = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
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
