/* Fuzz target "tar": receive_tree, the receiving side of file transfer (static in transfer.c,
 * reached by including that file unchanged). It reads a tar stream from a pipe and recreates it
 * beneath a directory fd; the stream is untrusted (copy_out reads what the jail side sends, and
 * lb_tar_extract what a container's tar sends: both roots are fuzzed).
 *
 * Most inputs are turned into a well-formed stream by libarchive's writer (several tar dialects,
 * entry names made of tokens, every entry type, fuzzed permissions and sizes), then optionally
 * damaged; some are fed raw. The stream goes through a pipe into receive_tree() against the
 * scratch workspace of scratch.c, whose symlinks lead out of it. What must hold:
 *   - nothing is created, changed or followed outside the workspace, fixtures stay as they were;
 *   - only regular files and directories are created, never with setuid/setgid/sticky bits
 *     unless the caller asked for that mode;
 *   - with a byte limit, no more than the limit is written;
 *   - no sanitizer report; failures come back as -1 with a NUL-terminated message.
 * The same stream then goes to receive_entries twice, as lb_collect reads it (root "llmbox") and
 * as lb_tar_entries reads a foreign archive (the first entry names the root): every name it
 * hands on is relative with no "." or ".." component, and with a limit no more than the limit
 * is handed on. */
#include "../runtime/transfer.c"
#include "scratch.c"
#include "harness.h"
#include "input.h"

struct collected {
	uint64_t total;
};

static int check_entry(void *ud, const char *name, const char *data, size_t len)
{
	struct collected *c = ud;
	(void)data;
	if (name[0] == '/')
		abort();
	for (const char *p = name; *p;) {
		const char *end = strchrnul(p, '/');
		size_t n = (size_t)(end - p);
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			abort();
		p = *end ? end + 1 : end;
	}
	c->total += len;
	return 0;
}

/* The read end of a pipe holding the stream (cut to what the pipe can hold without a reader). */
static int stream_pipe(const uint8_t *stream, size_t *len)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		abort();
	int cap = fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
	if (cap < 65536)
		cap = 65536;
	if (*len > (size_t)cap)
		*len = (size_t)cap;
	if (lb_write_all(p[1], stream, *len) < 0)
		abort();
	close(p[1]);
	return p[0];
}

/* receive_entries on the same bytes: names and the limit (see above). */
static void check_collect(const uint8_t *stream, size_t len, const char *root, uint64_t max)
{
	int in = stream_pipe(stream, &len);
	struct collected c = {0};
	lb_error err;
	memset(&err, 'x', sizeof err);
	int rc = receive_entries(in, root, max, check_entry, &c, &err);
	close(in);
	if (rc != 0 && (rc != -1 || !memchr(err.msg, '\0', sizeof err.msg) || !err.msg[0]))
		abort();
	if (max && c.total > max) {
		fprintf(stderr, "fuzz_tar: %llu bytes collected with a limit of %llu\n",
			(unsigned long long)c.total, (unsigned long long)max);
		abort();
	}
}

static const char *const tokens[] = {
	"a",	   "b",	 "sub", "file", "link_out", "link_abs", "link_in", "link_self",
	"link_up", "..", ".",	"",	"outside",  "llmbox",	"new",	   "x y",
	"\xff",	   "-",	 "\\",	"con",	"...",	    "~",	"n\n",	   "dev",
};

/* Builds an entry name: a prefix, then tokens joined by separators. */
static void gen_name(struct in *in, char *out, size_t cap)
{
	static const char *const prefixes[] = {"llmbox",    "llmbox/",	"llmbox//", "/llmbox/",
					       "./llmbox/", "llmboxx/", "",	    "../llmbox/"};
	static const char *const seps[] = {"/", "//", "/./", "/../"};
	size_t n = 0;
	unsigned kind = u8(in);
	unsigned k = kind % 16; /* mostly under ROOT */
	const char *pre = prefixes[k < 8 ? k % 2 : k - 8];
	size_t count = (kind >> 3) % 6;
	n = (size_t)snprintf(out, cap, "%s", pre);
	for (size_t i = 0; i < count && n < cap; i++) {
		unsigned t = u8(in);
		if (t >= 0xf0) { /* a long component: 255 is NAME_MAX */
			for (size_t j = 0; j < 250u + (t & 15) && n + 1 < cap; j++)
				out[n++] = 'L';
			out[n] = '\0';
		} else {
			n += (size_t)snprintf(out + n, cap - n, "%s%s",
					      tokens[t % (sizeof tokens / sizeof tokens[0])],
					      i + 1 < count ? seps[(t >> 5) % 4 ? 0 : u8(in) % 4]
							    : "");
		}
	}
	if (n >= cap)
		out[cap - 1] = '\0';
	if (u8(in) % 8 == 0 && strlen(out) + 1 < cap)
		strcat(out, "/");
}

static size_t build_stream(struct in *in, uint8_t *buf, size_t cap)
{
	static const unsigned types[] = {AE_IFREG, AE_IFREG, AE_IFDIR, AE_IFDIR,  AE_IFLNK,
					 AE_IFIFO, AE_IFCHR, AE_IFBLK, AE_IFSOCK, AE_IFREG};
	struct archive *a = archive_write_new();
	if (!a)
		abort();
	switch (u8(in) % 5) {
	case 0:
		archive_write_set_format_pax_restricted(a); /* what send_tree writes */
		break;
	case 1:
		archive_write_set_format_ustar(a);
		break;
	case 2:
		archive_write_set_format_gnutar(a);
		break;
	case 3:
		archive_write_set_format_pax(a);
		break;
	default:
		archive_write_set_format_v7tar(a);
		break;
	}
	archive_write_set_bytes_in_last_block(a, 1);
	size_t used = 0;
	if (archive_write_open_memory(a, buf, cap, &used) != ARCHIVE_OK)
		abort();
	size_t entries = u8(in) % 10;
	for (size_t i = 0; i < entries && in->n; i++) {
		char name[1200];
		gen_name(in, name, sizeof name);
		unsigned t = u8(in);
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, name);
		unsigned type = types[t % (sizeof types / sizeof types[0])];
		archive_entry_set_filetype(e, type);
		archive_entry_set_perm(e, (u8(in) | u8(in) << 8) & 07777);
		archive_entry_set_uid(e, u8(in));
		if (t & 0x80) { /* a hard link: tar stores it as a file with a link name */
			char target[64];
			snprintf(target, sizeof target, "%s",
				 tokens[u8(in) % (sizeof tokens / sizeof tokens[0])]);
			archive_entry_set_hardlink(e, target);
		}
		if (type == AE_IFLNK)
			archive_entry_set_symlink(e, t & 0x40 ? "../outside" : "/");
		size_t len = 0;
		uint8_t fill = 0;
		if (type == AE_IFREG) {
			unsigned l = u8(in);
			len = l & 0x80 ? (size_t)(l & 0x7f) * 1024 : l;
			fill = (uint8_t)u8(in);
		}
		archive_entry_set_size(e, (la_int64_t)len);
		if (archive_write_header(a, e) == ARCHIVE_OK && len) {
			static uint8_t data[128 * 1024];
			memset(data, fill, len);
			archive_write_data(a, data, len);
		}
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
	return used;
}

/* Sum of the sizes of the regular files an input left in ws (the fixture "file" included). */
static uint64_t bytes_written(int dirfd, bool check_modes, int depth)
{
	uint64_t total = 0;
	DIR *d = fdopendir(dup(dirfd));
	if (!d)
		abort();
	rewinddir(d); /* the dup shares its position with dirfd, left at the end last time */
	for (struct dirent *e; (e = readdir(d));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			abort();
		if (S_ISLNK(st.st_mode)) {
			bool fixture = depth == 0 ? strncmp(e->d_name, "link_", 5) == 0
						  : !strcmp(e->d_name, "link_up");
			if (!fixture) {
				fprintf(stderr, "fuzz_tar: a symlink %s was created\n", e->d_name);
				abort();
			}
		} else if (S_ISREG(st.st_mode)) {
			total += (uint64_t)st.st_size;
			if (check_modes && (st.st_mode & 07000)) {
				fprintf(stderr, "fuzz_tar: %s has mode %o\n", e->d_name,
					st.st_mode & 07777);
				abort();
			}
		} else if (S_ISDIR(st.st_mode)) {
			if (st.st_mode & 07000) {
				fprintf(stderr, "fuzz_tar: directory %s has mode %o\n", e->d_name,
					st.st_mode & 07777);
				abort();
			}
			int c = openat(dirfd, e->d_name,
				       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (c < 0) { /* mode 0 directories are not created: perm | 0700 */
				fprintf(stderr, "fuzz_tar: cannot open directory %s\n", e->d_name);
				abort();
			}
			total += bytes_written(c, check_modes, depth + 1);
			close(c);
		} else {
			fprintf(stderr, "fuzz_tar: %s of type %o was created\n", e->d_name,
				st.st_mode & S_IFMT);
			abort();
		}
	}
	closedir(d);
	return total;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	scratch_init("tar");
	umask(0);
	/* receive_tree and receive_entries are reached past the entry points that load libarchive
	 * (runtime/lazy.c); so are this file's own archive calls, which go through the same table
	 */
	lb_error err;
	if (lb_lazy_archive(&err) < 0) {
		fprintf(stderr, "fuzz tar: %s\n", err.msg);
		abort();
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t stream[1 << 20];
	static const char *const dests[] = {"",	      "d",	     "sub/d", "link_out/d",
					    "file/x", ".f.llmbox-1", "a/b/c", "link_in"};
	static const uint64_t maxes[] = {0, 0, 1, 100, 1000, 65536};
	static const unsigned modes[] = {0, 0, 0600, 0755, 04755, 0};
	if (size < 3)
		return 0;
	struct in in = {data, size};
	unsigned how = u8(&in), opts = u8(&in);
	bool to_file = how & 4;
	const char *dest = dests[(how >> 3) % 8];
	/* Our own streams (root "llmbox"), or a foreign archive whose first entry names the root,
	 * as lb_tar_extract receives a container's (copy_out on the engine backends). */
	const char *root = how & 0x40 ? NULL : ROOT;
	uint64_t max = maxes[(opts >> 3) % 6];
	unsigned file_mode = modes[opts % 6];

	size_t len;
	if (how % 4 == 3) { /* raw bytes */
		len = in.n < sizeof stream ? in.n : sizeof stream;
		memcpy(stream, in.p, len);
	} else {
		len = build_stream(&in, stream, sizeof stream);
		/* then damage it: flip bytes the rest of the input picks, or cut it short */
		while (in.n >= 3 && len) {
			size_t off = ((size_t)u8(&in) << 8 | u8(&in)) * 3 % len;
			unsigned v = u8(&in);
			if (v == 0)
				len = off;
			else
				stream[off] ^= (uint8_t)v;
		}
	}

	int sent = stream_pipe(stream, &len);
	check_collect(stream, len, ROOT, max);
	check_collect(stream, len, NULL, max);

	int sink = -1;
	if (to_file) {
		sink = open(scr.sink, O_WRONLY | O_CLOEXEC);
		if (sink < 0)
			abort();
	}
	lb_error err;
	memset(&err, 'x', sizeof err);
	char skipped[64] = ""; /* small: the list of skipped entries must truncate safely */
	int rc = receive_tree(sent, root, scr.ws_fd, sink, dest, file_mode, max,
			      root ? NULL : skipped, sizeof skipped, &err);
	close(sent);
	if (sink >= 0)
		close(sink);
	if (rc != 0 && (rc != -1 || !memchr(err.msg, '\0', sizeof err.msg) || !err.msg[0]))
		abort();

	scratch_check("a tar stream");
	struct stat st;
	if (stat(scr.sink, &st) < 0)
		abort();
	uint64_t total = bytes_written(scr.ws_fd, file_mode == 0, 0) + (uint64_t)st.st_size;
	if (max && total > max) {
		fprintf(stderr, "fuzz_tar: %llu bytes written with a limit of %llu\n",
			(unsigned long long)total, (unsigned long long)max);
		abort();
	}
	scratch_reset();
	return 0;
}
