/*
 * Lab: the ProL2TP story (../shared/stories/prol2tp-timers-and-poll.txt).
 *
 * An L2TP daemon brings tunnels up one after another. Each tunnel has a
 * socket (here one end of a socketpair; the peer writes to the other end)
 * and a hello timer. The event loop waits for the socket that is ready,
 * handles its control message and re-arms the tunnel's timer; only the
 * tunnel being brought up talks, all the others are idle.
 *   bad:   poll() over every tunnel's fd on each turn, and the timers kept
 *          in a list ordered by expiry (usl_ord_list_add walks it).
 *   fixed: epoll, and the timers in a binary heap.
 *
 * Usage: prol2tp_tunnels bad|fixed [TUNNELS] [MESSAGES_PER_TUNNEL]
 * Prints tunnels and events per second.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

struct timer {
	long long expiry;
	int tunnel;
	int heap_pos;
	struct timer *next; /* the ordered list (bad) */
};

struct tunnel {
	int fd, peer;
	struct timer timer;
};

static struct tunnel *tunnels;
static int ntunnels;
static int bad;
static struct timer *timer_list;           /* bad: ordered by expiry */
static struct timer **heap;                /* fixed: a min-heap by expiry */
static int heap_len;
static unsigned rng = 12345;

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* USL's ordered list: a linear walk to find the insertion point. */
static NOINLINE void usl_ord_list_add(struct timer *t)
{
	struct timer **p = &timer_list;

	while (*p && (*p)->expiry <= t->expiry)
		p = &(*p)->next;
	t->next = *p;
	*p = t;
}

static NOINLINE void usl_ord_list_del(struct timer *t)
{
	struct timer **p = &timer_list;

	while (*p && *p != t)
		p = &(*p)->next;
	if (*p)
		*p = t->next;
}

static void heap_swap(int a, int b)
{
	struct timer *x = heap[a];

	heap[a] = heap[b];
	heap[b] = x;
	heap[a]->heap_pos = a;
	heap[b]->heap_pos = b;
}

static void heap_up(int i)
{
	while (i > 0 && heap[(i - 1) / 2]->expiry > heap[i]->expiry) {
		heap_swap(i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static void heap_down(int i)
{
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i;

		if (l < heap_len && heap[l]->expiry < heap[m]->expiry)
			m = l;
		if (r < heap_len && heap[r]->expiry < heap[m]->expiry)
			m = r;
		if (m == i)
			return;
		heap_swap(i, m);
		i = m;
	}
}

static NOINLINE void timer_heap_add(struct timer *t)
{
	heap[heap_len] = t;
	t->heap_pos = heap_len++;
	heap_up(t->heap_pos);
}

static NOINLINE void timer_heap_del(struct timer *t)
{
	int i = t->heap_pos;

	heap_swap(i, --heap_len);
	if (i < heap_len) {
		heap_up(i);
		heap_down(i);
	}
}

/* (Re-)arms a tunnel's hello timer 1..60 s out. */
static NOINLINE void timer_arm(struct tunnel *tn, int rearm)
{
	rng = rng * 1103515245 + 12345;
	if (rearm)
		(bad ? usl_ord_list_del : timer_heap_del)(&tn->timer);
	tn->timer.expiry = now_ns() + (1 + (rng >> 8) % 60) * 1000000000LL;
	(bad ? usl_ord_list_add : timer_heap_add)(&tn->timer);
}

static NOINLINE void handle_control_message(struct tunnel *tn)
{
	char buf[64];

	if (read(tn->fd, buf, sizeof(buf)) <= 0)
		exit(4);
	timer_arm(tn, 1);
}

static struct pollfd *pfds;
static int epfd;

/* One turn of the event loop: wait for the ready tunnel and handle it. */
static NOINLINE void event_loop_once(void)
{
	if (bad) {
		int n = poll(pfds, ntunnels, 1000);

		for (int i = 0; n > 0 && i < ntunnels; i++)
			if (pfds[i].revents & POLLIN) {
				handle_control_message(&tunnels[i]);
				n--;
			}
	} else {
		struct epoll_event ev[8];
		int n = epoll_wait(epfd, ev, 8, 1000);

		for (int i = 0; i < n; i++)
			handle_control_message(&tunnels[ev[i].data.u32]);
	}
}

static NOINLINE void tunnel_bringup(int i, long messages)
{
	struct tunnel *tn = &tunnels[i];
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) != 0) {
		perror("socketpair");
		exit(3);
	}
	tn->fd = sv[0];
	tn->peer = sv[1];
	tn->timer.tunnel = i;
	pfds[i].fd = tn->fd;
	pfds[i].events = POLLIN;
	if (!bad) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (unsigned)i };

		epoll_ctl(epfd, EPOLL_CTL_ADD, tn->fd, &ev);
	}
	ntunnels = i + 1;
	timer_arm(tn, 0);
	/* The control exchange of bring-up: the peer speaks, we answer. */
	for (long m = 0; m < messages; m++) {
		if (write(tn->peer, "SCCRQ", 5) != 5)
			exit(4);
		event_loop_once();
	}
}

int main(int argc, char **argv)
{
	const char *v = argc > 1 ? argv[1] : "";
	int count = argc > 2 ? atoi(argv[2]) : 1000;
	long messages = argc > 3 ? atol(argv[3]) : 20;
	struct rlimit rl = { 8192, 8192 };

	bad = !strcmp(v, "bad");
	if ((!bad && strcmp(v, "fixed")) || count < 1 || count > 3000 || messages < 1) {
		fprintf(stderr, "usage: %s bad|fixed [TUNNELS (<= 3000)] [MESSAGES_PER_TUNNEL]\n", argv[0]);
		return 2;
	}
	setrlimit(RLIMIT_NOFILE, &rl);
	tunnels = calloc(count, sizeof(*tunnels));
	pfds = calloc(count, sizeof(*pfds));
	heap = calloc(count, sizeof(*heap));
	epfd = epoll_create1(0);
	long long t0 = now_ns();
	for (int i = 0; i < count; i++)
		tunnel_bringup(i, messages);
	double s = (now_ns() - t0) / 1e9;
	printf("prol2tp-tunnels %s: %d tunnels up in %.3f s (%.0f tunnels/s, %.0f events/s)\n", v, count, s, count / s,
	       count * messages / s);
	return 0;
}
