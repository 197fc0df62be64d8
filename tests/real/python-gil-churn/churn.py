"""Threads that each do a little Python and a small write, over and over
(a logger, a line-by-line exporter): every os.write releases the GIL and
takes it back after. Usage: churn.py THREADS UNITS (units in all)."""
import os
import sys
import threading
import time

threads, units = int(sys.argv[1]), int(sys.argv[2])
fd = os.open("/dev/null", os.O_WRONLY)


def work(n):
    total = 0
    for i in range(n):
        for j in range(20):
            total += j
        os.write(fd, b"%d\n" % total)


start = time.monotonic()
pool = [threading.Thread(target=work, args=(units // threads,)) for _ in range(threads)]
for t in pool:
    t.start()
for t in pool:
    t.join()
print(f"throughput: {units / (time.monotonic() - start):.0f} units/s ({threads} threads)")
