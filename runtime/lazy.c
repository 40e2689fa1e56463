/* Loading libarchive and libcrypto when first needed: see lazy.h. */
#define _GNU_SOURCE
#define LB_LAZY_TABLE
#include "lazy.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>

struct lb_lazy_api lb_lazy;

#define LB_LAZY_NAME(f) #f,
#define LB_LAZY_SLOT(f) (void **)&lb_lazy.p_##f,

struct lib {
	bool loaded;
	const char *const *sonames; /* tried in order */
	const char *what;	    /* in errors: the library, what needs it, how to get it */
	const char *const *symbols;
	void **const *slots;
	size_t n;
};

static int load(struct lib *l, lb_error *err)
{
	if (l->loaded)
		return 0;
	void *h = NULL;
	const char *why = "not found";
	for (const char *const *s = l->sonames; *s && !h; s++)
		if (!(h = dlopen(*s, RTLD_NOW | RTLD_LOCAL)))
			why = dlerror();
	if (!h)
		return lb_fail(err, ENOENT, "cannot load %s: %s", l->what, why);
	for (size_t i = 0; i < l->n; i++)
		if (!(*l->slots[i] = dlsym(h, l->symbols[i])))
			return lb_fail(err, ENOENT, "%s has no %s", l->what, l->symbols[i]);
	l->loaded = true;
	return 0;
}

int lb_lazy_archive(lb_error *err)
{
	static const char *const sonames[] = {"libarchive.so.13", "libarchive.so", NULL};
	static const char *const symbols[] = {LB_ARCHIVE_FUNCS(LB_LAZY_NAME)};
	static void **const slots[] = {LB_ARCHIVE_FUNCS(LB_LAZY_SLOT)};
	static struct lib l = {
		false,	 sonames, "libarchive (copies and images need it: install libarchive13)",
		symbols, slots,	  sizeof symbols / sizeof *symbols};
	return load(&l, err);
}

int lb_lazy_crypto(lb_error *err)
{
	static const char *const sonames[] = {"libcrypto.so.3", "libcrypto.so", NULL};
	static const char *const symbols[] = {LB_CRYPTO_FUNCS(LB_LAZY_NAME)};
	static void **const slots[] = {LB_CRYPTO_FUNCS(LB_LAZY_SLOT)};
	static struct lib l = {false,	sonames, "libcrypto (SHA-256 needs it: install libssl3)",
			       symbols, slots,	 sizeof symbols / sizeof *symbols};
	return load(&l, err);
}
