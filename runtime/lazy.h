/* libarchive and libcrypto, loaded when first needed. Linked in, they (and libxml2 and ICU,
 * which Debian's libarchive brings) cost every llmbox process ~2.5 ms before main(), and most
 * runs never copy a file, read an archive or hash anything. Code that uses them calls
 * lb_lazy_archive() or lb_lazy_crypto() first (before any fork: a jail-side child uses the
 * parent's copy, as the jail may not have the host's libraries); the calls below then go through
 * the table this fills. Each function's type is its header's (__typeof__), so the table cannot
 * disagree with the library. */
#ifndef LLMBOX_LAZY_H
#define LLMBOX_LAZY_H

#include "internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

/* clang-format off */
#define LB_ARCHIVE_FUNCS(X) \
	X(archive_entry_clear) \
	X(archive_entry_filetype) \
	X(archive_entry_free) \
	X(archive_entry_hardlink) \
	X(archive_entry_new) \
	X(archive_entry_pathname) \
	X(archive_entry_perm) \
	X(archive_entry_set_filetype) \
	X(archive_entry_set_gid) \
	X(archive_entry_set_mtime) \
	X(archive_entry_set_pathname) \
	X(archive_entry_set_perm) \
	X(archive_entry_set_size) \
	X(archive_entry_set_uid) \
	X(archive_entry_symlink) \
	X(archive_errno) \
	X(archive_error_string) \
	X(archive_read_data) \
	X(archive_read_data_block) \
	X(archive_read_free) \
	X(archive_read_new) \
	X(archive_read_next_header) \
	X(archive_read_open_fd) \
	X(archive_read_support_filter_all) \
	X(archive_read_support_format_tar) \
	X(archive_set_error) \
	X(archive_write_close) \
	X(archive_write_data) \
	X(archive_write_finish_entry) \
	X(archive_write_free) \
	X(archive_write_header) \
	X(archive_write_new) \
	X(archive_write_open) \
	X(archive_write_set_bytes_in_last_block) \
	X(archive_write_set_format_pax_restricted)
/* clang-format on */

/* clang-format off */
#define LB_CRYPTO_FUNCS(X) \
	X(EVP_Digest) \
	X(EVP_DigestFinal_ex) \
	X(EVP_DigestInit_ex) \
	X(EVP_DigestUpdate) \
	X(EVP_MD_CTX_free) \
	X(EVP_MD_CTX_new) \
	X(EVP_sha256)
/* clang-format on */

struct lb_lazy_api {
#define LB_LAZY_FIELD(f) __typeof__(&f) p_##f;
	LB_ARCHIVE_FUNCS(LB_LAZY_FIELD)
	LB_CRYPTO_FUNCS(LB_LAZY_FIELD)
#undef LB_LAZY_FIELD
};
extern struct lb_lazy_api lb_lazy;

/* 0, or -1 with err naming the library and what dlopen said */
int lb_lazy_archive(lb_error *err);
int lb_lazy_crypto(lb_error *err);

#ifndef LB_LAZY_TABLE
#define archive_entry_clear			(*lb_lazy.p_archive_entry_clear)
#define archive_entry_filetype			(*lb_lazy.p_archive_entry_filetype)
#define archive_entry_free			(*lb_lazy.p_archive_entry_free)
#define archive_entry_hardlink			(*lb_lazy.p_archive_entry_hardlink)
#define archive_entry_new			(*lb_lazy.p_archive_entry_new)
#define archive_entry_pathname			(*lb_lazy.p_archive_entry_pathname)
#define archive_entry_perm			(*lb_lazy.p_archive_entry_perm)
#define archive_entry_set_filetype		(*lb_lazy.p_archive_entry_set_filetype)
#define archive_entry_set_gid			(*lb_lazy.p_archive_entry_set_gid)
#define archive_entry_set_mtime			(*lb_lazy.p_archive_entry_set_mtime)
#define archive_entry_set_pathname		(*lb_lazy.p_archive_entry_set_pathname)
#define archive_entry_set_perm			(*lb_lazy.p_archive_entry_set_perm)
#define archive_entry_set_size			(*lb_lazy.p_archive_entry_set_size)
#define archive_entry_set_uid			(*lb_lazy.p_archive_entry_set_uid)
#define archive_entry_symlink			(*lb_lazy.p_archive_entry_symlink)
#define archive_errno				(*lb_lazy.p_archive_errno)
#define archive_error_string			(*lb_lazy.p_archive_error_string)
#define archive_read_data			(*lb_lazy.p_archive_read_data)
#define archive_read_data_block			(*lb_lazy.p_archive_read_data_block)
#define archive_read_free			(*lb_lazy.p_archive_read_free)
#define archive_read_new			(*lb_lazy.p_archive_read_new)
#define archive_read_next_header		(*lb_lazy.p_archive_read_next_header)
#define archive_read_open_fd			(*lb_lazy.p_archive_read_open_fd)
#define archive_read_support_filter_all		(*lb_lazy.p_archive_read_support_filter_all)
#define archive_read_support_format_tar		(*lb_lazy.p_archive_read_support_format_tar)
#define archive_set_error			(*lb_lazy.p_archive_set_error)
#define archive_write_close			(*lb_lazy.p_archive_write_close)
#define archive_write_data			(*lb_lazy.p_archive_write_data)
#define archive_write_finish_entry		(*lb_lazy.p_archive_write_finish_entry)
#define archive_write_free			(*lb_lazy.p_archive_write_free)
#define archive_write_header			(*lb_lazy.p_archive_write_header)
#define archive_write_new			(*lb_lazy.p_archive_write_new)
#define archive_write_open			(*lb_lazy.p_archive_write_open)
#define archive_write_set_bytes_in_last_block	(*lb_lazy.p_archive_write_set_bytes_in_last_block)
#define archive_write_set_format_pax_restricted (*lb_lazy.p_archive_write_set_format_pax_restricted)
#define EVP_Digest				(*lb_lazy.p_EVP_Digest)
#define EVP_DigestFinal_ex			(*lb_lazy.p_EVP_DigestFinal_ex)
#define EVP_DigestInit_ex			(*lb_lazy.p_EVP_DigestInit_ex)
#define EVP_DigestUpdate			(*lb_lazy.p_EVP_DigestUpdate)
#define EVP_MD_CTX_free				(*lb_lazy.p_EVP_MD_CTX_free)
#define EVP_MD_CTX_new				(*lb_lazy.p_EVP_MD_CTX_new)
#define EVP_sha256				(*lb_lazy.p_EVP_sha256)
#endif

#endif
