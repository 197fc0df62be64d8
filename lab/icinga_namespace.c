/*
 * Lab: the Icinga 2 story (../shared/stories/icinga2-namespace-lock.txt).
 *
 * Threads evaluate apply rules; every rule looks names up in a namespace (a
 * hash table populated at start-up). Reads vastly outnumber writes.
 *   bad:    every namespace access takes its exclusive mutex
 *           (g_namespace_lock), as Icinga 2 did.
 *   rwlock: lookups take a shared read lock (g_namespace_rwlock).
 *   fixed:  the namespace is frozen once populated and read with no lock at
 *           all; the rare writes go to a separate mutable namespace.
 *
 * Usage: icinga_namespace bad|rwlock|fixed [THREADS] [LOOKUPS_PER_THREAD]
 * Prints its throughput and the time its threads waited for namespace locks.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))
#define SLOTS 1024
#define NAMES 256
#define WRITE_EVERY 5000

struct entry {
	char name[32];
	long value;
};

struct namespace {
	struct entry slots[SLOTS];
	int frozen;
};

static struct namespace g_system_ns;   /* what the rules read */
static struct namespace g_user_ns;     /* where the rare writes go (fixed) */
pthread_mutex_t g_namespace_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_rwlock_t g_namespace_rwlock = PTHREAD_RWLOCK_INITIALIZER;
pthread_mutex_t g_user_ns_lock = PTHREAD_MUTEX_INITIALIZER;

enum variant { BAD, RWLOCK, FIXED } variant;
static char names[NAMES][32];
static long lookups_per_thread;
static long long lock_wait_ns;
static volatile long sink;

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static unsigned hash(const char *s)
{
	unsigned h = 2166136261u;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h;
}

static struct entry *slot(struct namespace *ns, const char *name)
{
	unsigned i = hash(name) % SLOTS;

	while (ns->slots[i].name[0] && strcmp(ns->slots[i].name, name))
		i = (i + 1) % SLOTS;
	return &ns->slots[i];
}

/* The lock taken for an access, timing waits when it is busy. */
static NOINLINE void ns_lock(int write)
{
	long long t0;

	if (variant == BAD) {
		if (pthread_mutex_trylock(&g_namespace_lock) == 0)
			return;
		t0 = now_ns();
		pthread_mutex_lock(&g_namespace_lock);
	} else if (variant == RWLOCK) {
		if ((write ? pthread_rwlock_trywrlock : pthread_rwlock_tryrdlock)(&g_namespace_rwlock) == 0)
			return;
		t0 = now_ns();
		(write ? pthread_rwlock_wrlock : pthread_rwlock_rdlock)(&g_namespace_rwlock);
	} else {
		if (pthread_mutex_trylock(&g_user_ns_lock) == 0)
			return;
		t0 = now_ns();
		pthread_mutex_lock(&g_user_ns_lock);
	}
	__atomic_add_fetch(&lock_wait_ns, now_ns() - t0, __ATOMIC_RELAXED);
}

static void ns_unlock(void)
{
	if (variant == BAD)
		pthread_mutex_unlock(&g_namespace_lock);
	else if (variant == RWLOCK)
		pthread_rwlock_unlock(&g_namespace_rwlock);
	else
		pthread_mutex_unlock(&g_user_ns_lock);
}

static NOINLINE long ns_get(const char *name)
{
	long v;

	if (variant == FIXED && g_system_ns.frozen)
		return slot(&g_system_ns, name)->value; /* frozen: no lock */
	ns_lock(0);
	v = slot(&g_system_ns, name)->value;
	ns_unlock();
	return v;
}

static NOINLINE void ns_set(const char *name, long value)
{
	struct namespace *ns = variant == FIXED ? &g_user_ns : &g_system_ns;
	struct entry *e;

	ns_lock(1);
	e = slot(ns, name);
	strcpy(e->name, name);
	e->value = value;
	ns_unlock();
}

/* An apply rule: look up a few names, compute a little. */
static NOINLINE void *evaluate_rules(void *arg)
{
	unsigned seed = (unsigned)(long)arg;
	long acc = 0;

	for (long i = 0; i < lookups_per_thread; i++) {
		seed = seed * 1103515245 + 12345;
		acc += ns_get(names[(seed >> 8) % NAMES]);
		for (int k = 0; k < 20; k++)
			acc = acc * 31 + k;
		if (i % WRITE_EVERY == 0)
			ns_set("last_rule", acc);
	}
	sink = acc;
	return NULL;
}

int main(int argc, char **argv)
{
	const char *v = argc > 1 ? argv[1] : "";
	long threads = argc > 2 ? atol(argv[2]) : 4;
	pthread_t th[64];

	if (!strcmp(v, "bad"))
		variant = BAD;
	else if (!strcmp(v, "rwlock"))
		variant = RWLOCK;
	else if (!strcmp(v, "fixed"))
		variant = FIXED;
	else {
		fprintf(stderr, "usage: %s bad|rwlock|fixed [THREADS] [LOOKUPS_PER_THREAD]\n", argv[0]);
		return 2;
	}
	lookups_per_thread = argc > 3 ? atol(argv[3]) : 400000;
	if (threads < 1 || threads > 64 || lookups_per_thread < 1)
		return 2;
	for (int i = 0; i < NAMES; i++) {
		snprintf(names[i], sizeof(names[i]), "System.name%d", i);
		strcpy(slot(&g_system_ns, names[i])->name, names[i]);
		slot(&g_system_ns, names[i])->value = i;
	}
	g_system_ns.frozen = 1;

	long long t0 = now_ns();
	for (long i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, evaluate_rules, (void *)(i + 1));
	for (long i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	double s = (now_ns() - t0) / 1e9;
	printf("icinga-namespace %s: %ld lookups in %.3f s (%.2f M lookups/s), lock wait %.3f s\n", v,
	       threads * lookups_per_thread, s, threads * lookups_per_thread / s / 1e6, lock_wait_ns / 1e9);
	return 0;
}
