/*
 * Lab: the RocketMQ story, lock part (../shared/stories/rocketmq-abs-lock.txt).
 *
 * Threads put messages into a shared commit log under one lock whose
 * critical section is very short (append a 64-byte message).
 *   mutex:    a plain pthread mutex (g_putmessage_lock): under contention
 *             each handoff is a futex wait/wake pair and a context switch.
 *   adaptive: glibc's adaptive mutex (PTHREAD_MUTEX_ADAPTIVE_NP) spins a
 *             while before sleeping, as the ABS lock spins before parking.
 *
 * Usage: rocketmq_lock mutex|adaptive [THREADS] [MESSAGES_PER_THREAD]
 * Prints messages per second, CPU used, the p99.99 latency of a put, and
 * the time its threads waited for the lock.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))
#define LOG_SLOTS 4096

pthread_mutex_t g_putmessage_lock;
static char commit_log[LOG_SLOTS][64];
static long log_pos;
static long per_thread;
static long long lock_wait_ns;
static long long *latencies;

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static NOINLINE void put_message(const char *msg)
{
	long long t0;

	if (pthread_mutex_trylock(&g_putmessage_lock) != 0) {
		t0 = now_ns();
		pthread_mutex_lock(&g_putmessage_lock);
		__atomic_add_fetch(&lock_wait_ns, now_ns() - t0, __ATOMIC_RELAXED);
	}
	/* Append and checksum the entry: a short critical section. */
	char *slot = commit_log[log_pos++ % LOG_SLOTS];
	unsigned sum = 0;
	memcpy(slot, msg, 64);
	for (int i = 0; i < 64; i++)
		sum = sum * 31 + (unsigned char)slot[i];
	slot[63] = (char)sum;
	pthread_mutex_unlock(&g_putmessage_lock);
}

static NOINLINE void *producer(void *arg)
{
	long id = (long)arg;
	long long *lat = latencies + id * per_thread;
	char msg[64];

	memset(msg, 'm', sizeof(msg));
	for (long i = 0; i < per_thread; i++) {
		memcpy(msg, &i, sizeof(i));
		msg[8] = (char)id;
		long long t0 = now_ns();
		put_message(msg);
		lat[i] = now_ns() - t0;
	}
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	const char *v = argc > 1 ? argv[1] : "";
	long threads = argc > 2 ? atol(argv[2]) : 8;
	pthread_mutexattr_t attr;
	pthread_t th[64];
	struct rusage ru;

	per_thread = argc > 3 ? atol(argv[3]) : 300000;
	pthread_mutexattr_init(&attr);
	if (!strcmp(v, "adaptive"))
		pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
	else if (strcmp(v, "mutex")) {
		fprintf(stderr, "usage: %s mutex|adaptive [THREADS] [MESSAGES_PER_THREAD]\n", argv[0]);
		return 2;
	}
	if (threads < 1 || threads > 64 || per_thread < 1)
		return 2;
	pthread_mutex_init(&g_putmessage_lock, &attr);
	latencies = calloc(threads * per_thread, sizeof(*latencies));
	if (!latencies)
		return 1;

	long long t0 = now_ns();
	for (long i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, producer, (void *)i);
	for (long i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	double s = (now_ns() - t0) / 1e9;
	getrusage(RUSAGE_SELF, &ru);
	double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	long n = threads * per_thread;
	qsort(latencies, n, sizeof(*latencies), cmp);
	printf("rocketmq-lock %s: %ld messages in %.3f s (%.2f M msgs/s), CPU %.3f s, p99.99 put %.1f us, lock wait %.3f s\n",
	       v, n, s, n / s / 1e6, cpu, latencies[(long)(n * 0.9999)] / 1e3, lock_wait_ns / 1e9);
	return 0;
}
