/* Small helpers: error records, fd hygiene, beneath-only path resolution. */
#define _GNU_SOURCE
#include "internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

int lb_fail(lb_error *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
		err->code = code;
	}
	errno = code ? code : EINVAL;
	return -1;
}

int lb_fail_sys(lb_error *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < sizeof err->msg)
			snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", strerror(code));
		err->code = code;
	}
	errno = code ? code : EIO;
	return -1;
}

void lb_child_relay(int report_fd, const lb_error *e)
{
	if (report_fd >= 0)
		(void)lb_write_all(report_fd, e, sizeof *e);
	_exit(127);
}

void lb_child_fail(int report_fd, int code, const char *fmt, ...)
{
	lb_error e = {.code = code};
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(e.msg, sizeof e.msg, fmt, ap);
	va_end(ap);
	if (code && n >= 0 && (size_t)n < sizeof e.msg)
		snprintf(e.msg + n, sizeof e.msg - (size_t)n, ": %s", strerror(code));
	if (report_fd >= 0)
		(void)lb_write_all(report_fd, &e, sizeof e);
	_exit(127);
}

void lb_child_progress(int report_fd, char stage)
{
	lb_error e = {.code = LB_PROGRESS};
	e.msg[0] = stage;
	(void)lb_write_all(report_fd, &e, sizeof e);
}

int lb_read_report(int fd, lb_error *err)
{
	lb_error e;
	ssize_t n = lb_read_full(fd, &e, sizeof e);
	if (n != (ssize_t)sizeof e)
		return 0;
	e.msg[sizeof e.msg - 1] = '\0';
	if (err)
		*err = e;
	return 1;
}

void lb_close_fds_except(const int *keep, size_t n)
{
	/* close_range between the kept fds, which must be few: sort a copy first. */
	int k[16];
	size_t m = 0;
	for (size_t i = 0; i < n && m < 16; i++)
		if (keep[i] >= 3)
			k[m++] = keep[i];
	for (size_t i = 1; i < m; i++)
		for (size_t j = i; j > 0 && k[j - 1] > k[j]; j--) {
			int t = k[j];
			k[j] = k[j - 1];
			k[j - 1] = t;
		}
	unsigned lo = 3;
	for (size_t i = 0; i < m; i++) {
		if ((unsigned)k[i] > lo)
			syscall(SYS_close_range, lo, (unsigned)k[i] - 1, 0);
		lo = (unsigned)k[i] + 1;
	}
	syscall(SYS_close_range, lo, ~0U, 0);
}

int lb_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

ssize_t lb_read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int lb_write_string_file(const char *path, const char *s)
{
	_cleanup_fd_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	return lb_write_all(fd, s, strlen(s));
}

/* RESOLVE_BENEATH refuses "..", absolute symlinks and anything escaping dirfd; NO_SYMLINKS refuses
 * every symlink (so a link planted by sandboxed code is never followed, even within the
 * workspace); NO_MAGICLINKS refuses /proc/self/fd-style links. */
int lb_open_beneath(int dirfd, const char *path, int flags, unsigned mode)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	while (*path == '/')
		path++;
	if (*path == '\0')
		path = ".";
	long fd;
	do
		fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
	while (fd < 0 && errno == EAGAIN);
	return (int)fd;
}

/* As a chroot to root would see path: symlinks, absolute ones and ".." included, never leave root
 * (RESOLVE_IN_ROOT); magic links are refused. The result is the host's path of what it names. */
int lb_resolve_in_root(const char *root, const char *path, char *out, size_t size)
{
	_cleanup_fd_ int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return -1;
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd;
	do
		fd = syscall(SYS_openat2, rfd, path, &how, sizeof how);
	while (fd < 0 && errno == EAGAIN);
	if (fd < 0)
		return -1;
	char link[64];
	snprintf(link, sizeof link, "/proc/self/fd/%ld", fd);
	ssize_t n = readlink(link, out, size - 1);
	int saved = errno;
	close((int)fd);
	if (n < 0 || (size_t)n >= size - 1)
		return errno = n < 0 ? saved : ENAMETOOLONG, -1;
	out[n] = '\0';
	return 0;
}

int lb_mkdirs_beneath(int dirfd, const char *path, unsigned mode)
{
	char buf[4096];
	if (strlen(path) >= sizeof buf)
		return errno = ENAMETOOLONG, -1;
	strcpy(buf, path);
	char *slash = strrchr(buf, '/');
	if (!slash)
		return 0;
	*slash = '\0';
	_cleanup_fd_ int cur = dup(dirfd);
	if (cur < 0)
		return -1;
	char *save = NULL;
	for (char *part = strtok_r(buf, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
		if (strcmp(part, "..") == 0)
			return errno = EXDEV, -1;
		if (strcmp(part, ".") == 0)
			continue;
		if (mkdirat(cur, part, mode) < 0 && errno != EEXIST)
			return -1;
		int next = lb_open_beneath(cur, part, O_RDONLY | O_DIRECTORY, 0);
		if (next < 0)
			return -1;
		close(cur);
		cur = next;
	}
	return 0;
}

/* A program that exits without reading its stdin must not kill the caller (an nginx worker, a
 * daemon) with SIGPIPE: block it in this thread around the write and discard it if raised. */
ssize_t lb_write_nosigpipe(int fd, const void *buf, size_t len)
{
	sigset_t pipe_set, old;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	bool was_pending = false;
	sigset_t pending;
	if (sigpending(&pending) == 0)
		was_pending = sigismember(&pending, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	ssize_t n = write(fd, buf, len);
	int saved = errno;
	if (n < 0 && errno == EPIPE && !was_pending) {
		struct timespec zero = {0, 0};
		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved;
	return n;
}

void lb_remove_tree_at(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (d) {
		for (struct dirent *e; (e = readdir(d));) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			if (unlinkat(fd, e->d_name, 0) < 0 && errno == EISDIR)
				lb_remove_tree_at(fd, e->d_name);
		}
		closedir(d);
	} else if (fd >= 0) {
		close(fd);
	}
	unlinkat(dirfd, name, AT_REMOVEDIR);
}
