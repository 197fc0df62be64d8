/* bench/scale's workload: PROCS processes of THREADS threads each make
 * RATE getppid calls a second in all for SECONDS. Each thread wakes on a
 * 100 ms tick (an absolute timer, so the rate holds however long a burst
 * took), makes its share of the tick's calls and sleeps again: the work
 * grows by threads, by processes or by calls a second, one at a time.
 * Prints the calls made and the rate reached.
 * Usage: scale_load PROCS THREADS RATE SECONDS */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TICKS_PER_S 10

static long per_tick;
static struct timespec end;

static void add_ns(struct timespec *t, long ns)
{
	t->tv_nsec += ns;
	while (t->tv_nsec >= 1000000000L) {
		t->tv_nsec -= 1000000000L;
		t->tv_sec++;
	}
}

static int before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void *worker(void *arg)
{
	long *calls = arg;
	struct timespec tick;

	clock_gettime(CLOCK_MONOTONIC, &tick);
	while (before(&tick, &end)) {
		for (long i = 0; i < per_tick; i++)
			syscall(SYS_getppid);
		*calls += per_tick;
		add_ns(&tick, 1000000000L / TICKS_PER_S);
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &tick, NULL);
	}
	return NULL;
}

/* One process: THREADS workers; returns the calls they made. */
static long process(int threads)
{
	pthread_t *t = calloc(threads, sizeof(*t));
	long *calls = calloc(threads, sizeof(*calls));
	long sum = 0;

	if (!t || !calls) {
		perror("scale_load: calloc");
		exit(1);
	}
	for (int i = 0; i < threads; i++) {
		int err = pthread_create(&t[i], NULL, worker, &calls[i]);
		if (err) {
			fprintf(stderr, "scale_load: pthread_create: error %d after %d threads\n", err, i);
			exit(1);
		}
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		sum += calls[i];
	}
	return sum;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: scale_load PROCS THREADS RATE SECONDS\n");
		return 2;
	}
	int procs = atoi(argv[1]), threads = atoi(argv[2]);
	long rate = atol(argv[3]), secs = atol(argv[4]);
	if (procs < 1 || threads < 1 || rate < 0 || secs < 1) {
		fprintf(stderr, "scale_load: PROCS and THREADS >= 1, RATE >= 0, SECONDS >= 1\n");
		return 2;
	}
	per_tick = rate / TICKS_PER_S / ((long)procs * threads);
	struct timespec start;
	clock_gettime(CLOCK_MONOTONIC, &start);
	end = start;
	end.tv_sec += secs;

	int fds[2];
	if (pipe(fds)) {
		perror("scale_load: pipe");
		return 1;
	}
	for (int p = 1; p < procs; p++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("scale_load: fork");
			return 1;
		}
		if (pid == 0) {
			long n = process(threads);
			if (write(fds[1], &n, sizeof(n)) != sizeof(n))
				_exit(1);
			_exit(0);
		}
	}
	long total = process(threads);
	for (int p = 1; p < procs; p++) {
		long n = 0;
		if (read(fds[0], &n, sizeof(n)) == sizeof(n))
			total += n;
		wait(NULL);
	}
	printf("scale_load: %d processes x %d threads: %ld calls, %.0f a second\n", procs, threads,
	       total, (double)total / secs);
	return 0;
}
