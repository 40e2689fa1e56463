/* Fuzz target "resolve": the PATH search the supervisor does for argv[0] before execve
 * (lb_resolve_command in chain_child.c, reached by including that file unchanged), with a
 * fuzzed command name and a fuzzed environment, against real files made under $LB_FUZZ_TMP:
 * bin/a and bin/ab (executable), bin/noexec (not executable), bin/dir/ (a directory).
 *
 * What must hold: a name with a slash is used as is; otherwise the result is NULL or exactly
 * "ELEMENT/NAME" for a non-empty element of the environment's PATH (the built-in default when
 * there is none), NUL-terminated inside the buffer, naming an executable regular file.
 *
 * Known, reported, not fixed yet (LB_FUZZ_SKIP_KNOWN relaxes these checks):
 *  - path-truncation: an element long enough to truncate "ELEMENT/NAME" in the 4096-byte
 *    buffer makes the search return a different, shorter name (bin/ab for "abxxxxx");
 *  - dir-match: a directory named like the command matches (access(X_OK) is true for
 *    directories), so it shadows the real program later in PATH and the run fails with 126;
 *    so does an empty argv[0]. */
#include "../runtime/chain_child.c"

#include <limits.h>
#include "harness.h"
#include "input.h"

static char dir[PATH_MAX], bin[PATH_MAX + 8];
static bool skip_truncation, skip_dir_match;

static void cleanup(void)
{
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (dir[0] && system(cmd) != 0)
		fprintf(stderr, "fuzz_resolve: could not remove %s\n", dir);
}

static void make_file(const char *name, unsigned mode)
{
	char p[PATH_MAX + 32];
	snprintf(p, sizeof p, "%s/%s", bin, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, mode);
	if (fd < 0 || fchmod(fd, mode) < 0)
		abort();
	close(fd);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	skip_truncation = skip_known_bug("path-truncation");
	skip_dir_match = skip_known_bug("dir-match");
	const char *base = getenv("LB_FUZZ_TMP");
	base = base && *base ? base : "build/fuzz-tmp";
	mkdir(base, 0755);
	char *real = realpath(base, NULL);
	if (!real) {
		fprintf(stderr, "fuzz_resolve: directory %s: %s (set LB_FUZZ_TMP)\n", base,
			strerror(errno));
		abort();
	}
	snprintf(dir, sizeof dir, "%s/resolve-%d", real, (int)getpid());
	free(real);
	snprintf(bin, sizeof bin, "%s/bin", dir);
	if (mkdir(dir, 0755) < 0 || mkdir(bin, 0755) < 0)
		abort();
	atexit(cleanup);
	make_file("a", 0755);
	make_file("ab", 0755);
	make_file("noexec", 0644);
	char d[PATH_MAX + 16];
	snprintf(d, sizeof d, "%s/dir", bin);
	if (mkdir(d, 0755) < 0)
		abort();
	return 0;
}

/* Appends to a string buffer; silently stops at its end. */
struct sb {
	char *s;
	size_t n, cap;
};

static void put(struct sb *b, const char *s, size_t len)
{
	if (b->n + len >= b->cap)
		len = b->cap - b->n - 1;
	memcpy(b->s + b->n, s, len);
	b->n += len;
	b->s[b->n] = '\0';
}

static void puts_(struct sb *b, const char *s)
{
	put(b, s, strlen(s));
}

static void put_raw(struct sb *b, struct in *in, size_t max)
{
	size_t len = u8(in) % max;
	for (size_t i = 0; i < len && in->n; i++) {
		char c = (char)u8(in);
		if (c)
			put(b, &c, 1);
	}
}

static void gen_path_value(struct sb *b, struct in *in)
{
	size_t n = u8(in) % 6;
	for (size_t i = 0; i < n; i++) {
		if (i)
			puts_(b, ":");
		unsigned k = u8(in) % 12;
		switch (k) {
		case 0:
		case 1:
			puts_(b, bin);
			break;
		case 2:
			puts_(b, bin);
			puts_(b, "/");
			break;
		case 3: { /* bin padded to 4080..4095 bytes: ELEMENT/NAME meets the buffer's end */
			size_t start = b->n, want = 4080 + u8(in) % 16;
			puts_(b, bin);
			while (b->n - start + 2 <= want && b->n + 3 < b->cap)
				puts_(b, "/.");
			if (b->n - start < want)
				puts_(b, "/");
			break;
		}
		case 4:
			puts_(b, "/usr/bin");
			break;
		case 5:
			puts_(b, "");
			break;
		case 6:
			puts_(b, ".");
			break;
		case 7:
			puts_(b, "relative/bin");
			break;
		case 8:
			puts_(b, "/nonexistent");
			break;
		case 9:
			puts_(b, bin);
			puts_(b, "/noexec");
			break;
		default:
			put_raw(b, in, 24);
			break;
		}
	}
}

/* The PATH the search should use: the last PATH= entry, as lb_resolve_command reads it. */
static const char *effective_path(char *const *envp)
{
	const char *path = "/usr/local/bin:/usr/bin:/bin";
	for (char *const *e = envp; *e; e++)
		if (strncmp(*e, "PATH=", 5) == 0)
			path = *e + 5;
	return path;
}

static bool is_element(const char *path, const char *elem, size_t len)
{
	while (*path) {
		const char *end = strchrnul(path, ':');
		if ((size_t)(end - path) == len && len && !memcmp(path, elem, len))
			return true;
		path = *end ? end + 1 : end;
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char envbuf[6][12288], cmdbuf[8192], buf[4096];
	static const char *const names[] = {"a",  "ab", "noexec", "dir",     "",  ".",	 "..",
					    "sh", "ls", "a/b",	  "/bin/sh", "A", "a:b", "dir/"};
	static const char *const junk[] = {"PATH",	 "PATH=",  "path=/bin",
					   "XPATH=/bin", "PATH==", "=PATH=/bin"};
	struct in in = {data, size};
	char *envp[7];
	size_t n_env = u8(&in) % 7;
	for (size_t i = 0; i < n_env; i++) {
		struct sb b = {envbuf[i], 0, sizeof envbuf[i]};
		envbuf[i][0] = '\0';
		unsigned k = u8(&in) % 8;
		if (k < 5) {
			puts_(&b, "PATH=");
			gen_path_value(&b, &in);
		} else if (k < 7) {
			puts_(&b, junk[u8(&in) % (sizeof junk / sizeof junk[0])]);
		} else {
			put_raw(&b, &in, 32);
		}
		envp[i] = envbuf[i];
	}
	envp[n_env] = NULL;
	struct sb c = {cmdbuf, 0, sizeof cmdbuf};
	cmdbuf[0] = '\0';
	unsigned k = u8(&in);
	if (k < 200) {
		puts_(&c, names[k % (sizeof names / sizeof names[0])]);
		for (size_t j = 0, extra = u8(&in) % 4 == 0 ? u8(&in) : 0; j < extra; j++)
			puts_(&c, "x");
	} else {
		put_raw(&c, &in, 64);
	}

	memset(buf, 'z', sizeof buf);
	const char *got = lb_resolve_command(cmdbuf, (const char *const *)envp, buf, sizeof buf);
	if (strchr(cmdbuf, '/')) {
		if (got != cmdbuf)
			abort();
		return 0;
	}
	if (!got)
		return 0;
	if (got != buf || !memchr(buf, '\0', sizeof buf))
		abort();
	size_t cl = strlen(cmdbuf), bl = strlen(buf);
	bool whole = bl > cl && buf[bl - cl - 1] == '/' && !strcmp(buf + bl - cl, cmdbuf) &&
		     is_element(effective_path(envp), buf, bl - cl - 1);
	if (!whole && !skip_truncation) {
		fprintf(stderr, "fuzz_resolve: \"%s\" resolved to \"%.200s...\" (%zu bytes)\n",
			cmdbuf, buf, bl);
		abort();
	}
	struct stat st;
	if (stat(buf, &st) < 0 ||
	    (!S_ISREG(st.st_mode) && !(skip_dir_match && S_ISDIR(st.st_mode)))) {
		fprintf(stderr, "fuzz_resolve: \"%s\" resolved to \"%.200s\", not a file\n", cmdbuf,
			buf);
		abort();
	}
	return 0;
}
