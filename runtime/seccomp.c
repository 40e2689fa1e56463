/* seccomp: the policy's syscall rules compiled once (libseccomp) into a BPF program that each
 * sandboxed program loads just before execve (filter.c holds and loads the program). Building
 * happens in the caller; the run's processes only call prctl() with the ready program, so the run
 * helper needs no libseccomp. */
#define _GNU_SOURCE
#include "internal.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <linux/netlink.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

int lb_syscall_number(const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);
	return nr == __NR_SCMP_ERROR ? -1 : nr;
}

const char *lb_syscall_name(int nr)
{
	/* from libseccomp's table: NULL for a number it does not know */
	char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
	if (!name)
		return NULL;
	static _Thread_local char buf[64];
	snprintf(buf, sizeof buf, "%s", name);
	free(name); /* libseccomp returns a malloc'd copy */
	return buf;
}

unsigned long lb_ioctl_number(const char *name)
{
	static const struct {
		const char *name;
		unsigned long nr;
	} known[] = {
		{"TIOCSTI", TIOCSTI},
		{"TIOCLINUX", TIOCLINUX},
		{"TIOCSETD", TIOCSETD},
		{"TIOCCONS", TIOCCONS},
	};
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
		if (strcmp(known[i].name, name) == 0)
			return known[i].nr;
	return 0;
}

/* Address families by name: those Linux has, so that a policy may allow one on purpose. */
static const struct {
	const char *name;
	int family;
} families[] = {
	{"unix", AF_UNIX},
	{"inet", AF_INET},
	{"inet6", AF_INET6},
	{"netlink", AF_NETLINK},
	{"netlink_route", AF_NETLINK},
	{"packet", AF_PACKET},
	{"vsock", AF_VSOCK},
	{"alg", AF_ALG},
	{"xdp", AF_XDP},
	{"tipc", AF_TIPC},
	{"rds", AF_RDS},
	{"bluetooth", AF_BLUETOOTH},
	{"can", AF_CAN},
	{"key", AF_KEY},
	{"appletalk", AF_APPLETALK},
	{"ax25", AF_AX25},
	{"x25", AF_X25},
	{"llc", AF_LLC},
	{"nfc", AF_NFC},
	{"qipcrtr", AF_QIPCRTR},
	{"smc", AF_SMC},
	{"phonet", AF_PHONET},
	{"ieee802154", AF_IEEE802154},
	{"caif", AF_CAIF},
	{"isdn", AF_ISDN},
	{"iucv", AF_IUCV},
	{"rxrpc", AF_RXRPC},
	{"kcm", AF_KCM},
	{"pppox", AF_PPPOX},
	{"atmpvc", AF_ATMPVC},
	{"atmsvc", AF_ATMSVC},
	{"rose", AF_ROSE},
	{"netrom", AF_NETROM},
	{"ipx", AF_IPX},
	{"decnet", AF_DECnet},
	{"netbeui", AF_NETBEUI},
	{"security", AF_SECURITY},
	{"wanpipe", AF_WANPIPE},
	{"irda", AF_IRDA},
	{"ib", AF_IB},
	{"mpls", AF_MPLS},
	{"bridge", AF_BRIDGE},
};

int lb_socket_family(const char *name)
{
	for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
		if (strcmp(families[i].name, name) == 0)
			return families[i].family;
	return -1;
}

static int add_rule(scmp_filter_ctx ctx, uint32_t action, const char *name, lb_error *err)
{
	int nr = lb_syscall_number(name);
	if (nr < 0)
		return lb_fail(
			err, EINVAL,
			"unknown syscall \"%s\" in the policy (not a syscall of this architecture)",
			name);
	int r = seccomp_rule_add(ctx, action, nr, 0);
	/* -EEXIST: the same rule twice (e.g. listed twice); harmless. */
	if (r < 0 && r != -EEXIST)
		return lb_fail(err, -r, "seccomp rule for \"%s\"", name);
	return 0;
}

/* Namespace-creating clone flags: any of them set means refuse. One rule per bit, because a masked
 * compare can only test "all bits of the mask equal the datum". */
static const uint64_t ns_flags[] = {CLONE_NEWUSER, CLONE_NEWNS,	 CLONE_NEWPID,	  CLONE_NEWNET,
				    CLONE_NEWIPC,  CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME};

/* Allow-list mode: is `name` on the list? The conditional allows for clone and ioctl must only
 * be added for calls the policy allows at all (found by the seccomp fuzzer). */
static bool listed(const lb_syscall_policy *p, const char *name)
{
	for (size_t i = 0; i < p->n_allow; i++)
		if (strcmp(p->allow[i], name) == 0)
			return true;
	return false;
}

static int add_clone_rules(scmp_filter_ctx ctx, const lb_syscall_policy *p, uint32_t deny,
			   lb_error *err)
{
	int r;
	/* clone3 passes its flags in a struct that seccomp cannot read: make it look absent so libc
	 * falls back to clone(), whose flags we can check. */
	if (p->default_allow || p->kill) { /* else the allow-list default already says ENOSYS */
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
		if (r < 0 && r != -EEXIST)
			return lb_fail(err, -r, "seccomp rule for clone3");
	}
	for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++) {
		r = seccomp_rule_add(ctx, deny, SCMP_SYS(clone), 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
		if (r < 0)
			return lb_fail(err, -r, "seccomp rule for clone flags");
	}
	if (!p->default_allow && listed(p, "clone")) {
		uint64_t all = 0;
		for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++)
			all |= ns_flags[i];
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ, all, 0));
		if (r < 0)
			return lb_fail(err, -r, "seccomp rule for clone");
	}
	return 0;
}

/* The kernel truncates ioctl's request to 32 bits, so compare only the low 32 bits: a request
 * with high bits set (0x1_0000_5412) must not slip past a TIOCSTI rule. */
static int add_ioctl_rules(scmp_filter_ctx ctx, const lb_syscall_policy *p, uint32_t deny,
			   lb_error *err)
{
	for (size_t i = 0; i < p->n_deny_ioctls; i++) {
		int r = seccomp_rule_add(
			ctx, deny, SCMP_SYS(ioctl), 1,
			SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, p->deny_ioctls[i]));
		if (r < 0)
			return lb_fail(err, -r, "seccomp rule for ioctl 0x%lx", p->deny_ioctls[i]);
	}
	return 0;
}

static bool family_allowed(const lb_syscall_policy *p, int family)
{
	for (size_t i = 0; i < p->n_socket_families; i++)
		if (p->socket_families[i] == family)
			return true;
	return false;
}

/* socket()'s first argument: the families the policy does not name are refused one by one, and
 * every number from AF_MAX up, which also catches a family with high bits set (the kernel
 * reads an int); AF_NETLINK may be held to NETLINK_ROUTE (third argument, any other value
 * refused, high bits included). In allow-list mode, where socket is listed, what is allowed is
 * allowed by the same tests. */
static int add_socket_rules(scmp_filter_ctx ctx, const lb_syscall_policy *p, uint32_t deny,
			    lb_error *err)
{
	/* (an allow-list that does not list socket refuses it whole: nothing to add) */
	if (!p->default_allow && !listed(p, "socket"))
		return 0;
	int r;
	for (int family = 0; family < AF_MAX; family++) {
		if (family_allowed(p, family))
			continue;
		r = seccomp_rule_add(ctx, deny, SCMP_SYS(socket), 1,
				     SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)family, 0));
		/* (-EEXIST: socket is on the deny list as a whole already) */
		if (r < 0 && r != -EEXIST)
			return lb_fail(err, -r, "seccomp rule for socket family %d", family);
	}
	r = seccomp_rule_add(ctx, deny, SCMP_SYS(socket), 1,
			     SCMP_A0(SCMP_CMP_GE, (scmp_datum_t)AF_MAX, 0));
	if (r < 0 && r != -EEXIST)
		return lb_fail(err, -r, "seccomp rule for socket families from %d", AF_MAX);
	bool route_only = p->netlink_route_only && family_allowed(p, AF_NETLINK);
	if (route_only) {
		r = seccomp_rule_add(ctx, deny, SCMP_SYS(socket), 2,
				     SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)AF_NETLINK, 0),
				     SCMP_A2(SCMP_CMP_NE, (scmp_datum_t)NETLINK_ROUTE, 0));
		if (r < 0 && r != -EEXIST)
			return lb_fail(err, -r, "seccomp rule for netlink protocols");
	}
	if (p->default_allow)
		return 0;
	for (size_t i = 0; i < p->n_socket_families; i++) {
		int family = p->socket_families[i];
		if (family < 0 || family >= AF_MAX)
			continue;
		r = family == AF_NETLINK && route_only
			    ? seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2,
					       SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)family, 0),
					       SCMP_A2(SCMP_CMP_EQ, (scmp_datum_t)NETLINK_ROUTE, 0))
			    : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
					       SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)family, 0));
		if (r < 0 && r != -EEXIST)
			return lb_fail(err, -r, "seccomp rule for socket family %d", family);
	}
	return 0;
}

lb_filter *lb_filter_build(const lb_syscall_policy *p, lb_error *err)
{
	uint32_t deny = p->kill ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ERRNO(EPERM);
	/* Allow-list mode: a call not on the list gets ENOSYS ("not here"), which lets libc fall
	 * back to older calls (clone3 -> clone, statx -> fstat). The explicit refusals below then
	 * use EPERM, which libseccomp requires to differ from the default action. */
	uint32_t fallback = p->kill ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ERRNO(ENOSYS);
	if (!p->default_allow)
		deny = SCMP_ACT_ERRNO(EPERM);
	scmp_filter_ctx ctx = seccomp_init(p->default_allow ? SCMP_ACT_ALLOW : fallback);
	lb_filter *f = NULL;
	int memfd = -1;
	if (!ctx) {
		lb_fail(err, ENOMEM, "seccomp_init failed");
		return NULL;
	}
	/* Only the native ABI: i386 (int 0x80) and x32 (nr | 0x40000000) calls do not match the
	 * filter's architecture and kill the process, so no rule can be dodged through them. */
	if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0 ||
	    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0) < 0) {
		lb_fail(err, EINVAL, "seccomp_attr_set failed");
		goto out;
	}
	if (p->default_allow) {
		for (size_t i = 0; i < p->n_deny; i++)
			if (add_rule(ctx, deny, p->deny[i], err) < 0)
				goto out;
	} else {
		for (size_t i = 0; i < p->n_allow; i++) {
			const char *n = p->allow[i];
			/* clone, ioctl and socket get conditional rules below. */
			if ((p->deny_namespace_clone &&
			     (!strcmp(n, "clone") || !strcmp(n, "clone3"))) ||
			    (p->n_deny_ioctls && !strcmp(n, "ioctl")) ||
			    (p->restrict_sockets && !strcmp(n, "socket")))
				continue;
			if (add_rule(ctx, SCMP_ACT_ALLOW, n, err) < 0)
				goto out;
		}
	}
	if (p->deny_namespace_clone && add_clone_rules(ctx, p, deny, err) < 0)
		goto out;
	if (p->n_deny_ioctls) {
		if (!p->default_allow && !listed(p, "ioctl")) {
			/* Allow-list mode without ioctl on the list: only the denials matter (the
			 * default already refuses every ioctl). */
			if (add_ioctl_rules(ctx, p, deny, err) < 0)
				goto out;
		} else if (!p->default_allow) {
			/* Allow-list mode: allow ioctl when the request has no high bits, after the
			 * denials. Where rules overlap libseccomp keeps the first one added (an
			 * unconditional allow would win outright), so order matters here; the
			 * containment specs check TIOCSTI under both kinds of policy. */
			if (add_ioctl_rules(ctx, p, deny, err) < 0)
				goto out;
			int r = seccomp_rule_add(
				ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffff00000000ULL, 0));
			if (r < 0) {
				lb_fail(err, -r, "seccomp rule for ioctl");
				goto out;
			}
		} else if (add_ioctl_rules(ctx, p, deny, err) < 0) {
			goto out;
		}
	}

	if (p->restrict_sockets && add_socket_rules(ctx, p, deny, err) < 0)
		goto out;

	memfd = memfd_create("llmbox-seccomp", MFD_CLOEXEC);
	if (memfd < 0) {
		lb_fail_sys(err, errno, "memfd_create");
		goto out;
	}
	int r = seccomp_export_bpf(ctx, memfd);
	if (r < 0) {
		lb_fail(err, -r, "seccomp_export_bpf");
		goto out;
	}
	struct stat st;
	if (fstat(memfd, &st) < 0 || st.st_size <= 0 ||
	    st.st_size % (off_t)sizeof(struct sock_filter)) {
		lb_fail(err, EINVAL, "seccomp_export_bpf produced no program");
		goto out;
	}
	if (st.st_size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS) {
		/* The kernel would refuse it at every run: say so now, while the policy loads. */
		lb_fail(err, E2BIG,
			"the policy's syscall rules compile to more than %d BPF instructions; "
			"use fewer rules (an allow-list instead of a long deny-list, or the "
			"reverse)",
			BPF_MAXINSNS);
		goto out;
	}
	void *insns = malloc((size_t)st.st_size);
	if (!insns) {
		lb_fail(err, ENOMEM, "out of memory");
		goto out;
	}
	if (pread(memfd, insns, (size_t)st.st_size, 0) != st.st_size)
		lb_fail(err, EIO, "reading the seccomp program back");
	else
		f = lb_filter_from_program(insns, (size_t)st.st_size, err);
	free(insns);
out:
	if (memfd >= 0)
		close(memfd);
	seccomp_release(ctx);
	return f;
}
