/* Image layers: one layer's tar applied onto a root filesystem that llmbox builds in a directory
 * of its own (lb_layer_apply), in the order an image lists its layers. The archive is untrusted
 * input (an image from anywhere): every name is taken relative to the root and refused when it
 * climbs out of it (".."); every path is opened beneath the root without following a symlink
 * (lb_open_beneath), so a link an earlier entry or layer planted is never followed on the host;
 * links themselves are kept as data, since the jail resolves them inside the root; device nodes,
 * FIFOs and sockets are left out (listed as skipped); setuid, setgid and sticky bits are dropped;
 * the bytes written are bounded; a truncated or malformed archive is an error. Whiteouts are
 * honoured as the OCI image spec says: ".wh.NAME" removes NAME of the layers below, and
 * ".wh..wh..opq" empties its directory. Files are the caller's (no chown): the jail maps them
 * to the sandbox user. */
#define _GNU_SOURCE
#include "internal.h"

#include "lazy.h"
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define WHITEOUT       ".wh."
#define OPAQUE	       ".wh..wh..opq"
#define MAX_DEPTH      128
#define MAX_COMPONENTS 256

static int fail(lb_error *err, int code, const char *name, const char *what)
{
	return lb_fail(err, code, "image layer: %s: %s", name, what);
}

/* name, normalised: no leading "/" or "./", no empty or "." components; "" for the root itself;
 * -1 when a component is "..". */
static int normalise(const char *name, char *out, size_t size)
{
	size_t n = 0, parts = 0;
	const char *p = name;
	while (*p) {
		while (*p == '/')
			p++;
		const char *end = strchr(p, '/');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len == 0)
			break;
		if (len == 2 && p[0] == '.' && p[1] == '.')
			return -1;
		if (!(len == 1 && p[0] == '.')) {
			if (n + len + 2 > size || ++parts > MAX_COMPONENTS)
				return errno = ENAMETOOLONG, -2;
			if (n)
				out[n++] = '/';
			memcpy(out + n, p, len);
			n += len;
		}
		p += len;
	}
	out[n] = '\0';
	return 0;
}

/* Removes name in the directory at, a whole tree if it is a directory, never following a link. */
static int remove_tree(int at, const char *name, int depth)
{
	struct stat st;
	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(at, name, 0);
	if (depth > MAX_DEPTH)
		return errno = ELOOP, -1;
	int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	fchmod(fd, 0700); /* a read-only directory of the image's must still be emptied */
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	int rc = 0;
	for (struct dirent *e; rc == 0 && (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			rc = remove_tree(dirfd(d), e->d_name, depth + 1);
	closedir(d);
	return rc < 0 ? -1 : unlinkat(at, name, AT_REMOVEDIR);
}

/* Empties a directory (an opaque whiteout): its entries go, it stays. */
static int empty_dir(int root_fd, const char *path)
{
	_cleanup_fd_ int fd = lb_open_beneath(root_fd, path, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	int list = dup(fd);
	DIR *d = list >= 0 ? fdopendir(list) : NULL;
	if (!d) {
		if (list >= 0)
			close(list);
		return -1;
	}
	int rc = 0;
	for (struct dirent *e; rc == 0 && (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			rc = remove_tree(fd, e->d_name, 0);
	closedir(d);
	return rc;
}

static void note_skipped(char *skipped, size_t len, const char *name)
{
	size_t used = strlen(skipped);
	if (used + strlen(name) + 2 < len)
		snprintf(skipped + used, len - used, "%s\n", name);
}

/* The entry's data into a new file in dirfd, counted against the layer's bound. */
static int write_file(struct archive *a, int dirfd, const char *base, mode_t mode, uint64_t max,
		      uint64_t *total, const char *name, lb_error *err)
{
	_cleanup_fd_ int fd =
		openat(dirfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return lb_fail_sys(err, errno, "image layer: creating %s", name);
	for (;;) {
		const void *buf;
		size_t n;
		la_int64_t off;
		int r = archive_read_data_block(a, &buf, &n, &off);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK)
			return fail(err, EIO, name, archive_error_string(a));
		/* (its offset too: a sparse entry must not make a file larger than the bound) */
		if (*total + n > max || (uint64_t)off + n > max)
			return lb_fail(
				err, EFBIG,
				"image layer: %s: the image is larger than %llu bytes unpacked",
				name, (unsigned long long)max);
		*total += n;
		if (pwrite(fd, buf, n, off) != (ssize_t)n)
			return lb_fail_sys(err, errno, "image layer: writing %s", name);
	}
	if (fchmod(fd, mode & 0777) < 0)
		return lb_fail_sys(err, errno, "image layer: %s", name);
	return 0;
}

/* A hard link's target, copied (links between layers' files need no identity). */
static int copy_link(int root_fd, const char *target, int dirfd, const char *base, uint64_t max,
		     uint64_t *total, const char *name, lb_error *err)
{
	char t[PATH_MAX];
	if (normalise(target, t, sizeof t) != 0 || !t[0])
		return fail(err, EXDEV, name, "a hard link to a path outside the root");
	_cleanup_fd_ int in = lb_open_beneath(root_fd, t, O_RDONLY, 0);
	struct stat st;
	if (in < 0 || fstat(in, &st) < 0 || !S_ISREG(st.st_mode))
		return fail(err, ENOENT, name, "a hard link to no regular file of the root");
	if (*total + (uint64_t)st.st_size > max)
		return lb_fail(err, EFBIG, "image layer: %s: the image is larger than %llu bytes",
			       name, (unsigned long long)max);
	_cleanup_fd_ int out =
		openat(dirfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return lb_fail_sys(err, errno, "image layer: creating %s", name);
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof buf)) > 0)
		if (lb_write_all(out, buf, (size_t)n) < 0)
			return lb_fail_sys(err, errno, "image layer: writing %s", name);
	*total += (uint64_t)st.st_size;
	return fchmod(out, st.st_mode & 0777) < 0 ? lb_fail_sys(err, errno, "%s", name) : 0;
}

/* One entry, its name normalised (not the root itself). */
static int apply_entry(struct archive *a, struct archive_entry *e, int root_fd, const char *path,
		       uint64_t max, uint64_t *total, char *skipped, size_t skipped_len,
		       lb_error *err)
{
	char parent[PATH_MAX];
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - path) : 1,
		 slash ? path : ".");
	if (strncmp(base, WHITEOUT, strlen(WHITEOUT)) == 0) {
		if (strcmp(base, OPAQUE) == 0)
			return empty_dir(root_fd, parent) < 0
				       ? lb_fail_sys(err, errno, "image layer: emptying %s", parent)
				       : 0;
		/* ".wh..." would name the directory above (the root's parent, at the top) */
		const char *gone = base + strlen(WHITEOUT);
		if (!gone[0] || !strcmp(gone, ".") || !strcmp(gone, ".."))
			return fail(err, EXDEV, path, "a whiteout of no name, \".\" or \"..\"");
		_cleanup_fd_ int pfd = lb_open_beneath(root_fd, parent, O_RDONLY | O_DIRECTORY, 0);
		if (pfd < 0)
			return errno == ENOENT ? 0
					       : lb_fail_sys(err, errno, "image layer: %s", path);
		return remove_tree(pfd, gone, 0) < 0
			       ? lb_fail_sys(err, errno, "image layer: whiteout %s", path)
			       : 0;
	}
	const char *hard = archive_entry_hardlink(e);
	mode_t type = hard ? AE_IFREG : archive_entry_filetype(e); /* (a link's own type is 0) */
	if (type != AE_IFDIR && type != AE_IFREG && type != AE_IFLNK) {
		note_skipped(skipped, skipped_len, path); /* devices, FIFOs, sockets */
		return 0;
	}
	if (lb_mkdirs_beneath(root_fd, path, 0755) < 0)
		return lb_fail_sys(err, errno,
				   "image layer: the directories of %s (a link or a file "
				   "where a directory should be?)",
				   path);
	_cleanup_fd_ int pfd = lb_open_beneath(root_fd, parent, O_RDONLY | O_DIRECTORY, 0);
	if (pfd < 0)
		return lb_fail_sys(err, errno, "image layer: the directory of %s", path);
	/* what a lower layer left at this name goes, but a directory stays a directory */
	struct stat st;
	bool is_dir = fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
	if (!(type == AE_IFDIR && is_dir) && remove_tree(pfd, base, 0) < 0)
		return lb_fail_sys(err, errno, "image layer: replacing %s", path);
	mode_t mode = archive_entry_perm(e) & 0777; /* no setuid, setgid or sticky bit */
	if (type == AE_IFDIR) {
		if (!is_dir && mkdirat(pfd, base, 0700) < 0)
			return lb_fail_sys(err, errno, "image layer: mkdir %s", path);
		/* the owner keeps rwx: later layers write into it, and the cache removes it */
		if (fchmodat(pfd, base, mode | 0700, 0) < 0)
			return lb_fail_sys(err, errno, "image layer: %s", path);
		return 0;
	}
	if (type == AE_IFLNK) {
		const char *target = archive_entry_symlink(e);
		if (!target || !target[0])
			return fail(err, EINVAL, path, "a symbolic link without a target");
		if (symlinkat(target, pfd, base) < 0)
			return lb_fail_sys(err, errno, "image layer: symlink %s", path);
		return 0;
	}
	if (hard)
		return copy_link(root_fd, hard, pfd, base, max, total, path, err);
	return write_file(a, pfd, base, mode, max, total, path, err);
}

int lb_layer_apply(int in_fd, int root_fd, uint64_t max_bytes, uint64_t *total, char *skipped,
		   size_t skipped_len, lb_error *err)
{
	if (lb_lazy_archive(err) < 0)
		return -1;
	struct archive *a = archive_read_new();
	if (!a)
		return lb_fail(err, ENOMEM, "out of memory");
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	int rc = 0;
	if (archive_read_open_fd(a, in_fd, 65536) != ARCHIVE_OK) {
		rc = fail(err, EINVAL, "the archive", archive_error_string(a));
		goto out;
	}
	for (;;) {
		struct archive_entry *e;
		int r = archive_read_next_header(a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			rc = fail(err, EINVAL, "the archive",
				  archive_error_string(a) ? archive_error_string(a)
							  : "not a tar archive, or truncated");
			goto out;
		}
		const char *name = archive_entry_pathname(e);
		char path[PATH_MAX];
		int n = name ? normalise(name, path, sizeof path) : -1;
		if (n == -1) {
			rc = fail(err, EXDEV, name ? name : "(no name)",
				  "an entry that climbs out of the root (\"..\")");
			goto out;
		}
		if (n < 0) {
			rc = fail(err, ENAMETOOLONG, name, "a name too long");
			goto out;
		}
		if (!path[0])
			continue; /* the root itself */
		if (apply_entry(a, e, root_fd, path, max_bytes, total, skipped, skipped_len, err) <
		    0) {
			rc = -1;
			goto out;
		}
	}
out:
	archive_read_free(a);
	return rc;
}
