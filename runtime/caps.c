/* Capabilities and identity: the sandboxed program keeps no capability in any set. */
#define _GNU_SOURCE
#include "internal.h"

#include <linux/securebits.h>
#include <sys/capability.h>
#include <sys/prctl.h>

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
	for (cap_value_t c = 0; c <= CAP_LAST_CAP || cap_valid(c); c++) {
		if (!CAP_IS_SUPPORTED(c))
			continue;
		if (cap_drop_bound(c) < 0 && errno != EINVAL)
			return lb_fail_sys(err, errno,
					   "dropping capability %d from the bounding set", (int)c);
	}
	if (cap_reset_ambient() < 0 && errno != EINVAL)
		return lb_fail_sys(err, errno, "clearing the ambient capabilities");
	cap_t none = cap_init(); /* all three sets empty */
	if (!none)
		return lb_fail_sys(err, errno, "cap_init");
	int r = cap_set_proc(none);
	int e = errno;
	cap_free(none);
	if (r < 0)
		return lb_fail(err, e, "clearing the capability sets");
	return 0;
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
