# CPU-bound pure-Ruby work split over N threads (tests/real/ruby-gvl).
#
# usage: ruby gvl_work.rb THREADS TOTAL_ITERATIONS
# Each thread runs TOTAL/THREADS iterations of an integer loop; with more
# than one thread they serialise on the GVL. Prints the work rate as
# `work: <iterations> iterations in <s> s = <M> Miter/s`.
threads = Integer(ARGV[0])
total = Integer(ARGV[1])
per = total / threads

def work(n)
  acc = 0
  i = 0
  while i < n
    acc = (acc + i * i) % 1_000_003
    i += 1
  end
  acc
end

start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
sum =
  if threads == 1
    work(per)
  else
    Array.new(threads) { Thread.new { work(per) } }.map(&:value).sum
  end
secs = Process.clock_gettime(Process::CLOCK_MONOTONIC) - start
done = per * threads
printf("work: %d iterations in %.3f s = %.2f Miter/s (%d threads, checksum %d)\n",
       done, secs, done / secs / 1e6, threads, sum)
