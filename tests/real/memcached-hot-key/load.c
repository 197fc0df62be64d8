/* Load client for tests/real/memcached-hot-key: memcached's text protocol
 * over loopback, pipelined.
 *
 *   load PORT PROCS CONNS DEPTH SECS KEYS [GO_FILE]
 *
 * PROCS processes (fork), each driving CONNS connections with epoll. On
 * each connection it writes DEPTH requests `incr kNNNNN 1\r\n` in one
 * write(), reads DEPTH replies, and starts over (DEPTH requests always in
 * flight per connection). Keys: `k0` only when KEYS is 1 (a hot counter);
 * else random among k0..k(KEYS-1) (xorshift, seeded per connection). The
 * keys must exist (`load PORT 0 0 0 0 KEYS` creates k0..k(KEYS-1) with
 * value 0 over one connection and exits). KEYS < 0: connection i of all
 * (numbered across processes) increments its own key k(i * -KEYS). If
 * GO_FILE is given, each process waits for it to exist (up to 60 s) before
 * it starts (the profiler attaches first). LOAD_OP=get in the environment
 * sends `get KEY` instead of incr (tried while choosing the load).
 * Prints `ops N secs S rate R`: the requests answered (in whole rounds) by
 * all processes, per second.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int port;
static int op_get; /* LOAD_OP=get: get instead of incr */

static int dial(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        perror("connect");
        exit(1);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void writeall(int fd, const char *b, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            perror("write");
            exit(1);
        }
        b += w;
        n -= (size_t)w;
    }
}

/* Creates the keys, pipelined 100 at a time. */
static void setup(long keys) {
    int fd = dial();
    char buf[8192], rd[4096];
    for (long k = 0; k < keys;) {
        int n = 0, batch = 0;
        for (; batch < 100 && k < keys; batch++, k++)
            n += sprintf(buf + n, "set k%ld 0 0 1\r\n0\r\n", k);
        writeall(fd, buf, n);
        int lines = 0;
        while (lines < batch) {
            ssize_t r = read(fd, rd, sizeof rd);
            if (r <= 0) { perror("read"); exit(1); }
            for (ssize_t i = 0; i < r; i++) lines += rd[i] == '\n';
        }
    }
    close(fd);
}

struct conn {
    int fd;
    int pending;      /* reply lines still to read in this round */
    int bol;          /* at the beginning of a line */
    uint64_t seed;
    long own;         /* its own key when KEYS < 0 */
};

static uint64_t xorshift(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void send_round(struct conn *c, int depth, long keys) {
    static char buf[1 << 16];
    int n = 0;
    for (int i = 0; i < depth; i++) {
        long k = keys == 1 ? 0 : keys < 0 ? c->own : (long)(xorshift(&c->seed) % (uint64_t)keys);
        n += sprintf(buf + n, op_get ? "get k%ld\r\n" : "incr k%ld 1\r\n", k);
    }
    writeall(c->fd, buf, n);
    c->pending = depth * (op_get ? 3 : 1); /* VALUE, data, END */
    c->bol = 1;
}

static long drive(int conns, int depth, double secs, long keys, int id) {
    int ep = epoll_create1(0);
    struct conn *cs = calloc(conns, sizeof *cs);
    for (int i = 0; i < conns; i++) {
        cs[i].fd = dial();
        cs[i].seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(id * 1000 + i + 1);
        cs[i].own = (long)(id * conns + i) * -keys;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &cs[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev);
    }
    long ops = 0;
    double end = now() + secs;
    for (int i = 0; i < conns; i++) send_round(&cs[i], depth, keys);
    char rd[1 << 16];
    while (now() < end) {
        struct epoll_event evs[64];
        int n = epoll_wait(ep, evs, 64, 100);
        for (int e = 0; e < n; e++) {
            struct conn *c = evs[e].data.ptr;
            ssize_t r = read(c->fd, rd, sizeof rd);
            if (r <= 0) {
                if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
                fprintf(stderr, "load: connection closed\n");
                exit(1);
            }
            for (ssize_t i = 0; i < r; i++) {
                if (c->bol && (rd[i] == 'N' || rd[i] == 'C' || rd[i] == 'S' ||
                               (rd[i] == 'E' && i + 1 < r && rd[i + 1] == 'R'))) {
                    /* NOT_FOUND, CLIENT_ERROR, SERVER_ERROR, ERROR */
                    fprintf(stderr, "load: error reply: %.40s\n", rd + i);
                    exit(1);
                }
                c->bol = rd[i] == '\n';
                if (c->bol && --c->pending == 0) {
                    ops += depth;
                    send_round(c, depth, keys);
                }
            }
        }
    }
    return ops;
}

/* Waits for GO to exist, up to 60 s (the script that would create it may
 * have failed). */
static int await_go(const char *go) {
    for (int i = 0; i < 6000; i++) {
        if (access(go, F_OK) == 0) return 1;
        usleep(10000);
    }
    fprintf(stderr, "load: %s never came\n", go);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: load PORT PROCS CONNS DEPTH SECS KEYS [GO_FILE]\n");
        return 2;
    }
    port = atoi(argv[1]);
    op_get = getenv("LOAD_OP") && strcmp(getenv("LOAD_OP"), "get") == 0;
    int procs = atoi(argv[2]), conns = atoi(argv[3]), depth = atoi(argv[4]);
    double secs = atof(argv[5]);
    long keys = atol(argv[6]);
    const char *go = argc > 7 ? argv[7] : NULL;
    if (procs == 0) {
        setup(keys);
        return 0;
    }
    long *ops = mmap(NULL, sizeof(long) * procs, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    for (int p = 0; p < procs; p++) {
        if (fork() == 0) {
            if (go && !await_go(go)) _exit(1);
            ops[p] = drive(conns, depth, secs, keys, p);
            _exit(0);
        }
    }
    if (go && !await_go(go)) return 1;
    double t0 = now();
    int status, failed = 0;
    while (wait(&status) > 0)
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    double t = now() - t0;
    if (t > secs + 0.2) t = secs + 0.2;
    long total = 0;
    for (int p = 0; p < procs; p++) total += ops[p];
    printf("ops %ld secs %.2f rate %.0f\n", total, secs, total / secs);
    return failed;
}
