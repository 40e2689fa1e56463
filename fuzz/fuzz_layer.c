/* Fuzz target "layer": lb_layer_apply, an image layer (an untrusted tar) applied onto a root
 * filesystem being built. Most inputs become a well-formed archive through libarchive's writer
 * (entry names made of tokens: "..", absolute names, whiteouts, names below the fixtures' links;
 * every entry type; fuzzed modes, link targets and sizes), then optionally damaged; some are fed
 * raw. Each input gets a fresh root holding links that lead out of it (to an "outside" directory
 * next to it, relatively and absolutely) and a file. What must hold:
 *   - nothing is created or changed outside the root: "outside" stays empty;
 *   - no device node, FIFO or socket is created, and no file or directory has a setuid, setgid
 *     or sticky bit;
 *   - the bytes of the regular files created stay within the limit;
 *   - no sanitizer report; a failure comes back as -1 with a NUL-terminated message. */
#define _GNU_SOURCE
#include "../runtime/internal.h"
#include "harness.h"
#include "input.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

static char base[PATH_MAX], outside[PATH_MAX + 16], root[PATH_MAX + 16];

static const char *const tokens[] = {
	".wh...",
	".wh..",
	".wh.",
	"a",
	"b",
	"usr",
	"file",
	"link_out",
	"link_abs",
	"..",
	".",
	"",
	".wh.a",
	".wh.file",
	".wh..wh..opq",
	".wh.link_out",
	"x y",
	"\xff",
	"etc",
	".wh..wh.",
	"link_in",
	"-",
	"n\n",
};

static void gen_name(struct in *in, char *out, size_t cap)
{
	static const char *const prefixes[] = {"", "./", "/", "../", "link_out/", "link_in/"};
	static const char *const seps[] = {"/", "//", "/./", "/../"};
	unsigned kind = u8(in);
	size_t n = (size_t)snprintf(out, cap, "%s", prefixes[kind % 6]);
	size_t count = 1 + (kind >> 3) % 4;
	for (size_t i = 0; i < count && n < cap; i++) {
		unsigned t = u8(in);
		n += (size_t)snprintf(out + n, cap - n, "%s%s",
				      tokens[t % (sizeof tokens / sizeof tokens[0])],
				      i + 1 < count ? seps[(t >> 5) % 4 ? 0 : u8(in) % 4] : "");
	}
	if (n >= cap)
		out[cap - 1] = '\0';
}

static size_t build_stream(struct in *in, uint8_t *buf, size_t cap)
{
	static const unsigned types[] = {AE_IFREG, AE_IFREG, AE_IFDIR, AE_IFDIR,  AE_IFLNK,
					 AE_IFIFO, AE_IFCHR, AE_IFBLK, AE_IFSOCK, AE_IFREG};
	struct archive *a = archive_write_new();
	if (!a)
		abort();
	switch (u8(in) % 3) {
	case 0:
		archive_write_set_format_pax_restricted(a);
		break;
	case 1:
		archive_write_set_format_gnutar(a);
		break;
	default:
		archive_write_set_format_ustar(a);
		break;
	}
	if (u8(in) % 4 == 0)
		archive_write_add_filter_gzip(a);
	archive_write_set_bytes_in_last_block(a, 1);
	size_t used = 0;
	if (archive_write_open_memory(a, buf, cap, &used) != ARCHIVE_OK)
		abort();
	size_t entries = u8(in) % 12;
	for (size_t i = 0; i < entries && in->n; i++) {
		char name[600];
		gen_name(in, name, sizeof name);
		unsigned t = u8(in);
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, name);
		unsigned type = types[t % (sizeof types / sizeof types[0])];
		archive_entry_set_filetype(e, type);
		archive_entry_set_perm(e, (u8(in) | u8(in) << 8) & 07777);
		if (t & 0x80) {
			char target[600];
			gen_name(in, target, sizeof target);
			archive_entry_set_hardlink(e, target);
		}
		if (type == AE_IFLNK)
			archive_entry_set_symlink(e, t & 0x40 ? "../outside" : outside);
		size_t len = 0;
		if (type == AE_IFREG) {
			unsigned l = u8(in);
			len = l & 0x80 ? (size_t)(l & 0x7f) * 512 : l;
		}
		archive_entry_set_size(e, (la_int64_t)len);
		if (archive_write_header(a, e) == ARCHIVE_OK && len) {
			static uint8_t data[64 * 1024];
			memset(data, 'd', len);
			archive_write_data(a, data, len);
		}
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
	return used;
}

static uint64_t written;

static int check_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	if (flag == FTW_SL || flag == FTW_SLN)
		return 0;
	if (S_ISREG(st->st_mode))
		written += (uint64_t)st->st_size;
	else if (!S_ISDIR(st->st_mode)) {
		fprintf(stderr, "fuzz_layer: %s of type %o was created\n", path,
			st->st_mode & S_IFMT);
		abort();
	}
	if (st->st_mode & 07000) {
		fprintf(stderr, "fuzz_layer: %s has mode %o\n", path, st->st_mode & 07777);
		abort();
	}
	return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void make_root(void)
{
	if (mkdir(root, 0755) < 0)
		abort();
	char p[PATH_MAX + 64];
	snprintf(p, sizeof p, "%s/link_out", root);
	if (symlink("../outside", p) < 0)
		abort();
	snprintf(p, sizeof p, "%s/link_abs", root);
	if (symlink(outside, p) < 0)
		abort();
	snprintf(p, sizeof p, "%s/link_in", root);
	if (symlink("usr", p) < 0)
		abort();
	snprintf(p, sizeof p, "%s/usr", root);
	if (mkdir(p, 0755) < 0)
		abort();
	snprintf(p, sizeof p, "%s/file", root);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		abort();
	close(fd);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *tmp = getenv("LB_FUZZ_TMP");
	tmp = tmp && *tmp ? tmp : "build/fuzz-tmp";
	mkdir(tmp, 0755);
	char *real = realpath(tmp, NULL);
	if (!real)
		abort();
	snprintf(base, sizeof base, "%s/layer-%d", real, (int)getpid());
	free(real);
	snprintf(outside, sizeof outside, "%s/outside", base);
	snprintf(root, sizeof root, "%s/root", base);
	if (mkdir(base, 0755) < 0 || mkdir(outside, 0755) < 0)
		abort();
	umask(0);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t stream[1 << 20];
	static const uint64_t maxes[] = {1 << 20, 0, 100, 1000, 65536};
	if (size < 2)
		return 0;
	struct in in = {data, size};
	unsigned how = u8(&in);
	uint64_t max = maxes[(how >> 2) % 5];
	size_t len;
	if (how % 4 == 3) {
		len = in.n < sizeof stream ? in.n : sizeof stream;
		memcpy(stream, in.p, len);
	} else {
		len = build_stream(&in, stream, sizeof stream);
		while (in.n >= 3 && len) {
			size_t off = ((size_t)u8(&in) << 8 | u8(&in)) * 3 % len;
			unsigned v = u8(&in);
			if (v == 0)
				len = off;
			else
				stream[off] ^= (uint8_t)v;
		}
	}
	int fd = memfd_create("layer", MFD_CLOEXEC);
	if (fd < 0 || lb_write_all(fd, stream, len) < 0 || lseek(fd, 0, SEEK_SET) < 0)
		abort();
	make_root();
	int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		abort();
	lb_error err;
	memset(&err, 'x', sizeof err);
	uint64_t total = 0;
	char skipped[64] = ""; /* small: the list must truncate safely */
	int rc = lb_layer_apply(fd, rfd, max, &total, skipped, sizeof skipped, &err);
	close(fd);
	close(rfd);
	if (rc != 0 && (rc != -1 || !memchr(err.msg, '\0', sizeof err.msg) || !err.msg[0]))
		abort();
	/* next to the root, nothing changed: "outside" is there and empty, nothing else came */
	int entries = 0, around = 0;
	DIR *d = opendir(outside);
	if (!d)
		abort();
	for (struct dirent *e; (e = readdir(d));)
		entries += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	d = opendir(base);
	if (!d)
		abort();
	for (struct dirent *e; (e = readdir(d));)
		around += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	if (entries || around != 2) {
		fprintf(stderr, "fuzz_layer: something changed outside the root\n");
		abort();
	}
	written = 0;
	if (nftw(root, check_one, 16, FTW_PHYS) < 0)
		abort();
	if (max && written > max) {
		fprintf(stderr, "fuzz_layer: %llu bytes written with a limit of %llu\n",
			(unsigned long long)written, (unsigned long long)max);
		abort();
	}
	if (nftw(root, remove_one, 16, FTW_PHYS | FTW_DEPTH) < 0)
		abort();
	return 0;
}
