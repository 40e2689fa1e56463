/* Fuzz target "paths": the path checks of file transfer (jail_relative, and entry_suffix for tar
 * entry names; static in transfer.c, reached by including that file unchanged) and the
 * beneath-only primitives they hand paths to (lb_mkdirs_beneath, lb_open_beneath), run for real
 * against a scratch workspace.
 *
 * The workspace is the scratch tree of scratch.c (symlinks in it lead out of it).
 * Each input is a path built from tokens and raw bytes. What must hold:
 *   - jail_relative accepts exactly the paths under /sandbox/ (or /tmp/ when allowed) or
 *     relative, without "..", not naming the base itself, and returns a relative suffix;
 *   - entry_suffix accepts exactly "llmbox" and "llmbox/..." names without empty, "." or ".."
 *     components (a trailing slash allowed) and returns a suffix of the name;
 *   - whatever the primitives are given (checked or not), every fd they return is beneath ws,
 *     nothing appears in outside/ or next to ws, and symlinks are never followed.
 * Files and directories the primitives create inside ws are removed after each input. */
#include "../runtime/transfer.c"
#include "scratch.c"
#include "harness.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	scratch_init("paths");
	return 0;
}

static const char *const tokens[] = {
	"..",	   ".",		"",	   "sub",  "file",   "link_out", "link_abs",
	"link_in", "link_self", "link_up", "new",  "new2",   "sandbox",	 "outside",
	"~",	   "...",	" ..",	   ".. ",  "..\\..", "%2e%2e",	 "\xc0\xae\xc0\xae",
	"x\n",	   "-",		"*",	   "proc", "self",   "fd",	 "0",
	"llmbox",  "tmp",
};

/* Builds the path: a prefix, then tokens and raw runs joined by separators. */
static size_t build_path(const uint8_t *data, size_t size, char *out, size_t cap)
{
	static const char *const prefixes[] = {
		"",	      "/sandbox/", "/sandbox", "/",  "//sandbox/",   "/sandbox//",
		"/sandboxx/", "/tmp/",	   "/tmp",     "./", "/sandbox/../", "llmbox",
		"llmbox/",    "/llmbox/",
	};
	static const char *const seps[] = {"/", "//", "/./", ""};
	size_t n = 0, i = 0;
#define PUT(s, l)                                                                                  \
	do {                                                                                       \
		size_t l_ = (l);                                                                   \
		if (n + l_ >= cap)                                                                 \
			goto done;                                                                 \
		memcpy(out + n, (s), l_);                                                          \
		n += l_;                                                                           \
	} while (0)
	if (i < size) {
		const char *pre = prefixes[data[i++] % (sizeof prefixes / sizeof prefixes[0])];
		PUT(pre, strlen(pre));
	}
	while (i < size) {
		uint8_t b = data[i++];
		if (b < 0xa0) {
			const char *t = tokens[b % (sizeof tokens / sizeof tokens[0])];
			PUT(t, strlen(t));
		} else if (b < 0xf0) {
			size_t len = (b & 0x0f) + 1;
			for (size_t k = 0; k < len && i < size; k++, i++)
				if (data[i])
					PUT((const char *)data + i, 1);
		} else {
			/* a long name: 255 bytes is NAME_MAX, 256 must fail */
			size_t len = 250 + (b & 0x0f);
			for (size_t k = 0; k < len; k++)
				PUT("n", 1);
		}
		if (i < size) {
			const char *s = seps[data[i++] % (sizeof seps / sizeof seps[0])];
			PUT(s, strlen(s));
		}
	}
done:
	out[n] = '\0';
	return n;
#undef PUT
}

static bool has_dotdot(const char *p)
{
	for (;;) {
		const char *end = strchrnul(p, '/');
		if (end - p == 2 && p[0] == '.' && p[1] == '.')
			return true;
		if (!*end)
			return false;
		p = end + 1;
	}
}

/* What entry_suffix must accept: "llmbox", then "/" and components that are neither empty, "."
 * nor "..", except one trailing slash. */
static bool entry_name_ok(const char *name, const char **suffix)
{
	if (strncmp(name, "llmbox", 6) != 0 || (name[6] != '\0' && name[6] != '/'))
		return false;
	const char *rest = name[6] == '/' ? name + 7 : name + 6;
	*suffix = rest;
	if (!*rest)
		return true;
	for (const char *p = rest;;) {
		const char *end = strchrnul(p, '/');
		size_t len = (size_t)(end - p);
		bool last = *end == '\0';
		if (len == 0)
			return last && p != rest;
		if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (last)
			return true;
		p = end + 1;
	}
}

static void check_entry_suffix(const char *name)
{
	const char *want = NULL, *got = entry_suffix(ROOT, name);
	bool ok = entry_name_ok(name, &want);
	if ((got != NULL) != ok || (got && got != want)) {
		fprintf(stderr, "fuzz_paths: entry_suffix(\"%s\") = %s, want %s\n", name,
			got ? got : "NULL", ok ? want : "NULL");
		abort();
	}
}

static void exercise(const char *path, unsigned mode)
{
	/* As the transfer child does for a copy into the jail, then for a copy out of it. */
	if (lb_mkdirs_beneath(scr.ws_fd, path, 0755) == 0) {
		int fd = lb_open_beneath(scr.ws_fd, path, O_WRONLY | O_CREAT | O_TRUNC, mode);
		if (fd >= 0) {
			scratch_check_fd(fd, path);
			close(fd);
		}
	}
	int fd = lb_open_beneath(scr.ws_fd, path, O_RDONLY, 0);
	if (fd >= 0) {
		scratch_check_fd(fd, path);
		close(fd);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[8192];
	if (size < 3)
		return 0;
	unsigned flags = data[0] | (unsigned)data[1] << 8;
	build_path(data + 2, size - 2, path, sizeof path);
	size_t slashes = 0;
	for (const char *p = path; *p; p++)
		slashes += *p == '/';
	if (slashes > 64) /* MAX_DEPTH of transfer.c; keeps each input fast */
		return 0;

	bool allow_tmp = flags & 0x4000;
	const char *base = NULL, *rel = NULL;
	lb_error err = {0};
	int r = jail_relative(path, allow_tmp, &base, &rel, &err);
	const char *q = path;
	bool tmp = allow_tmp && strncmp(q, "/tmp/", 5) == 0;
	bool outside = q[0] == '/' && strncmp(q, "/sandbox/", 9) != 0 && !tmp;
	if (q[0] == '/' && !outside)
		q += tmp ? 5 : 9;
	while (*q == '/')
		q++;
	bool want = !outside && *q && !has_dotdot(q);
	if ((r == 0) != want) {
		fprintf(stderr, "fuzz_paths: jail_relative(\"%s\", %d) = %d, want %s (%s)\n", path,
			allow_tmp, r, want ? "accepted" : "refused", r ? err.msg : "");
		abort();
	}
	if (r == 0) {
		if (rel != q || rel[0] == '/' || has_dotdot(rel) ||
		    strcmp(base, tmp ? "/tmp" : "/sandbox") != 0)
			abort();
		exercise(rel, flags & 07777);
	} else if (!err.msg[0] || !memchr(err.msg, '\0', sizeof err.msg)) {
		abort();
	}
	check_entry_suffix(path);
	/* The primitives must hold on their own too, whatever they are given. */
	if (flags & 0x8000)
		exercise(path, 0600);
	scratch_check(path);
	scratch_reset();
	return 0;
}
