/* pod-filter: the policy's syscall filter for a program in a Kubernetes pod, where llmbox has
 * no process of its own and no capability (lua/llmbox/backends/kubernetes.lua).
 *
 *   pod-filter HEX -- ARGV...
 *
 * HEX is the seccomp program llmbox compiled from the policy (runtime/seccomp.c, the very one
 * a native jail loads), struct sock_filter by struct sock_filter in hex. The helper sets
 * no_new_privs, loads it, and executes ARGV (a name without a slash is looked up on the PATH of
 * the environment it is given), so the program and everything it starts run under it, on top
 * of the pod's own profile. Exit status 125 when the filter cannot be loaded, 126 when ARGV
 * cannot be executed, 127 when it is not found, each said on stderr.
 *
 * In a pod llmbox's run wrapper is the program's own user (a pod has no root), so before the
 * policy's filter the helper loads one of its own that keeps the program's signals off its
 * supervisors: kill, tkill, tgkill, rt_(tg)sigqueueinfo and pidfd_open fail with EPERM for its
 * parent and grandparent (llmbox's helper that waits for it, and the wrapper), for -1 (every
 * process it may signal) and for the wrapper's process group, and so does making one of them
 * the owner of a file's signals (fcntl F_SETOWN to them; F_SETOWN_EX and the sockets' FIOSETOWN
 * and SIOCSPGRP, whose owner is behind a pointer, always); the program gets a session and
 * process group of its own (setsid), so that its own group is still its to signal.
 *
 * No libc, no relocation, no dependency: it runs in images llmbox knows nothing of, from the
 * pod's read-only configMap volume. Built for the host's architecture (x86_64 or aarch64); the
 * driver refuses a pod whose node has another. */
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/prctl.h>
#include <stddef.h>

#if defined(__x86_64__)
#define ARCH		     AUDIT_ARCH_X86_64
#define NR_READ		     0
#define NR_WRITE	     1
#define NR_CLOSE	     3
#define NR_IOCTL	     16
#define NR_FCNTL	     72
#define NR_EXECVE	     59
#define NR_KILL		     62
#define NR_GETPPID	     110
#define NR_SETSID	     112
#define NR_GETPGID	     121
#define NR_RT_SIGQUEUEINFO   129
#define NR_PRCTL	     157
#define NR_TKILL	     200
#define NR_EXIT_GROUP	     231
#define NR_TGKILL	     234
#define NR_OPENAT	     257
#define NR_RT_TGSIGQUEUEINFO 297
static long sys3(long n, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(n), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return r;
}
static long sys5(long n, long a, long b, long c, long d, long e)
{
	long r;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
			 : "rcx", "r11", "memory");
	return r;
}
__asm__(".text\n.global _start\n_start:\n\txor %rbp,%rbp\n\tmov %rsp,%rdi\n\tand $-16,%rsp\n"
	"\tcall start_c\n\thlt\n");
#elif defined(__aarch64__)
#define ARCH		     AUDIT_ARCH_AARCH64
#define NR_READ		     63
#define NR_WRITE	     64
#define NR_CLOSE	     57
#define NR_IOCTL	     29
#define NR_FCNTL	     25
#define NR_EXECVE	     221
#define NR_KILL		     129
#define NR_GETPPID	     173
#define NR_SETSID	     157
#define NR_GETPGID	     155
#define NR_RT_SIGQUEUEINFO   138
#define NR_PRCTL	     167
#define NR_TKILL	     130
#define NR_EXIT_GROUP	     94
#define NR_TGKILL	     131
#define NR_OPENAT	     56
#define NR_RT_TGSIGQUEUEINFO 240
static long sys5(long n, long a, long b, long c, long d, long e)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4)
			 : "memory");
	return x0;
}
static long sys3(long n, long a, long b, long c)
{
	return sys5(n, a, b, c, 0, 0);
}
__asm__(".text\n.global _start\n_start:\n\tmov x29, #0\n\tmov x30, #0\n\tmov x0, sp\n"
	"\tbl start_c\n\tbrk #0\n");
#else
#error "pod-filter: only x86_64 and aarch64 are built"
#endif

#define NR_PIDFD_OPEN 434
#define ENOENT	      2
#define EPERM	      1
#define ENOMEM	      12
#define PATH_MAX      4096

static struct sock_filter insns[BPF_MAXINSNS];
static char path[PATH_MAX];

static size_t len(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}

static void say(const char *a, const char *b, const char *c)
{
	const char *parts[] = {"pod-filter: ", a, b, c, "\n"};
	for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
		if (parts[i])
			sys3(NR_WRITE, 2, (long)parts[i], (long)len(parts[i]));
}

static __attribute__((noreturn)) void leave(int status)
{
	for (;;)
		sys3(NR_EXIT_GROUP, status, 0, 0);
}

static int nibble(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* The hex program into insns; its length in instructions, 0 when malformed. */
static size_t decode(const char *hex)
{
	size_t n = len(hex);
	if (n == 0 || n % (2 * sizeof(struct sock_filter)) ||
	    n / 2 / sizeof(struct sock_filter) > BPF_MAXINSNS)
		return 0;
	unsigned char *out = (unsigned char *)insns;
	for (size_t i = 0; i < n; i += 2) {
		int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
		if (hi < 0 || lo < 0)
			return 0;
		out[i / 2] = (unsigned char)(hi << 4 | lo);
	}
	return n / 2 / sizeof(struct sock_filter);
}

static const char *error_name(long e)
{
	switch (e) {
	case -1:
		return "operation not permitted";
	case -2:
		return "no such file or directory";
	case -7:
		return "argument list too long";
	case -8:
		return "not an executable format";
	case -12:
		return "out of memory";
	case -13:
		return "permission denied";
	case -14:
		return "bad address";
	case -22:
		return "invalid argument";
	default:
		return "failed";
	}
}

/* The parent of process pid, from /proc/PID/stat ("PID (NAME) STATE PPID ..."); 0 when unknown. */
static long parent_of(long pid)
{
	char stat[32] = "/proc/", digits[24], buf[512];
	int n = 0, k = 6;
	do
		digits[n++] = (char)('0' + pid % 10);
	while ((pid /= 10) > 0);
	while (n > 0)
		stat[k++] = digits[--n];
	const char *tail = "/stat";
	for (int i = 0; tail[i]; i++)
		stat[k++] = tail[i];
	stat[k] = 0;
	long fd = sys5(NR_OPENAT, -100 /* AT_FDCWD */, (long)stat, 0 /* O_RDONLY */, 0, 0);
	if (fd < 0)
		return 0;
	long got = sys3(NR_READ, fd, (long)buf, sizeof buf - 1);
	sys3(NR_CLOSE, fd, 0, 0);
	long close_paren = -1;
	for (long i = 0; i < got; i++)
		if (buf[i] == ')')
			close_paren = i;
	/* ") S PPID" */
	long i = close_paren + 4, ppid = 0;
	if (close_paren < 0 || i >= got)
		return 0;
	for (; i < got && buf[i] >= '0' && buf[i] <= '9'; i++)
		ppid = ppid * 10 + (buf[i] - '0');
	return ppid;
}

/* The filter that keeps the program's signals off its supervisors (see the top), for the
 * parent p1, the grandparent p2 (0: none) and the process group pgid: a little assembler with
 * forward jumps to labels, fixed up once every label is placed. */
enum label { L_PID, L_FCNTL, L_OWNER, L_IOCTL, L_DENY, N_LABELS };
static struct sock_filter guard[64];
static unsigned short guard_len, label_at[N_LABELS], fix_at[32];
static unsigned char fix_label[32], n_fixes;

static void emit(struct sock_filter f)
{
	guard[guard_len++] = f;
}

static void jump_if(unsigned k, enum label to)
{
	fix_at[n_fixes] = guard_len;
	fix_label[n_fixes++] = (unsigned char)to;
	emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, k, 0, 0));
}

static void load(unsigned offset)
{
	emit((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset));
}

static void allow(void)
{
	emit((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
}

/* The refusal when the argument at offset is one of the targets; else the allow. */
static void refuse_targets(unsigned offset, const unsigned *targets, unsigned n)
{
	load(offset);
	for (unsigned i = 0; i < n; i++)
		jump_if(targets[i], L_DENY);
	allow();
}

static unsigned short guard_program(unsigned p1, unsigned p2, unsigned pgid)
{
	static const unsigned signals[] = {
		NR_KILL,      NR_TKILL, NR_TGKILL, NR_RT_SIGQUEUEINFO, NR_RT_TGSIGQUEUEINFO,
		NR_PIDFD_OPEN};
	const unsigned targets[] = {p1, p2 ? p2 : p1, 0xffffffffu, pgid ? 0u - pgid : p1};
	/* the arguments' low 32 bits (little-endian): a pid, a tid, a command */
	const unsigned arg0 = 16, arg1 = 24, arg2 = 32;
	load(4); /* arch: another's calls are the policy's filter's to refuse */
	emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0));
	allow();
	load(0);
	for (unsigned i = 0; i < sizeof signals / sizeof *signals; i++)
		jump_if(signals[i], L_PID);
	jump_if(NR_FCNTL, L_FCNTL);
	jump_if(NR_IOCTL, L_IOCTL);
	allow();
	/* a signal to a supervisor, -1 or the wrapper's group */
	label_at[L_PID] = guard_len;
	refuse_targets(arg0, targets, sizeof targets / sizeof *targets);
	/* SIGIO (or any signal F_SETSIG names) sent to a supervisor when a file is ready: F_SETOWN
	 * to one of them, and F_SETOWN_EX, whose owner is behind a pointer */
	label_at[L_FCNTL] = guard_len;
	load(arg1);
	jump_if(15 /* F_SETOWN_EX */, L_DENY);
	jump_if(8 /* F_SETOWN */, L_OWNER);
	allow();
	label_at[L_OWNER] = guard_len;
	refuse_targets(arg2, targets, sizeof targets / sizeof *targets);
	/* the same for sockets, whose owner is behind a pointer */
	label_at[L_IOCTL] = guard_len;
	load(arg1);
	jump_if(0x8901 /* FIOSETOWN */, L_DENY);
	jump_if(0x8902 /* SIOCSPGRP */, L_DENY);
	allow();
	label_at[L_DENY] = guard_len;
	emit((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));
	for (unsigned i = 0; i < n_fixes; i++)
		guard[fix_at[i]].jt = (unsigned char)(label_at[fix_label[i]] - fix_at[i] - 1);
	return guard_len;
}

/* Executes name (looked up on PATH when it has no slash); returns only on failure. */
static long run(char **argv, char **envp)
{
	const char *name = argv[0];
	for (const char *s = name; *s; s++)
		if (*s == '/')
			return sys3(NR_EXECVE, (long)name, (long)argv, (long)envp);
	const char *search = "/usr/local/bin:/usr/bin:/bin";
	for (char **e = envp; *e; e++)
		if ((*e)[0] == 'P' && (*e)[1] == 'A' && (*e)[2] == 'T' && (*e)[3] == 'H' &&
		    (*e)[4] == '=')
			search = *e + 5;
	long best = -ENOENT;
	size_t nlen = len(name);
	for (const char *p = search;; p++) {
		const char *end = p;
		while (*end && *end != ':')
			end++;
		size_t dlen = (size_t)(end - p);
		if (dlen + 1 + nlen < sizeof path) {
			size_t k = 0;
			for (const char *q = p; q < end; q++)
				path[k++] = *q;
			if (k == 0)
				path[k++] = '.';
			path[k++] = '/';
			for (size_t i = 0; i <= nlen; i++)
				path[k++] = name[i];
			long r = sys3(NR_EXECVE, (long)path, (long)argv, (long)envp);
			/* (the shell's rule: a file found but not executable is what is said) */
			if (r != -ENOENT && r != -20 /* ENOTDIR */)
				best = r;
		}
		if (!*end)
			break;
		p = end;
	}
	return best;
}

__attribute__((used)) void start_c(long *sp)
{
	long argc = sp[0];
	char **argv = (char **)(sp + 1);
	char **envp = argv + argc + 1;
	if (argc < 4 || argv[2][0] != '-' || argv[2][1] != '-' || argv[2][2]) {
		say("usage: pod-filter HEX -- ARGV...", NULL, NULL);
		leave(125);
	}
	struct sock_fprog prog = {.len = (unsigned short)decode(argv[1]), .filter = insns};
	if (!prog.len) {
		say("the filter is not a seccomp program in hex", NULL, NULL);
		leave(125);
	}
	long p1 = sys3(NR_GETPPID, 0, 0, 0), pgid = sys3(NR_GETPGID, 0, 0, 0);
	long p2 = p1 > 1 ? parent_of(p1) : 0;
	struct sock_fprog keep_off = {.len = guard_program((unsigned)p1, p2 > 1 ? (unsigned)p2 : 0,
							   pgid > 0 ? (unsigned)pgid : 0),
				      .filter = guard};
	/* (fails only for a group leader, which a forked program is not: its group stays then) */
	sys3(NR_SETSID, 0, 0, 0);
	long r = sys5(NR_PRCTL, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	if (r == 0)
		r = sys5(NR_PRCTL, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, (long)&keep_off, 0, 0);
	if (r == 0)
		r = sys5(NR_PRCTL, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, (long)&prog, 0, 0);
	if (r != 0) {
		say("loading the policy's syscall filter: ", error_name(r), NULL);
		leave(125);
	}
	r = run(argv + 3, envp);
	say(argv[3], ": ", error_name(r));
	leave(r == -ENOENT ? 127 : 126);
}
