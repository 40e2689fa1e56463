/* The program a wrapping sandbox tool (bwrap, nsjail) starts in the jail it built, once every
 * mount is in place (backends/wrapped.c). Static, and started through /proc/self/fd: it runs
 * whatever the jail's root holds, and nothing of llmbox's is placed in the jail.
 *
 *   jail-ready                        exits 0: for bwrap, whose exit status passes it on, the
 *                                     proof that the jail was built completely
 *   jail-ready --send-namespaces FD   sends the jail's namespaces over FD (a unix socket llmbox
 *                                     made), then exits 0: for tools that cannot say which
 *                                     process is the jail's (nsjail)
 *
 * The message: "ns" and one letter per namespace in the order user, mnt, net, uts, cgroup ('y'
 * when it is sent, 'n' when this kernel has none), with the sent fds attached in that order. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int send_namespaces(int sock)
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
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == (ssize_t)sizeof data ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--send-namespaces") == 0)
		return send_namespaces(atoi(argv[2]));
	return argc == 1 ? 0 : 2;
}
