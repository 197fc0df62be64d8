/*
 * Lab: the RocketMQ story, lock part (../shared/stories/rocketmq-abs-lock.txt).
 *
 * Threads put messages into a shared commit log under one lock whose
 * critical section is very short (append a 64-byte message).
 *   mutex:      a plain pthread mutex (g_putmessage_lock): under contention
 *               each handoff is a futex wait/wake pair and a context switch.
 *   adaptive:   glibc's adaptive mutex (PTHREAD_MUTEX_ADAPTIVE_NP) spins a
 *               while before sleeping.
 *   spin:       RocketMQ's first PutMessageSpinLock: compare-and-swap until
 *               it succeeds. Waiters burn CPU, and when the holder is
 *               preempted they burn whole time slices.
 *   spin-yield: the k-backoff spin lock: spin k = 1000 times, then
 *               sched_yield() and spin again.
 *   abs:        the adaptive backoff spin lock: spin with exponential
 *               backoff up to k times, then yield and spin again. Every
 *               256 contended acquisitions, k adapts to how often the first
 *               k spins were enough: doubled while under 80%, halved above
 *               95%. At the maximum (10,000) a doubling that did not help
 *               switches it to parking on a futex, as a mutex; it returns
 *               to spinning once the request rate drops below 80% of the
 *               rate seen at the switch.
 *
* Usage: rocketmq_lock mutex|adaptive|spin|spin-yield|abs [THREADS] [MESSAGES_PER_THREAD] [ENCODE_ROUNDS]
 * Prints messages per second, CPU used, the p99.99 latency of a put, and
 * the time its threads waited for the lock.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define LOG_SLOTS 4096

pthread_mutex_t g_putmessage_lock;
static char commit_log[LOG_SLOTS][64];
static long log_pos;
static long per_thread;
static long long lock_wait_ns;
/* Put latencies per thread in log-linear buckets (16 per power of two,
 * within 6%): recording is one increment, so measuring barely disturbs the
 * lock, and no sort at the end lands in the profile. */
#define SUB_BITS 4
#define BUCKETS (64 << SUB_BITS)
static unsigned long (*latency_hist)[BUCKETS];
static enum { MUTEX, SPIN, SPIN_YIELD, ABS } kind;

/* The spin locks: 0 free, 1 held, 2 held with parked waiters (abs only). */
int g_putmessage_spinlock;

#define SPIN_YIELD_K 1000
#define ABS_K_MIN 128
#define ABS_K_MAX 10000

static int abs_k = ABS_K_MIN;      /* adapted spin budget */
static int abs_parking;            /* 1: behave as a mutex */
static long abs_acquired;          /* acquisitions, for the request rate */
static long abs_rate_at_switch;    /* acquisitions per epoch when parking began */
static long abs_epoch_start_ns, abs_epoch_acquired;
static long abs_parked_epochs;      /* times it switched to parking */
/* Adaptation window, kept by lock holders only (the lock guards it). */
#define ABS_WINDOW 256
static long abs_win_ok, abs_win_all;
static int abs_last_permille = -1;  /* success rate at the previous k */

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

static int try_spinlock(void)
{
	int zero = 0;

	return __atomic_load_n(&g_putmessage_spinlock, __ATOMIC_RELAXED) == 0 &&
	       __atomic_compare_exchange_n(&g_putmessage_spinlock, &zero, 1, 0,
					   __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static NOINLINE void spin_lock(void)
{
	while (!try_spinlock())
		cpu_relax();
}

static NOINLINE void spin_yield_lock(void)
{
	for (;;) {
		for (int i = 0; i < SPIN_YIELD_K; i++) {
			if (try_spinlock())
				return;
			cpu_relax();
		}
		sched_yield();
	}
}

static void futex(int *addr, int op, int val)
{
	syscall(SYS_futex, addr, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

/* Park as a mutex does: mark the lock contended and sleep until woken. */
static NOINLINE void abs_park(void)
{
	while (__atomic_exchange_n(&g_putmessage_spinlock, 2, __ATOMIC_ACQUIRE) != 0)
		futex(&g_putmessage_spinlock, FUTEX_WAIT, 2);
}

/* Called by the holder: the request rate per 10 ms epoch decides when a
 * parking lock goes back to spinning. */
static void abs_account(void)
{
	abs_acquired++;
	if ((abs_acquired & 1023) != 0)
		return;
	long long now = now_ns();
	if (now - abs_epoch_start_ns < 10000000)
		return;
	long rate = (abs_acquired - abs_epoch_acquired) * 10000000LL / (now - abs_epoch_start_ns);
	abs_epoch_start_ns = now;
	abs_epoch_acquired = abs_acquired;
	if (__atomic_load_n(&abs_parking, __ATOMIC_RELAXED) && rate * 10 < abs_rate_at_switch * 8) {
		__atomic_store_n(&abs_parking, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&abs_k, ABS_K_MIN, __ATOMIC_RELAXED);
		abs_last_permille = -1;
	} else if (!__atomic_load_n(&abs_parking, __ATOMIC_RELAXED)) {
		abs_rate_at_switch = rate;
	}
}

/* Called holding the lock after a contended acquisition: `ok` if the
 * first k spins got it. Adapts k once per window of such acquisitions. */
static void abs_adapt(int ok)
{
	abs_win_ok += ok;
	if (++abs_win_all < ABS_WINDOW)
		return;
	int permille = (int)(abs_win_ok * 1000 / abs_win_all);
	int k = __atomic_load_n(&abs_k, __ATOMIC_RELAXED);

	abs_win_ok = abs_win_all = 0;
	if (permille >= 950 && k > ABS_K_MIN) {
		/* Spinning nearly always works: spin less. */
		__atomic_store_n(&abs_k, k / 2, __ATOMIC_RELAXED);
		abs_last_permille = -1;
	} else if (permille < 800 && k < ABS_K_MAX) {
		/* Too often not enough: spin longer. */
		abs_last_permille = permille;
		__atomic_store_n(&abs_k, k * 2 < ABS_K_MAX ? k * 2 : ABS_K_MAX, __ATOMIC_RELAXED);
	} else if (permille < 800) {
		/* At the maximum, and spinning longer did not help: spinning
		 * costs more than a context switch would. Behave as a mutex
		 * until the request rate drops. */
		if (abs_last_permille >= 0 && permille <= abs_last_permille + 50 &&
		    !__atomic_exchange_n(&abs_parking, 1, __ATOMIC_RELAXED))
			abs_parked_epochs++;
		abs_last_permille = permille;
	}
}

static NOINLINE void abs_lock(void)
{
	int first = 1;

	while (!__atomic_load_n(&abs_parking, __ATOMIC_RELAXED)) {
		int k = __atomic_load_n(&abs_k, __ATOMIC_RELAXED);
		int backoff = 1;

		for (int spins = 0; spins < k; spins++) {
			if (try_spinlock()) {
				abs_adapt(first);
				return;
			}
			for (int i = 0; i < backoff; i++)
				cpu_relax();
			if (backoff < 16)
				backoff *= 2;
		}
		/* k spins were not enough: let the holder (or someone) run. */
		first = 0;
		sched_yield();
	}
	abs_park();
}

static void spin_unlock(void)
{
	if (__atomic_exchange_n(&g_putmessage_spinlock, 0, __ATOMIC_RELEASE) == 2)
		futex(&g_putmessage_spinlock, FUTEX_WAKE, 1);
}

static NOINLINE void put_message(const char *msg)
{
	long long t0;

	if (kind == MUTEX ? pthread_mutex_trylock(&g_putmessage_lock) != 0 : !try_spinlock()) {
		t0 = now_ns();
		switch (kind) {
		case MUTEX: pthread_mutex_lock(&g_putmessage_lock); break;
		case SPIN: spin_lock(); break;
		case SPIN_YIELD: spin_yield_lock(); break;
		case ABS: abs_lock(); break;
		}
		__atomic_add_fetch(&lock_wait_ns, now_ns() - t0, __ATOMIC_RELAXED);
	}
	if (kind == ABS)
		abs_account();
	/* Append and checksum the entry: a short critical section. */
	char *slot = commit_log[log_pos++ % LOG_SLOTS];
	unsigned sum = 0;
	memcpy(slot, msg, 64);
	for (int i = 0; i < 64; i++)
		sum = sum * 31 + (unsigned char)slot[i];
	slot[63] = (char)sum;
	if (kind == MUTEX)
		pthread_mutex_unlock(&g_putmessage_lock);
	else
		spin_unlock();
}

static int bucket_of(unsigned long long ns)
{
	if (ns < (1u << SUB_BITS))
		return (int)ns;
	int msb = 63 - __builtin_clzll(ns);
	return ((msb - SUB_BITS + 1) << SUB_BITS) | (int)((ns >> (msb - SUB_BITS)) & ((1u << SUB_BITS) - 1));
}

/* The upper end of a bucket's range. */
static double bucket_ns(int b)
{
	int shift = (b >> SUB_BITS) - 1;
	unsigned long long base = (unsigned long long)(b & ((1 << SUB_BITS) - 1));

	if (shift < 0)
		return (double)base;
	return (double)(((base | (1u << SUB_BITS)) + 1) << shift);
}

static long encode_rounds;

/* The producer's own work between puts: encode the message. */
static NOINLINE void encode_message(char *msg, long seq, long id)
{
	unsigned h = (unsigned)seq * 2654435761u + (unsigned)id;

	for (long r = 0; r < encode_rounds; r++)
		for (int i = 9; i < 64; i++) {
			h = h * 31 + (unsigned char)msg[i];
			msg[i] = (char)('a' + h % 26);
		}
	memcpy(msg, &seq, sizeof(seq));
	msg[8] = (char)id;
}

static NOINLINE void *producer(void *arg)
{
	long id = (long)arg;
	unsigned long *hist = latency_hist[id];
	char msg[64];

	memset(msg, 'm', sizeof(msg));
	for (long i = 0; i < per_thread; i++) {
		encode_message(msg, i, id);
		long long t0 = now_ns();
		put_message(msg);
		hist[bucket_of((unsigned long long)(now_ns() - t0))]++;
	}
	return NULL;
}

static double percentile_ns(long threads, long n, double q)
{
	long want = (long)(n * q), seen = 0;

	for (int b = 0; b < BUCKETS; b++) {
		for (long t = 0; t < threads; t++)
			seen += latency_hist[t][b];
		if (seen > want)
			return bucket_ns(b);
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *v = argc > 1 ? argv[1] : "";
	long threads = argc > 2 ? atol(argv[2]) : 8;
	pthread_mutexattr_t attr;
	pthread_t th[64];
	struct rusage ru;

	per_thread = argc > 3 ? atol(argv[3]) : 300000;
	encode_rounds = argc > 4 ? atol(argv[4]) : 0;
	pthread_mutexattr_init(&attr);
	if (!strcmp(v, "adaptive"))
		pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
	else if (!strcmp(v, "spin"))
		kind = SPIN;
	else if (!strcmp(v, "spin-yield"))
		kind = SPIN_YIELD;
	else if (!strcmp(v, "abs"))
		kind = ABS;
	else if (strcmp(v, "mutex")) {
		fprintf(stderr, "usage: %s mutex|adaptive|spin|spin-yield|abs [THREADS] [MESSAGES_PER_THREAD] [ENCODE_ROUNDS]\n", argv[0]);
		return 2;
	}
	if (threads < 1 || threads > 64 || per_thread < 1)
		return 2;
	pthread_mutex_init(&g_putmessage_lock, &attr);
	latency_hist = calloc(threads, sizeof(*latency_hist));
	if (!latency_hist)
		return 1;

	long long t0 = now_ns();
	abs_epoch_start_ns = t0;
	for (long i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, producer, (void *)i);
	for (long i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	double s = (now_ns() - t0) / 1e9;
	getrusage(RUSAGE_SELF, &ru);
	double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	long n = threads * per_thread;
	printf("rocketmq-lock %s: %ld messages in %.3f s (%.2f M msgs/s), CPU %.3f s, p99.99 put %.1f us, lock wait %.3f s\n",
	       v, n, s, n / s / 1e6, cpu, percentile_ns(threads, n, 0.9999) / 1e3, lock_wait_ns / 1e9);
	if (kind == ABS)
		printf("abs lock: spin budget k = %d at the end, switched to parking %ld times\n",
		       abs_k, abs_parked_epochs);
	return 0;
}
