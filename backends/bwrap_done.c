/* The program the bubblewrap backend has bwrap start in the jail it built: it exits 0 at once.
 * bwrap starts it only once every mount of the jail is in place, so its exit status, which bwrap
 * passes on, is how llmbox learns that the jail was built completely (backends/bubblewrap.c).
 * Static, and started through /proc/self/fd: it runs whatever the jail's root holds, and nothing
 * of llmbox's is placed in the jail. */
int main(void)
{
	return 0;
}
