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
 * No libc, no relocation, no dependency: it is placed in pods as a printf(1) format (the pod's
 * environment holds it, see the driver), so it must be small, and it runs in images llmbox
 * knows nothing of. Built for the host's architecture (x86_64 or aarch64); the driver refuses a
 * pod whose node has another. */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/prctl.h>
#include <stddef.h>

#if defined(__x86_64__)
#define NR_WRITE      1
#define NR_EXECVE     59
#define NR_PRCTL      157
#define NR_EXIT_GROUP 231
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
#define NR_WRITE      64
#define NR_EXECVE     221
#define NR_PRCTL      167
#define NR_EXIT_GROUP 94
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

#define ENOENT	 2
#define ENOMEM	 12
#define PATH_MAX 4096

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
	long r = sys5(NR_PRCTL, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
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
