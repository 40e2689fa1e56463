/* A compiled seccomp program: what the run's processes load (prctl) and what travels to the run
 * helper. Kept apart from seccomp.c, which compiles programs with libseccomp, so that the static
 * helper (run_helper.c) links no library but libc. */
#define _GNU_SOURCE
#include "internal.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>

struct lb_filter {
	struct sock_fprog prog;
};

const void *lb_filter_program(const lb_filter *f, size_t *len)
{
	*len = (size_t)f->prog.len * sizeof *f->prog.filter;
	return f->prog.filter;
}

lb_filter *lb_filter_from_program(const void *prog, size_t len, lb_error *err)
{
	size_t n = len / sizeof(struct sock_filter);
	if (n == 0 || n > BPF_MAXINSNS || len % sizeof(struct sock_filter)) {
		lb_fail(err, EINVAL, "a seccomp program of %zu bytes", len);
		return NULL;
	}
	lb_filter *f = calloc(1, sizeof *f);
	struct sock_filter *insns = malloc(len);
	if (!f || !insns) {
		free(f);
		free(insns);
		lb_fail(err, ENOMEM, "out of memory");
		return NULL;
	}
	memcpy(insns, prog, len);
	f->prog.len = (unsigned short)n;
	f->prog.filter = insns;
	return f;
}

void lb_filter_free(lb_filter *f)
{
	if (f) {
		free(f->prog.filter);
		free(f);
	}
}

int lb_filter_memfd(const lb_filter *f, lb_error *err)
{
	int fd = memfd_create("llmbox-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return lb_fail_sys(err, errno, "memfd_create");
	size_t len = (size_t)f->prog.len * sizeof(struct sock_filter);
	/* sealed: whoever reads it gets the program compiled here, nothing written after */
	if (lb_write_all(fd, f->prog.filter, len) < 0 || lseek(fd, 0, SEEK_SET) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
		int e = errno;
		close(fd);
		return lb_fail_sys(err, e, "writing the seccomp program to a memfd");
	}
	return fd;
}

int lb_filter_load(const lb_filter *f, lb_error *err)
{
	if (!f)
		return 0;
	/* no_new_privs is already set (lb_become_sandbox_user), which also lets an unprivileged
	 * process install a filter. */
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &f->prog, 0, 0) < 0)
		return lb_fail_sys(err, errno, "loading the seccomp filter");
	return 0;
}
