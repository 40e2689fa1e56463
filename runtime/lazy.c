/* Loading libarchive and libcrypto when first needed: see lazy.h. */
#define _GNU_SOURCE
#define LB_LAZY_TABLE
#include "lazy.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>

struct lb_lazy_api lb_lazy;

/* dlopen's handle for the first of `names` that loads, or NULL with the last error in err */
static void *open_one(const char *const *names, const char *what, lb_error *err)
{
	const char *why = "not found";
	for (; *names; names++) {
		void *h = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
		if (h)
			return h;
		why = dlerror();
	}
	lb_fail(err, ENOENT, "cannot load %s: %s", what, why);
	return NULL;
}

static int find(void *h, const char *name, void **slot, const char *what, lb_error *err)
{
	*slot = dlsym(h, name);
	if (!*slot)
		return lb_fail(err, ENOENT, "%s has no %s", what, name);
	return 0;
}

int lb_lazy_archive(lb_error *err)
{
	static bool loaded;
	if (loaded)
		return 0;
	static const char *const names[] = {"libarchive.so.13", "libarchive.so", NULL};
	const char *what = "libarchive (copies and images need it: install libarchive13)";
	void *h = open_one(names, what, err);
	if (!h)
		return -1;
#define LB_LAZY_FIND(f)                                                                            \
	if (find(h, #f, (void **)&lb_lazy.p_##f, what, err) < 0)                                   \
		return -1;
	LB_ARCHIVE_FUNCS(LB_LAZY_FIND)
	loaded = true;
	return 0;
}

int lb_lazy_crypto(lb_error *err)
{
	static bool loaded;
	if (loaded)
		return 0;
	static const char *const names[] = {"libcrypto.so.3", "libcrypto.so", NULL};
	const char *what = "libcrypto (SHA-256 needs it: install libssl3)";
	void *h = open_one(names, what, err);
	if (!h)
		return -1;
	LB_CRYPTO_FUNCS(LB_LAZY_FIND)
#undef LB_LAZY_FIND
	loaded = true;
	return 0;
}
