/*
 * Lab: the Ruby 1.8 story (../shared/stories/ruby-sigprocmask.txt).
 *
 * A user-level thread library switches between two green threads N times.
 *   bad:   switches with swapcontext(), which saves and restores the signal
 *          mask: one rt_sigprocmask system call per switch (Ruby built with
 *          --enable-pthread used getcontext/setcontext).
 *   fixed: switches with _setjmp/_longjmp, which save no signal mask (Ruby
 *          built without --enable-pthread): no system call per switch.
 * The green thread's stack is created once with makecontext in both variants.
 *
 * Usage: ruby_switch bad|fixed [SWITCHES]   (default 2000000)
 * Prints its own throughput.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

#define GREEN_STACK_BYTES (64 * 1024)

static ucontext_t main_uc, green_uc;
static jmp_buf main_jb, green_jb;
static volatile long work; /* the "Ruby code" both threads run between switches */

/* bad: every hop between the threads is a swapcontext. */
static void __attribute__((noinline)) green_thread_swapcontext(void)
{
	for (;;) {
		work++;
		swapcontext(&green_uc, &main_uc);
	}
}

static void __attribute__((noinline)) scheduler_swapcontext(long switches)
{
	for (long i = 0; i < switches; i += 2) {
		work++;
		swapcontext(&main_uc, &green_uc);
	}
}

/* fixed: hop with _setjmp/_longjmp, entered once through makecontext. */
static void __attribute__((noinline)) green_thread_longjmp(void)
{
	for (;;) {
		work++;
		if (_setjmp(green_jb) == 0)
			_longjmp(main_jb, 1);
	}
}

static void green_entry_longjmp(void)
{
	/* First arrival: remember this stack, give control back. */
	if (_setjmp(green_jb) == 0)
		swapcontext(&green_uc, &main_uc);
	green_thread_longjmp();
}

static void __attribute__((noinline)) scheduler_longjmp(long switches)
{
	swapcontext(&main_uc, &green_uc); /* bootstrap the green thread once */
	for (long i = 0; i < switches; i += 2) {
		work++;
		if (_setjmp(main_jb) == 0)
			_longjmp(green_jb, 1);
	}
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int bad = argc > 1 && strcmp(argv[1], "bad") == 0;
	int fixed = argc > 1 && strcmp(argv[1], "fixed") == 0;
	long switches = argc > 2 ? atol(argv[2]) : 2000000;
	static char stack[GREEN_STACK_BYTES];

	if ((!bad && !fixed) || switches <= 0 || switches % 2) {
		fprintf(stderr, "usage: %s bad|fixed [SWITCHES (even, > 0)]\n", argv[0]);
		return 2;
	}
	getcontext(&green_uc);
	green_uc.uc_stack.ss_sp = stack;
	green_uc.uc_stack.ss_size = sizeof(stack);
	green_uc.uc_link = NULL;
	makecontext(&green_uc, bad ? green_thread_swapcontext : green_entry_longjmp, 0);

	double t0 = now_s();
	if (bad)
		scheduler_swapcontext(switches);
	else
		scheduler_longjmp(switches);
	double elapsed = now_s() - t0;
	printf("ruby-switch %s: %ld switches in %.3f s (%.2f M switches/s)\n",
	       bad ? "bad" : "fixed", switches, elapsed, switches / elapsed / 1e6);
	return 0;
}
