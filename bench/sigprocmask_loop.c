/* The benchmark workload: N sigprocmask calls in a tight loop (default 2,000,000). */
#include <signal.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000000;
	sigset_t set;

	for (long i = 0; i < n; i++)
		sigprocmask(SIG_SETMASK, NULL, &set);
	return 0;
}
