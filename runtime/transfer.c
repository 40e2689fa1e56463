/* File transfer between the host and a jail's workspace: single files and whole directories.
 *
 * Why this is safe: the jail side of every copy is done by a forked child that has joined the
 * jail and become the sandbox user with no capabilities, so it can reach nothing the sandboxed
 * code could not. Every path it opens is resolved beneath /sandbox with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), and directories are walked entry by entry from
 * directory fds with O_NOFOLLOW: a symlink, "..", or a directory swapped for a link mid-copy
 * makes an open fail instead of leading anywhere else. Hard links cannot reach host files:
 * /sandbox is a tmpfs of its own.
 *
 * The two sides talk through a pipe carrying a tar stream (libarchive) whose entries are named
 * ROOT or ROOT/relative/path. The receiving side treats the stream as untrusted: only regular
 * files and directories, names checked component by component, written beneath the destination
 * directory's fd the same way, total size bounded.
 */
#define _GNU_SOURCE
#include "internal.h"

#include "lazy.h"
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define ROOT	  "llmbox"
#define MAX_DEPTH 64

/* "/sandbox/a/b" or "a/b" -> base "/sandbox", "a/b". With allow_tmp, "/tmp/a" -> base "/tmp",
 * "a" (where runs leave plots and other results). Anything else is refused. */
static int jail_relative(const char *path, bool allow_tmp, const char **base, const char **rel,
			 lb_error *err)
{
	*base = "/sandbox";
	if (path[0] == '/') {
		if (strncmp(path, "/sandbox/", 9) == 0) {
			path += 9;
		} else if (allow_tmp && strncmp(path, "/tmp/", 5) == 0) {
			*base = "/tmp";
			path += 5;
		} else {
			return lb_fail(
				err, EINVAL,
				"path %s is outside the workspace: use a path under /sandbox/ "
				"or one relative to it",
				path);
		}
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

/* ---- writing a tar stream from an fd-based walk (used on both sides) ---- */

struct walk {
	struct archive *a;
	int out_fd;
	uint64_t total, max;
	int report; /* where skipped entries are announced; -1 on the host side */
	lb_error *err;
	char skipped[2048]; /* host side: newline-separated names of skipped entries */
};

static la_ssize_t tar_write(struct archive *a, void *ud, const void *buf, size_t n)
{
	struct walk *w = ud;
	if (lb_write_nosigpipe(w->out_fd, buf, n) < 0) {
		archive_set_error(a, errno, "%s", strerror(errno));
		return -1;
	}
	return (la_ssize_t)n;
}

static void note_skipped(struct walk *w, const char *name)
{
	if (w->report >= 0) {
		lb_error e = {.code = LB_PROGRESS};
		snprintf(e.msg, sizeof e.msg, "s%.1000s", name);
		(void)lb_write_all(w->report, &e, sizeof e);
	} else {
		size_t used = strlen(w->skipped);
		snprintf(w->skipped + used, sizeof w->skipped - used, "%s\n", name);
	}
}

static int archive_fail(struct walk *w, const char *what)
{
	return lb_fail(w->err, archive_errno(w->a) > 0 ? archive_errno(w->a) : EIO, "%s: %s", what,
		       archive_error_string(w->a) ? archive_error_string(w->a) : "tar error");
}

static int add_file(struct walk *w, int fd, const char *name, const struct stat *st)
{
	if (w->max && w->total + (uint64_t)st->st_size > w->max)
		return lb_fail(w->err, EFBIG, "%s: the copy is larger than the limit of %llu bytes",
			       name, (unsigned long long)w->max);
	w->total += (uint64_t)st->st_size;
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, st->st_mode & 0777);
	archive_entry_set_size(e, st->st_size);
	archive_entry_set_mtime(e, st->st_mtim.tv_sec, 0);
	int r = archive_write_header(w->a, e);
	archive_entry_free(e);
	if (r != ARCHIVE_OK)
		return archive_fail(w, name);
	char buf[65536];
	off_t left = st->st_size; /* a file that grows meanwhile is cut at its size when opened */
	while (left > 0) {
		ssize_t n = read(fd, buf,
				 (size_t)(left < (off_t)sizeof buf ? left : (off_t)sizeof buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return lb_fail_sys(w->err, errno, "reading %s", name);
		if (n == 0)
			break; /* shrank: libarchive pads the entry */
		if (archive_write_data(w->a, buf, (size_t)n) < 0)
			return archive_fail(w, name);
		left -= n;
	}
	return archive_write_finish_entry(w->a) == ARCHIVE_OK ? 0 : archive_fail(w, name);
}

static int add_dir(struct walk *w, int dirfd, const char *name, const struct stat *st, int depth)
{
	if (depth > MAX_DEPTH)
		return lb_fail(w->err, ELOOP, "%s: directories nested deeper than %d", name,
			       MAX_DEPTH);
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, AE_IFDIR);
	archive_entry_set_perm(e, (st->st_mode & 0777) | 0700);
	int r = archive_write_header(w->a, e);
	archive_entry_free(e);
	if (r != ARCHIVE_OK)
		return archive_fail(w, name);
	int dup_fd = dup(dirfd);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return lb_fail_sys(w->err, errno, "listing %s", name);
	}
	int rc = 0;
	for (struct dirent *de; rc == 0 && (de = readdir(d));) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char child[PATH_MAX];
		if (snprintf(child, sizeof child, "%s/%s", name, de->d_name) >= (int)sizeof child) {
			rc = lb_fail(w->err, ENAMETOOLONG, "%s/%s", name, de->d_name);
			break;
		}
		/* O_NOFOLLOW on every open: an entry swapped for a symlink since readdir fails here
		 * (ELOOP) instead of being followed. */
		_cleanup_fd_ int fd =
			openat(dirfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		struct stat cst;
		if (fd < 0 || fstat(fd, &cst) < 0 ||
		    !(S_ISREG(cst.st_mode) || S_ISDIR(cst.st_mode))) {
			note_skipped(w,
				     child); /* symlinks, devices, fifos, sockets: never copied */
			continue;
		}
		rc = S_ISDIR(cst.st_mode) ? add_dir(w, fd, child, &cst, depth + 1)
					  : add_file(w, fd, child, &cst);
	}
	closedir(d);
	return rc;
}

/* Streams the file or directory open at `fd` as a tar to out_fd. */
static int send_tree(int fd, const char *root, int out_fd, uint64_t max, int report, struct walk *w,
		     lb_error *err)
{
	memset(w, 0, sizeof *w);
	w->out_fd = out_fd;
	w->max = max;
	w->report = report;
	w->err = err;
	w->a = archive_write_new();
	if (!w->a)
		return lb_fail(err, ENOMEM, "archive_write_new");
	struct stat st;
	int rc = -1;
	archive_write_set_format_pax_restricted(w->a);
	archive_write_set_bytes_in_last_block(w->a, 1);
	if (archive_write_open(w->a, w, NULL, tar_write, NULL) != ARCHIVE_OK)
		archive_fail(w, "starting the tar stream");
	else if (fstat(fd, &st) < 0)
		lb_fail_sys(err, errno, "fstat");
	else if (S_ISREG(st.st_mode))
		rc = add_file(w, fd, root, &st);
	else if (S_ISDIR(st.st_mode))
		rc = add_dir(w, fd, root, &st, 0);
	else
		lb_fail(err, EINVAL, "not a regular file or a directory");
	if (rc == 0 && archive_write_close(w->a) != ARCHIVE_OK)
		rc = archive_fail(w, "finishing the tar stream");
	archive_write_free(w->a);
	return rc;
}

/* ---- reading a tar stream into a directory fd (used on both sides) ---- */

/* The part of an entry name below root: "" for root itself, NULL when the name is malformed
 * (outside root, absolute, "..", "." or empty components). */
static const char *entry_suffix(const char *root, const char *name)
{
	size_t rl = strlen(root);
	if (strncmp(name, root, rl) != 0 || (name[rl] != '\0' && name[rl] != '/'))
		return NULL;
	const char *rest = name + rl;
	if (*rest == '/')
		rest++;
	for (const char *p = rest; *p;) {
		const char *end = strchrnul(p, '/');
		size_t len = (size_t)(end - p);
		if (len == 0 && *end == '\0' && p != rest)
			break; /* trailing slash of a directory */
		if (len == 0 || (len == 1 && p[0] == '.') ||
		    (len == 2 && p[0] == '.' && p[1] == '.'))
			return NULL;
		p = *end ? end + 1 : end;
	}
	return rest;
}

static int write_entry_data(struct archive *a, int fd, const char *name, uint64_t *total,
			    uint64_t max, lb_error *err)
{
	char buf[65536];
	for (;;) {
		la_ssize_t n = archive_read_data(a, buf, sizeof buf);
		if (n == 0)
			return 0;
		if (n < 0)
			return lb_fail(err, EIO, "reading %s from the stream: %s", name,
				       archive_error_string(a));
		*total += (uint64_t)n;
		if (max && *total > max)
			return lb_fail(err, EFBIG,
				       "the copy is larger than the limit of %llu bytes",
				       (unsigned long long)max);
		if (lb_write_all(fd, buf, (size_t)n) < 0)
			return lb_fail_sys(err, errno, "writing %s", name);
	}
}

/* A tar stream from the other side, read as untrusted: every entry's name must lie beneath the
 * root, and the first entry must be the root itself. Our own jail side names it ROOT; an archive
 * someone else made (root_given false) names it with its first entry, which must then be one
 * plain name. */
struct stream {
	struct archive *a;
	bool first;	 /* no entry read yet */
	bool root_given; /* root was known before the first entry */
	char root[NAME_MAX + 1];
};

static int stream_open(struct stream *st, int in_fd, const char *root, lb_error *err)
{
	*st = (struct stream){.a = archive_read_new(), .first = true, .root_given = root != NULL};
	if (root)
		snprintf(st->root, sizeof st->root, "%s", root);
	if (!st->a)
		return lb_fail(err, ENOMEM, "archive_read_new");
	archive_read_support_format_tar(st->a);
	if (archive_read_open_fd(st->a, in_fd, 65536) != ARCHIVE_OK)
		return lb_fail(err, EIO, "reading the stream: %s", archive_error_string(st->a));
	return 0;
}

/* The root an archive's first entry names: "dir", "dir/" or "file", never "." or "..". */
static int learn_root(struct stream *st, const char *name)
{
	size_t len = strcspn(name, "/");
	if (len == 0 || len > NAME_MAX || name[len + (name[len] == '/')] != '\0' ||
	    (len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return -1;
	memcpy(st->root, name, len);
	st->root[len] = '\0';
	return 0;
}

/* The next entry, its name and its name below the root: 1; 0 at the end; -1 with err filled. */
static int stream_next(struct stream *st, struct archive_entry **e, const char **name,
		       const char **suffix, lb_error *err)
{
	int r = archive_read_next_header(st->a, e);
	if (r == ARCHIVE_EOF)
		return st->first ? lb_fail(err, EIO, "the stream was empty") : 0;
	if (r != ARCHIVE_OK)
		return lb_fail(err, EIO, "reading the stream: %s", archive_error_string(st->a));
	*name = archive_entry_pathname(*e);
	if (st->first && !st->root_given && (!*name || learn_root(st, *name) < 0))
		return lb_fail(err, EINVAL, "malformed first entry %s in the archive",
			       *name ? *name : "?");
	*suffix = *name ? entry_suffix(st->root, *name) : NULL;
	if (!*suffix || (st->first != (**suffix == '\0')))
		return lb_fail(err, EINVAL, "malformed entry %s in the stream",
			       *name ? *name : "?");
	st->first = false;
	return 1;
}

static void stream_close(struct stream *st)
{
	if (st->a)
		archive_read_free(st->a);
}

/* Extracts the stream read from in_fd beneath base_fd at `dest` (relative; "" means base_fd
 * itself must receive a directory). `file_mode`, when non-zero, overrides a single file's
 * mode. The first entry must be root (NULL: it names the root, see struct stream). With
 * file_fd >= 0 the stream must be one regular file,
 * whose data goes to file_fd. */
static int receive_tree(int in_fd, const char *root, int base_fd, int file_fd, const char *dest,
			unsigned file_mode, uint64_t max, char *skipped, size_t skipped_len,
			lb_error *err)
{
	struct stream st;
	int rc = stream_open(&st, in_fd, root, err), more = 0;
	struct archive *a = st.a;
	uint64_t total = 0;
	struct archive_entry *e;
	const char *name, *suffix;
	while (rc == 0 && (more = stream_next(&st, &e, &name, &suffix, err)) > 0) {
		char path[PATH_MAX];
		if (snprintf(path, sizeof path, "%s%s%s", dest, *dest && *suffix ? "/" : "",
			     suffix) >= (int)sizeof path) {
			rc = lb_fail(err, ENAMETOOLONG, "%s", name);
			break;
		}
		size_t len = strlen(path);
		while (len > 0 && path[len - 1] == '/')
			path[--len] = '\0';
		mode_t type = archive_entry_filetype(e);
		unsigned perm = (unsigned)archive_entry_perm(e) & 0777;
		/* A foreign archive's links and special files are skipped and listed, named as
		 * copy_out names what it skips ("llmbox/..."), like the jail side does. */
		if (!root && skipped && type != AE_IFDIR &&
		    (type != AE_IFREG || archive_entry_hardlink(e))) {
			size_t used = strlen(skipped);
			snprintf(skipped + used, skipped_len - used, "%s%s%s\n", ROOT,
				 *suffix ? "/" : "", suffix);
			continue;
		}
		if (file_fd >= 0) {
			if (type != AE_IFREG || *suffix) {
				rc = lb_fail(err, EISDIR,
					     "a directory cannot be written to a non-regular file");
				break;
			}
			rc = write_entry_data(a, file_fd, "the destination", &total, max, err);
		} else if (type == AE_IFDIR) {
			if (!*path)
				continue; /* base_fd is the destination directory itself */
			if (lb_mkdirs_beneath(base_fd, path, 0755) < 0 ||
			    (mkdirat(base_fd, path, perm | 0700) < 0 && errno != EEXIST)) {
				rc = lb_fail(
					err, errno,
					"creating directory %s (symlinks and \"..\" are refused)",
					path);
				break;
			}
			_cleanup_fd_ int dfd =
				lb_open_beneath(base_fd, path, O_RDONLY | O_DIRECTORY, 0);
			if (dfd < 0)
				rc = lb_fail_sys(err, errno,
						 "%s is not a directory (symlinks are refused)",
						 path);
		} else if (type == AE_IFREG) {
			if (!*path) {
				rc = lb_fail(err, EISDIR,
					     "the destination is a directory: give the path "
					     "of the file to write");
				break;
			}
			if (lb_mkdirs_beneath(base_fd, path, 0755) < 0) {
				rc = lb_fail(
					err, errno,
					"creating the directories of %s (symlinks and \"..\" are "
					"refused)",
					path);
				break;
			}
			_cleanup_fd_ int fd =
				lb_open_beneath(base_fd, path, O_WRONLY | O_CREAT | O_TRUNC,
						file_mode ? file_mode : perm);
			if (fd < 0)
				rc = lb_fail_sys(
					err, errno,
					"opening %s for writing (symlinks and \"..\" are refused)",
					path);
			else
				rc = write_entry_data(a, fd, path, &total, max, err);
		} else {
			rc = lb_fail(err, EINVAL, "entry %s is neither a file nor a directory",
				     name);
		}
	}
	if (rc == 0 && more < 0)
		rc = -1;
	stream_close(&st);
	return rc;
}

/* ---- the two directions ---- */

/* Forks the jail-side child; `fn` runs in it as the sandbox user with /sandbox open. */
typedef int (*jail_fn)(int ws, int pipe_fd, const char *rel, unsigned mode, uint64_t max,
		       int report, lb_error *err);

static pid_t spawn_jail_side(lb_jail *j, jail_fn fn, int pipe_fd, const char *base, const char *rel,
			     unsigned mode, uint64_t max, int report[2], lb_error *err)
{
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		lb_fail_sys(err, errno, "fork");
		return -1;
	}
	if (pid)
		return pid;
	lb_error e;
	int rep = report[1];
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	int keep[16] = {rep, pipe_fd};
	lb_close_fds_except(keep, lb_jail_keep_fds(j, keep, 2));
	if (lb_jail_enter(j, &e) < 0 || lb_become_sandbox_user(&e) < 0)
		lb_child_relay(rep, &e);
	_cleanup_fd_ int ws = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (ws < 0)
		lb_child_fail(rep, errno, "opening %s", base);
	if (fn(ws, pipe_fd, rel, mode, max, rep, &e) < 0)
		lb_child_relay(rep, &e);
	_exit(0);
}

/* Collects the child's records: skipped entries (host side list) and at most one failure. */
static int finish_jail_side(pid_t pid, int report_fd, char *skipped, size_t skipped_len,
			    int side_rc, lb_error *err)
{
	lb_error rec, child_err = {0};
	bool failed = false;
	while (lb_read_report(report_fd, &rec)) {
		if (rec.code == LB_PROGRESS && rec.msg[0] == 's' && skipped) {
			size_t used = strlen(skipped);
			snprintf(skipped + used, skipped_len - used, "%s\n", rec.msg + 1);
		} else if (rec.code != LB_PROGRESS) {
			child_err = rec;
			failed = true;
		}
	}
	if (side_rc < 0 || failed)
		kill(pid, SIGKILL);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	/* When one side fails the other usually sees only a broken pipe or a cut stream: report
	 * the side whose reason is not EPIPE, the jail side's when both have one. */
	if (failed && (child_err.code != EPIPE || side_rc == 0)) {
		if (err)
			*err = child_err;
		return -1;
	}
	if (side_rc < 0)
		return -1;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return lb_fail(err, EIO, "the file transfer child failed");
	return 0;
}

static int jail_receive(int ws, int pipe_fd, const char *rel, unsigned mode, uint64_t max,
			int report, lb_error *err)
{
	(void)max;
	(void)report;
	return receive_tree(pipe_fd, ROOT, ws, -1, rel, mode, 0, NULL, 0, err);
}

static int jail_send(int ws, int pipe_fd, const char *rel, unsigned mode, uint64_t max, int report,
		     lb_error *err)
{
	(void)mode;
	_cleanup_fd_ int fd = lb_open_beneath(ws, rel, O_RDONLY | O_NONBLOCK, 0);
	if (fd < 0)
		return lb_fail_sys(err, errno, "opening %s (symlinks and \"..\" are refused)", rel);
	struct walk w;
	return send_tree(fd, ROOT, pipe_fd, max, report, &w, err);
}

/* The host file or directory a copy in sends, opened for reading: its fd and stat, or -1. */
static int open_source(const char *host_path, struct stat *st, lb_error *err)
{
	int fd = open(host_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return lb_fail_sys(err, errno, "reading %s", host_path);
	if (fstat(fd, st) < 0 || !(S_ISREG(st->st_mode) || S_ISDIR(st->st_mode))) {
		close(fd);
		return lb_fail(err, EINVAL, "%s is not a regular file or a directory", host_path);
	}
	return fd;
}

int lb_copy_in(lb_jail *j, const char *host_path, const char *jail_path, unsigned mode,
	       char *skipped, size_t skipped_len, lb_error *err)
{
	const char *base = NULL, *rel = NULL;
	if (lb_lazy_archive(err) < 0 || jail_relative(jail_path, false, &base, &rel, err) < 0)
		return -1;
	struct stat st;
	_cleanup_fd_ int src = open_source(host_path, &st, err);
	if (src < 0)
		return -1;
	int pipefd[2], report[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return lb_fail_sys(err, errno, "pipe2");
	if (pipe2(report, O_CLOEXEC) < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return lb_fail_sys(err, errno, "pipe2");
	}
	pid_t pid = spawn_jail_side(j, jail_receive, pipefd[0], base, rel,
				    S_ISREG(st.st_mode) ? mode : 0, 0, report, err);
	close(pipefd[0]);
	close(report[1]);
	int rc = -1;
	if (pid > 0) {
		struct walk w;
		rc = send_tree(src, ROOT, pipefd[1], 0, -1, &w, err);
		close(pipefd[1]);
		pipefd[1] = -1;
		if (skipped && skipped_len)
			snprintf(skipped, skipped_len, "%s", w.skipped);
		rc = finish_jail_side(pid, report[0], NULL, 0, rc, err);
	}
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	close(report[0]);
	return rc;
}

/* Host side of copy_out: a single file goes to a temporary name next to the destination and is
 * renamed over it only when complete, so a failed copy never leaves a half-written file and
 * never destroys what was there. A destination that exists and is not a regular file (a
 * device, a FIFO) is written in place. A directory goes beneath the destination directory. */
static int host_receive(int in_fd, const char *root, const char *host_path, uint64_t max,
			char *skipped, size_t skipped_len, lb_error *err)
{
	struct stat st;
	bool exists = stat(host_path, &st) == 0;
	if (exists && S_ISDIR(st.st_mode)) {
		_cleanup_fd_ int dfd = open(host_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0)
			return lb_fail_sys(err, errno, "opening %s", host_path);
		return receive_tree(in_fd, root, dfd, -1, "", 0, max, skipped, skipped_len, err);
	}
	/* The directory to write in and the name in it, each in its own buffer: a bare name
	 * ("output.txt") is written in ".". */
	char dir[PATH_MAX], base[NAME_MAX + 1], tmp[PATH_MAX];
	const char *slash = strrchr(host_path, '/');
	const char *name = slash ? slash + 1 : host_path;
	if (!*name)
		return lb_fail(err, EINVAL, "%s: no file name", host_path);
	if (strlen(name) >= sizeof base || strlen(host_path) >= sizeof dir)
		return lb_fail(err, ENAMETOOLONG, "%s: name too long", host_path);
	snprintf(base, sizeof base, "%s", name);
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else if (slash == host_path)
		snprintf(dir, sizeof dir, "/");
	else
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - host_path), host_path);
	_cleanup_fd_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return lb_fail_sys(err, errno, "opening directory %s", dir);
	if (exists && !S_ISREG(st.st_mode)) {
		_cleanup_fd_ int fd = open(host_path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
		if (fd < 0)
			return lb_fail_sys(err, errno, "writing %s", host_path);
		return receive_tree(in_fd, root, -1, fd, "", 0, max, skipped, skipped_len, err);
	}
	snprintf(tmp, sizeof tmp, ".%.200s.llmbox-%d", base, (int)getpid());
	unlinkat(dfd, tmp, 0);
	unlinkat(dfd, tmp, AT_REMOVEDIR);
	/* The stream's ROOT entry lands at `tmp` beneath dfd: a file, or a whole directory. */
	int rc = receive_tree(in_fd, root, dfd, -1, tmp, 0, max, skipped, skipped_len, err);
	if (rc == 0 && renameat(dfd, tmp, dfd, base) < 0)
		rc = lb_fail_sys(err, errno, "renaming the copy to %s", host_path);
	if (rc < 0 && unlinkat(dfd, tmp, 0) < 0 && errno == EISDIR)
		lb_remove_tree_at(dfd, tmp);
	return rc;
}

/* Host side of lb_collect: the stream's regular files are handed to fn in memory and never
 * touch the host's file system. The stream is as untrusted as in receive_tree: names beneath
 * ROOT only, the first entry ROOT itself, only files and directories, the total bounded. */
static int receive_entries(int in_fd, const char *root, uint64_t max, lb_entry_fn fn, void *ud,
			   lb_error *err)
{
	struct stream st;
	int rc = stream_open(&st, in_fd, root, err), more = 0;
	struct archive *a = st.a;
	uint64_t total = 0;
	char *buf = NULL;
	struct archive_entry *e;
	const char *name, *suffix;
	while (rc == 0 && (more = stream_next(&st, &e, &name, &suffix, err)) > 0) {
		mode_t type = archive_entry_filetype(e);
		if (type == AE_IFDIR)
			continue;
		/* Links and devices in a foreign archive are skipped, as the jail side skips them.
		 */
		if (!root && (type != AE_IFREG || archive_entry_hardlink(e)))
			continue;
		if (type != AE_IFREG) {
			rc = lb_fail(err, EINVAL, "entry %s is neither a file nor a directory",
				     name);
			break;
		}
		size_t len = 0, cap = 0;
		for (;;) {
			if (len == cap) {
				cap = cap ? cap * 2 : 65536;
				char *nb = realloc(buf, cap);
				if (!nb) {
					rc = lb_fail(err, ENOMEM, "out of memory for %s", name);
					break;
				}
				buf = nb;
			}
			la_ssize_t n = archive_read_data(a, buf + len, cap - len);
			if (n == 0)
				break;
			if (n < 0) {
				rc = lb_fail(err, EIO, "reading %s from the stream: %s", name,
					     archive_error_string(a));
				break;
			}
			len += (size_t)n;
			total += (uint64_t)n;
			if (max && total > max) {
				rc = lb_fail(err, EFBIG,
					     "the results are larger than the limit of %llu bytes",
					     (unsigned long long)max);
				break;
			}
		}
		if (rc == 0 && fn(ud, suffix, buf ? buf : "", len) != 0)
			rc = lb_fail(err, ENOMEM, "keeping %s", name);
	}
	if (rc == 0 && more < 0)
		rc = -1;
	free(buf);
	stream_close(&st);
	return rc;
}

/* What the host does with the stream the jail side sends. */
struct host_side {
	const char *host_path; /* lb_copy_out: where it goes */
	lb_entry_fn fn;	       /* lb_collect: who gets the files */
	void *ud;
};

/* The jail side sends jail_path as a tar stream; the host side receives it. */
static int send_out(lb_jail *j, const char *jail_path, const struct host_side *host,
		    uint64_t max_bytes, char *skipped, size_t skipped_len, lb_error *err)
{
	const char *base = NULL, *rel = NULL;
	if (jail_relative(jail_path, true, &base, &rel, err) < 0)
		return -1;
	int pipefd[2], report[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return lb_fail_sys(err, errno, "pipe2");
	if (pipe2(report, O_CLOEXEC) < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return lb_fail_sys(err, errno, "pipe2");
	}
	if (skipped && skipped_len)
		skipped[0] = '\0';
	pid_t pid = spawn_jail_side(j, jail_send, pipefd[1], base, rel, 0, max_bytes, report, err);
	close(pipefd[1]);
	close(report[1]);
	int rc = -1;
	if (pid > 0) {
		rc = host->fn ? receive_entries(pipefd[0], ROOT, max_bytes, host->fn, host->ud, err)
			      : host_receive(pipefd[0], ROOT, host->host_path, max_bytes, NULL, 0,
					     err);
		close(pipefd[0]);
		pipefd[0] = -1;
		rc = finish_jail_side(pid, report[0], skipped, skipped_len, rc, err);
	}
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	close(report[0]);
	return rc;
}

int lb_copy_out(lb_jail *j, const char *jail_path, const char *host_path, uint64_t max_bytes,
		char *skipped, size_t skipped_len, lb_error *err)
{
	struct host_side host = {.host_path = host_path};
	if (lb_lazy_archive(err) < 0)
		return -1;
	return send_out(j, jail_path, &host, max_bytes, skipped, skipped_len, err);
}

int lb_collect(lb_jail *j, const char *jail_path, uint64_t max_bytes, lb_entry_fn fn, void *ud,
	       lb_error *err)
{
	struct host_side host = {.fn = fn, .ud = ud};
	if (lb_lazy_archive(err) < 0)
		return -1;
	return send_out(j, jail_path, &host, max_bytes, NULL, 0, err);
}

int lb_tar_entries(int in_fd, uint64_t max_bytes, lb_entry_fn fn, void *ud, lb_error *err)
{
	if (lb_lazy_archive(err) < 0)
		return -1;
	return receive_entries(in_fd, NULL, max_bytes, fn, ud, err);
}

/* ---- an archive of files in memory, for a container's `tar -x` ---- */

struct membuf {
	char *data;
	size_t len, cap;
};

static la_ssize_t membuf_write(struct archive *a, void *ud, const void *buf, size_t n)
{
	struct membuf *m = ud;
	if (m->len + n > m->cap) {
		size_t cap = m->cap ? m->cap : 65536;
		while (cap < m->len + n)
			cap *= 2;
		char *nd = realloc(m->data, cap);
		if (!nd) {
			archive_set_error(a, ENOMEM, "out of memory");
			return -1;
		}
		m->data = nd;
		m->cap = cap;
	}
	memcpy(m->data + m->len, buf, n);
	m->len += n;
	return (la_ssize_t)n;
}

/* An absolute path with no empty, "." or ".." component (a trailing slash is not a file). */
static bool plain_absolute(const char *path)
{
	if (path[0] != '/' || !path[1])
		return false;
	for (const char *p = path + 1;;) {
		const char *end = strchrnul(p, '/');
		size_t n = (size_t)(end - p);
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (!*end)
			return true;
		p = end + 1;
	}
}

int lb_tar_pack(const lb_file *files, size_t n, uid_t uid, gid_t gid, char **out, size_t *len,
		lb_error *err)
{
	*out = NULL;
	*len = 0;
	if (lb_lazy_archive(err) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!files[i].path || !plain_absolute(files[i].path))
			return lb_fail(
				err, EINVAL,
				"file %s: expected an absolute path without \".\", \"..\" or "
				"empty components",
				files[i].path ? files[i].path : "(none)");
	struct membuf m = {0};
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	int rc = -1;
	if (!a || !e) {
		lb_fail(err, ENOMEM, "archive_write_new");
		goto out;
	}
	archive_write_set_format_pax_restricted(a);
	archive_write_set_bytes_in_last_block(a, 1);
	if (archive_write_open(a, &m, NULL, membuf_write, NULL) != ARCHIVE_OK)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		archive_entry_clear(e);
		archive_entry_set_pathname(e, files[i].path + 1);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, files[i].mode & 07777);
		archive_entry_set_size(e, (la_int64_t)files[i].len);
		archive_entry_set_uid(e, uid);
		archive_entry_set_gid(e, gid);
		if (archive_write_header(a, e) != ARCHIVE_OK ||
		    (files[i].len && archive_write_data(a, files[i].data, files[i].len) !=
					     (la_ssize_t)files[i].len))
			goto fail;
	}
	if (archive_write_close(a) != ARCHIVE_OK)
		goto fail;
	*out = m.data;
	*len = m.len;
	m.data = NULL;
	rc = 0;
	goto out;
fail:
	lb_fail(err, archive_errno(a) > 0 ? archive_errno(a) : EIO, "packing the files: %s",
		archive_error_string(a) ? archive_error_string(a) : "tar error");
out:
	if (e)
		archive_entry_free(e);
	if (a)
		archive_write_free(a);
	free(m.data);
	return rc;
}

/* ---- archives for and from a sandbox that unpacks and packs its own side (containers) ---- */

int lb_tar_extract(int in_fd, const char *host_path, uint64_t max_bytes, char *skipped,
		   size_t skipped_len, lb_error *err)
{
	if (skipped && skipped_len)
		skipped[0] = '\0';
	if (lb_lazy_archive(err) < 0)
		return -1;
	return host_receive(in_fd, NULL, host_path, max_bytes, skipped, skipped_len, err);
}

int lb_tar_host(const char *host_path, const char *root, char **out, size_t *len, char *skipped,
		size_t skipped_len, lb_error *err)
{
	*out = NULL;
	*len = 0;
	if (lb_lazy_archive(err) < 0)
		return -1;
	/* one plain name, or "." (a build context: entries "./Dockerfile", ...) */
	if (root && (!*root || strchr(root, '/') || strcmp(root, "..") == 0))
		return lb_fail(err, EINVAL, "tar_host: the root must be one plain name or \".\"");
	struct stat st;
	_cleanup_fd_ int src = open_source(host_path, &st, err);
	if (src < 0)
		return -1;
	_cleanup_fd_ int mem = memfd_create("llmbox-copy", MFD_CLOEXEC);
	if (mem < 0)
		return lb_fail_sys(err, errno, "memfd_create");
	struct walk w;
	if (send_tree(src, root ? root : ROOT, mem, 0, -1, &w, err) < 0)
		return -1;
	if (skipped && skipped_len)
		snprintf(skipped, skipped_len, "%s", w.skipped);
	off_t size = lseek(mem, 0, SEEK_END);
	char *buf = size > 0 ? malloc((size_t)size) : NULL;
	if (size <= 0 || !buf)
		return lb_fail(err, ENOMEM, "out of memory for the copy of %s", host_path);
	if (pread(mem, buf, (size_t)size, 0) != size) {
		free(buf);
		return lb_fail_sys(err, errno, "reading the copy back");
	}
	*out = buf;
	*len = (size_t)size;
	return 0;
}
