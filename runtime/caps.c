/* Capabilities and identity: the sandboxed program keeps no capability in any set. */
#define _GNU_SOURCE
#include "internal.h"

#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

/* Raw prctl and capset rather than libcap: this runs in the run helper, a static program built
 * against musl where it can be (see the Makefile), for which Debian ships no libcap. */
int lb_caps_drop_all(lb_error *err)
{
	/* Lock the root fix-ups first (needs CAP_SETPCAP, which we still hold in the user
	 * namespace): exec can then never grant capabilities back, even to a uid 0 that does not
	 * exist here. */
	if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
					     SECBIT_NO_SETUID_FIXUP_LOCKED |
					     SECBIT_KEEP_CAPS_LOCKED) < 0 &&
	    errno != EPERM)
		return lb_fail_sys(err, errno, "prctl(PR_SET_SECUREBITS)");
	/* Every capability this kernel knows, however many that is: EINVAL marks the end. */
	for (unsigned long c = 0;; c++) {
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL && c > CAP_CHOWN)
			break;
		return lb_fail_sys(err, errno, "dropping capability %lu from the bounding set", c);
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return lb_fail_sys(err, errno, "clearing the ambient capabilities");
	if (lb_caps_keep_only(-1) < 0)
		return lb_fail_sys(err, errno, "clearing the capability sets");
	return 0;
}

int lb_caps_keep_only(int cap)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {{0}};
	if (cap >= 0)
		data[CAP_TO_INDEX(cap)].effective = data[CAP_TO_INDEX(cap)].permitted =
			CAP_TO_MASK(cap);
	return (int)syscall(SYS_capset, &hdr, data);
}

int lb_become_sandbox_user(lb_error *err)
{
	if (setresgid(LB_SANDBOX_GID, LB_SANDBOX_GID, LB_SANDBOX_GID) < 0)
		return lb_fail_sys(err, errno, "setresgid(%d)", LB_SANDBOX_GID);
	if (setresuid(LB_SANDBOX_UID, LB_SANDBOX_UID, LB_SANDBOX_UID) < 0)
		return lb_fail_sys(err, errno, "setresuid(%d)", LB_SANDBOX_UID);
	if (lb_caps_drop_all(err) < 0)
		return -1;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return lb_fail_sys(err, errno, "prctl(PR_SET_NO_NEW_PRIVS)");
	return 0;
}
