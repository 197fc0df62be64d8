/*
 * Lab: the Zabbix story (../shared/stories/zabbix-global-config-lock.txt).
 *
 * Poller processes (as Zabbix's are) take items from a queue in shared
 * memory, poll them, and store the values. The configuration cache is
 * guarded by one global lock, a SysV semaphore (ZBX_MUTEX_CONFIG).
 *   bad:   one queue; taking an item, storing its value, and resolving the
 *          {$SNMP_COMMUNITY} user macro each take the global config lock,
 *          the macro lookup (DCget_user_macro) scanning the macro table
 *          under it although the community never changes.
 *   fixed: queues sharded by itemid % 4, each with its own semaphore, the
 *          pollers bound to queue procnum % 4, and the macro resolved once.
 *
 * Usage: zabbix_config bad|fixed [POLLERS] [ITEMS]
 * Prints the values it processed per second (NVPS) and the time its pollers
 * waited for the locks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define SHARDS 4
#define MACROS 400
#define ZBX_MUTEX_CONFIG 0 /* semaphore 0: the global config lock; 1..4: queues */

struct shard {
	long next;     /* next item to poll: itemid = next * SHARDS + shard */
};

struct cache {
	struct shard queue[SHARDS];
	char macro_names[MACROS][32];
	char macro_values[MACROS][32];
	long long lock_wait_ns;
	long items;
	long values[];
};

static int semid;
static struct cache *cache;
static int bad;

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void busy_ns(long ns)
{
	long long end = now_ns() + ns;

	while (now_ns() < end)
		;
}

/* zbx_mutex_lock: semop -1, timing the wait when it would block. */
static NOINLINE void zbx_mutex_lock(int sem)
{
	struct sembuf down = { (unsigned short)sem, -1, IPC_NOWAIT };
	long long t0;

	if (semop(semid, &down, 1) == 0)
		return;
	t0 = now_ns();
	down.sem_flg = 0;
	while (semop(semid, &down, 1) != 0 && errno == EINTR)
		;
	__atomic_add_fetch(&cache->lock_wait_ns, now_ns() - t0, __ATOMIC_RELAXED);
}

static NOINLINE void zbx_mutex_unlock(int sem)
{
	struct sembuf up = { (unsigned short)sem, 1, 0 };

	semop(semid, &up, 1);
}

/* The macro nobody needed: a scan of the macro table under the global lock. */
static NOINLINE const char *DCget_user_macro(const char *name)
{
	const char *value = NULL;

	zbx_mutex_lock(ZBX_MUTEX_CONFIG);
	for (int i = 0; i < MACROS; i++)
		if (!strcmp(cache->macro_names[i], name))
			value = cache->macro_values[i];
	zbx_mutex_unlock(ZBX_MUTEX_CONFIG);
	return value;
}

static NOINLINE long DCconfig_get_poller_item(int shard)
{
	int sem = bad ? ZBX_MUTEX_CONFIG : 1 + shard;
	long id;

	zbx_mutex_lock(sem);
	id = cache->queue[shard].next++ * (bad ? 1 : SHARDS) + (bad ? 0 : shard);
	zbx_mutex_unlock(sem);
	return id < cache->items ? id : -1;
}

static NOINLINE void dc_add_history(int shard, long itemid, long value)
{
	int sem = bad ? ZBX_MUTEX_CONFIG : 1 + shard;

	zbx_mutex_lock(sem);
	cache->values[itemid] = value;
	zbx_mutex_unlock(sem);
}

/* An SNMP check: some work that needs no lock. */
static NOINLINE long get_value_snmp(long itemid, const char *community)
{
	busy_ns(8000);
	return itemid * 7 + (long)strlen(community);
}

static NOINLINE void poller(int procnum)
{
	int shard = bad ? 0 : procnum % SHARDS;
	const char *community = bad ? NULL : DCget_user_macro("{$SNMP_COMMUNITY}");
	long itemid;

	while ((itemid = DCconfig_get_poller_item(shard)) >= 0) {
		if (bad)
			community = DCget_user_macro("{$SNMP_COMMUNITY}");
		dc_add_history(shard, itemid, get_value_snmp(itemid, community));
	}
}

int main(int argc, char **argv)
{
	const char *v = argc > 1 ? argv[1] : "";
	long pollers = argc > 2 ? atol(argv[2]) : 8;
	long items = argc > 3 ? atol(argv[3]) : 20000;
	unsigned short init[1 + SHARDS] = { 1, 1, 1, 1, 1 };

	bad = !strcmp(v, "bad");
	if ((!bad && strcmp(v, "fixed")) || pollers < 1 || pollers > 64 || items < 1) {
		fprintf(stderr, "usage: %s bad|fixed [POLLERS] [ITEMS]\n", argv[0]);
		return 2;
	}
	cache = mmap(NULL, sizeof(*cache) + items * sizeof(long), PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	semid = semget(IPC_PRIVATE, 1 + SHARDS, IPC_CREAT | 0600);
	if (cache == MAP_FAILED || semid < 0) {
		perror("zabbix_config: shared memory or semaphores");
		return 1;
	}
	semctl(semid, 0, SETALL, init);
	cache->items = items;
	for (int i = 0; i < MACROS; i++) {
		snprintf(cache->macro_names[i], 32, "{$MACRO_%d}", i);
		snprintf(cache->macro_values[i], 32, "value%d", i);
	}
	strcpy(cache->macro_names[MACROS - 1], "{$SNMP_COMMUNITY}");
	strcpy(cache->macro_values[MACROS - 1], "public");

	long long t0 = now_ns();
	for (int p = 0; p < pollers; p++) {
		if (fork() == 0) {
			poller(p);
			_exit(0);
		}
	}
	while (wait(NULL) > 0)
		;
	double s = (now_ns() - t0) / 1e9;
	printf("zabbix-config %s: %ld values in %.3f s (%.0f NVPS), %ld pollers, lock wait %.3f s\n", v, items, s,
	       items / s, pollers, cache->lock_wait_ns / 1e9);
	semctl(semid, 0, IPC_RMID);
	return 0;
}
