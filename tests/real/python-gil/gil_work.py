"""CPU-bound pure-Python work split over N threads (tests/real/python-gil).

usage: python3 gil_work.py THREADS TOTAL_ITERATIONS
Each thread runs TOTAL/THREADS iterations of an integer loop; with more than
one thread they serialise on the GIL. Prints the work rate as
`work: <iterations> iterations in <s> s = <M> Miter/s`.
"""
import sys
import threading
import time


def work(n, out, i):
    acc = 0
    for k in range(n):
        acc = (acc + k * k) % 1000003
    out[i] = acc


def main():
    threads = int(sys.argv[1])
    total = int(sys.argv[2])
    per = total // threads
    out = [0] * threads
    start = time.perf_counter()
    if threads == 1:
        work(per, out, 0)
    else:
        ts = [threading.Thread(target=work, args=(per, out, i)) for i in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    secs = time.perf_counter() - start
    done = per * threads
    print(f"work: {done} iterations in {secs:.3f} s = {done / secs / 1e6:.2f} Miter/s "
          f"({threads} threads, checksum {sum(out)})")


if __name__ == "__main__":
    main()
