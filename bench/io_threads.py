"""An interpreter doing I/O from 4 threads: each thread sends a small
message through its own socket pair and reads the reply a partner thread
echoes, ROUNDS times. Every call drops and retakes the GIL, so the run is
dense in syscalls (send, recv, futex) and context switches: what a
threaded Python server does. Prints its own wall time."""
import socket
import sys
import threading
import time

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
PAIRS = 2


def echo(sock):
    while True:
        data = sock.recv(256)
        if not data:
            return
        sock.sendall(data)


def client(sock):
    msg = b"x" * 128
    for _ in range(ROUNDS):
        sock.sendall(msg)
        sock.recv(256)
    sock.shutdown(socket.SHUT_WR)


start = time.monotonic()
threads = []
for _ in range(PAIRS):
    a, b = socket.socketpair()
    threads.append(threading.Thread(target=echo, args=(b,)))
    threads.append(threading.Thread(target=client, args=(a,)))
for t in threads:
    t.start()
for t in threads:
    t.join()
print(f"{PAIRS * ROUNDS} round trips in {time.monotonic() - start:.3f} s")
