/* A scratch workspace for the harnesses that let the core create files for real (#included by
 * fuzz_paths.c and fuzz_tar.c, never built alone).
 *
 * Layout, made once per process under $LB_FUZZ_TMP (default build/fuzz-tmp):
 *   NAME-PID/outside/   must stay empty: every symlink below points here
 *   NAME-PID/sink       a regular file a harness may write to
 *   NAME-PID/ws/        the workspace: file, sub/, and symlinks leading out of it
 *                       (link_out -> ../outside, link_abs -> /abs/.../outside,
 *                       sub/link_up -> ../../outside) or staying inside (link_in -> sub,
 *                       link_self -> .)
 * scratch_check() fails the input when anything changed next to ws or in outside/, or when a
 * fixture was replaced; scratch_reset() removes what the input created inside ws. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

struct scratch {
	char root[PATH_MAX], ws[PATH_MAX + 8], outside[PATH_MAX + 16], sink[PATH_MAX + 8];
	int ws_fd;
	struct stat root_st, outside_st, sub_st;
	size_t root_entries;
};

static struct scratch scr;

static const char *const fixtures[] = {"file",	   "sub",     "link_out",
				       "link_abs", "link_in", "link_self"};

static void scratch_must(int r, const char *what)
{
	if (r < 0) {
		fprintf(stderr, "scratch: %s: %s\n", what, strerror(errno));
		abort();
	}
}

static size_t count_entries(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		abort();
	size_t n = 0;
	for (struct dirent *e; (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static bool same_stat(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_nlink == b->st_nlink &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_mode == b->st_mode;
}

static void scratch_cleanup(void)
{
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", scr.root);
	if (scr.root[0] && system(cmd) != 0)
		fprintf(stderr, "scratch: could not remove %s\n", scr.root);
}

static void scratch_init(const char *name)
{
	const char *base = getenv("LB_FUZZ_TMP");
	base = base && *base ? base : "build/fuzz-tmp";
	mkdir(base, 0755);
	char *real = realpath(base, NULL);
	if (!real) {
		fprintf(stderr, "scratch: directory %s: %s (set LB_FUZZ_TMP)\n", base,
			strerror(errno));
		abort();
	}
	snprintf(scr.root, sizeof scr.root, "%s/%s-%d", real, name, (int)getpid());
	free(real);
	snprintf(scr.ws, sizeof scr.ws, "%s/ws", scr.root);
	snprintf(scr.outside, sizeof scr.outside, "%s/outside", scr.root);
	snprintf(scr.sink, sizeof scr.sink, "%s/sink", scr.root);
	scratch_must(mkdir(scr.root, 0755), scr.root);
	atexit(scratch_cleanup);
	scratch_must(mkdir(scr.outside, 0755), scr.outside);
	scratch_must(mkdir(scr.ws, 0755), scr.ws);
	int fd = open(scr.sink, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	scratch_must(fd, scr.sink);
	close(fd);
	scr.ws_fd = open(scr.ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	scratch_must(scr.ws_fd, scr.ws);
	scratch_must(mkdirat(scr.ws_fd, "sub", 0755), "sub");
	fd = openat(scr.ws_fd, "file", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	scratch_must(fd, "file");
	close(fd);
	scratch_must(symlinkat("../outside", scr.ws_fd, "link_out"), "link_out");
	scratch_must(symlinkat(scr.outside, scr.ws_fd, "link_abs"), "link_abs");
	scratch_must(symlinkat("sub", scr.ws_fd, "link_in"), "link_in");
	scratch_must(symlinkat(".", scr.ws_fd, "link_self"), "link_self");
	scratch_must(symlinkat("../../outside", scr.ws_fd, "sub/link_up"), "link_up");
	scratch_must(stat(scr.root, &scr.root_st), scr.root);
	scratch_must(stat(scr.outside, &scr.outside_st), scr.outside);
	scratch_must(fstatat(scr.ws_fd, "sub", &scr.sub_st, AT_SYMLINK_NOFOLLOW), "sub");
	scr.root_entries = count_entries(scr.root);
}

static void scratch_check(const char *what)
{
	struct stat root_st, outside_st, sub_st;
	scratch_must(stat(scr.root, &root_st), scr.root);
	scratch_must(stat(scr.outside, &outside_st), scr.outside);
	bool ok = same_stat(&root_st, &scr.root_st) && same_stat(&outside_st, &scr.outside_st) &&
		  count_entries(scr.root) == scr.root_entries && count_entries(scr.outside) == 0;
	/* The fixtures are still what they were: no symlink was replaced or followed. */
	ok = ok && fstatat(scr.ws_fd, "sub", &sub_st, AT_SYMLINK_NOFOLLOW) == 0 &&
	     sub_st.st_ino == scr.sub_st.st_ino;
	static const char *const links[][2] = {{"link_out", "../outside"},
					       {"link_in", "sub"},
					       {"link_self", "."},
					       {"sub/link_up", "../../outside"},
					       {"link_abs", NULL}};
	for (size_t i = 0; ok && i < sizeof links / sizeof links[0]; i++) {
		char target[PATH_MAX + 1];
		ssize_t n = readlinkat(scr.ws_fd, links[i][0], target, sizeof target - 1);
		ok = n >= 0;
		if (ok) {
			target[n] = '\0';
			ok = !strcmp(target, links[i][1] ? links[i][1] : scr.outside);
		}
	}
	if (!ok) {
		fprintf(stderr,
			"scratch: something changed outside the workspace, or a fixture, "
			"after %s\n",
			what);
		abort();
	}
}

/* Every fd the core returns must be beneath the workspace. */
__attribute__((unused)) static void scratch_check_fd(int fd, const char *what)
{
	char link[64], target[PATH_MAX + 1];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, target, sizeof target - 1);
	if (n < 0 && errno == ENAMETOOLONG)
		return; /* /proc cannot name paths over a page: scratch_check() still applies */
	if (n < 0)
		abort();
	target[n] = '\0';
	size_t wl = strlen(scr.ws);
	if (strncmp(target, scr.ws, wl) != 0 || (target[wl] != '/' && target[wl] != '\0')) {
		fprintf(stderr, "scratch: %s opened %s, outside %s\n", what, target, scr.ws);
		abort();
	}
}

static void remove_tree(int dirfd, bool top)
{
	DIR *d = fdopendir(dup(dirfd));
	if (!d)
		abort();
	rewinddir(d); /* the dup shares its position with dirfd, left at the end last time */
	for (struct dirent *e; (e = readdir(d));) {
		const char *n = e->d_name;
		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		bool keep = false;
		for (size_t i = 0; top && i < sizeof fixtures / sizeof fixtures[0]; i++)
			keep |= !strcmp(n, fixtures[i]);
		if (keep && strcmp(n, "sub"))
			continue;
		if (!keep && unlinkat(dirfd, n, 0) == 0)
			continue;
		int c = openat(dirfd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (c < 0)
			abort();
		if (keep) { /* sub/: keep link_up */
			DIR *s = fdopendir(c);
			if (!s)
				abort();
			rewinddir(s);
			for (struct dirent *se; (se = readdir(s));) {
				if (!strcmp(se->d_name, ".") || !strcmp(se->d_name, "..") ||
				    !strcmp(se->d_name, "link_up"))
					continue;
				if (unlinkat(c, se->d_name, 0) == 0)
					continue;
				int cc = openat(c, se->d_name,
						O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (cc < 0)
					abort();
				remove_tree(cc, false);
				close(cc);
				if (unlinkat(c, se->d_name, AT_REMOVEDIR) < 0)
					abort();
			}
			closedir(s);
			continue;
		}
		/* a directory made with mode 0 (from a fuzzed tar header) must still be emptied */
		fchmod(c, 0700);
		remove_tree(c, false);
		close(c);
		if (unlinkat(dirfd, n, AT_REMOVEDIR) < 0)
			abort();
	}
	closedir(d);
}

static void scratch_reset(void)
{
	remove_tree(scr.ws_fd, true);
	if (truncate(scr.sink, 0) < 0)
		abort();
	int fd = openat(scr.ws_fd, "file", O_WRONLY | O_TRUNC | O_CLOEXEC);
	scratch_must(fd, "file");
	fchmod(fd, 0644);
	close(fd);
}
