/* File transfer between the host and a jail's workspace.
 *
 * Why this is safe: the copy is done by a forked child that has joined the jail and become the
 * sandbox user with no capabilities, so it can reach nothing the sandboxed code could not. The
 * host side of the copy is an fd the caller opened with its own credentials before the fork, and
 * the jail side is resolved beneath /sandbox with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS): a symlink, "..", or a link swapped in mid-copy makes the open fail
 * instead of leading anywhere else. Hard links cannot reach host files: /sandbox is its own tmpfs.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* "/sandbox/a/b" or "a/b" -> "a/b"; anything else outside the workspace is refused. */
static int workspace_relative(const char *path, const char **rel, lb_error *err)
{
	if (path[0] == '/') {
		if (strncmp(path, "/sandbox/", 9) != 0)
			return lb_fail(
				err, EINVAL,
				"path %s is outside the workspace: use a path under /sandbox/ "
				"or one relative to it",
				path);
		path += 9;
	}
	while (*path == '/')
		path++;
	if (!*path)
		return lb_fail(err, EINVAL, "path names the workspace itself, not a file in it");
	for (const char *p = path; *p;) {
		const char *end = strchrnul(p, '/');
		if (end - p == 2 && p[0] == '.' && p[1] == '.')
			return lb_fail(err, EINVAL, "path %s contains \"..\"", path);
		p = *end ? end + 1 : end;
	}
	*rel = path;
	return 0;
}

static int copy_fd(int from, int to, uint64_t max, bool *too_big)
{
	char buf[65536];
	uint64_t total = 0;
	for (;;) {
		ssize_t n = read(from, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			return 0;
		total += (uint64_t)n;
		if (max && total > max) {
			*too_big = true;
			return errno = EFBIG, -1;
		}
		if (lb_write_all(to, buf, (size_t)n) < 0)
			return -1;
	}
}

static int transfer(lb_jail *j, const char *jail_path, int host_fd, bool to_jail, unsigned mode,
		    uint64_t max, lb_error *err)
{
	const char *rel = NULL;
	if (workspace_relative(jail_path, &rel, err) < 0)
		return -1;
	int report[2];
	if (pipe2(report, O_CLOEXEC) < 0)
		return lb_fail(err, errno, "pipe2");
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		close(report[0]);
		close(report[1]);
		return lb_fail(err, errno, "fork");
	}
	if (pid == 0) {
		lb_error e;
		int rep = report[1];
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		int keep[16] = {rep, host_fd};
		lb_close_fds_except(keep, lb_jail_keep_fds(j, keep, 2));
		if (lb_jail_enter(j, &e) < 0 || lb_become_sandbox_user(&e) < 0)
			lb_child_fail(rep, e.code, "%s", e.msg);
		_cleanup_fd_ int ws = open("/sandbox", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (ws < 0)
			lb_child_fail(rep, errno, "opening the workspace");
		bool too_big = false;
		if (to_jail) {
			if (lb_mkdirs_beneath(ws, rel, 0755) < 0)
				lb_child_fail(rep, errno, "creating the directories of /sandbox/%s",
					      rel);
			_cleanup_fd_ int fd =
				lb_open_beneath(ws, rel, O_WRONLY | O_CREAT | O_TRUNC, mode);
			if (fd < 0)
				lb_child_fail(
					rep, errno,
					"opening /sandbox/%s for writing (symlinks and \"..\" "
					"are refused)",
					rel);
			if (copy_fd(host_fd, fd, 0, &too_big) < 0)
				lb_child_fail(rep, errno, "writing /sandbox/%s", rel);
		} else {
			_cleanup_fd_ int fd = lb_open_beneath(ws, rel, O_RDONLY, 0);
			struct stat st;
			if (fd < 0)
				lb_child_fail(
					rep, errno,
					"opening /sandbox/%s (symlinks and \"..\" are refused)",
					rel);
			if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
				lb_child_fail(rep, EISDIR, "/sandbox/%s is not a regular file",
					      rel);
			if (copy_fd(fd, host_fd, max, &too_big) < 0)
				lb_child_fail(rep, errno, "copying /sandbox/%s%s", rel,
					      too_big ? " (larger than allowed)" : "");
		}
		_exit(0);
	}
	close(report[1]);
	lb_error rep;
	bool failed = lb_read_report(report[0], &rep);
	close(report[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (failed) {
		if (err)
			*err = rep;
		return -1;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return lb_fail(err, EIO, "file transfer child failed");
	return 0;
}

int lb_put_file(lb_jail *j, const char *jail_path, int host_fd, unsigned mode, lb_error *err)
{
	return transfer(j, jail_path, host_fd, true, mode, 0, err);
}

int lb_get_file(lb_jail *j, const char *jail_path, int host_fd, uint64_t max_bytes, lb_error *err)
{
	return transfer(j, jail_path, host_fd, false, 0, max_bytes, err);
}
