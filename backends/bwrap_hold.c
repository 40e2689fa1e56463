/* The bubblewrap backend's holder: the program bwrap starts in the jail it has built. It sends
 * the jail's namespaces to llmbox over its stdout (a unix socket that llmbox made) and exits;
 * llmbox then holds the jail as those fds, as it holds its own (see backends/bubblewrap.c).
 *
 * The message: "ns" and one letter per namespace in the order user, mnt, net, uts, cgroup ('y'
 * when it is sent, 'n' when this kernel has none), with the sent fds attached in that order.
 * Static, and started through /proc/self/fd: it runs whatever the jail's root holds, and nothing
 * of llmbox's is placed in the jail. It runs under the policy's seccomp filter, as the sandbox
 * user, with no capabilities: it only opens, sends and exits. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void)
{
	static const char *const names[] = {"/proc/self/ns/user", "/proc/self/ns/mnt",
					    "/proc/self/ns/net", "/proc/self/ns/uts",
					    "/proc/self/ns/cgroup"};
	enum { N = sizeof names / sizeof names[0] };
	char data[2 + N] = {'n', 's'};
	int fds[N], n = 0;
	for (int i = 0; i < N; i++) {
		int fd = open(names[i], O_RDONLY | O_CLOEXEC);
		data[2 + i] = fd >= 0 ? 'y' : 'n';
		if (fd >= 0)
			fds[n++] = fd;
	}
	union {
		char buf[CMSG_SPACE(N * sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof u);
	struct iovec iov = {.iov_base = data, .iov_len = sizeof data};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	if (n > 0) {
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE((size_t)n * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)n * sizeof(int));
	}
	return sendmsg(1, &msg, MSG_NOSIGNAL) == (ssize_t)sizeof data ? 0 : 1;
}
