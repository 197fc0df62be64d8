// A producer (the main thread) handing small jobs to worker_threads through
// a SharedArrayBuffer, one job at a time per worker (tests/real/node-spin).
//
// usage: node spin_work.js MODE WORKERS SECONDS [PIDFILE]
//   MODE spin: an idle worker waits for its next job by polling its slot
//              with Atomics.load in a loop (plain loads: no PAUSE, no CAS,
//              no syscall) -- waitForJob below;
//        wait: it sleeps in Atomics.wait until the producer's
//              Atomics.notify.
// Preparing a job costs the producer ~50 us of arithmetic, running it ~30
// us of a worker's: the producer is the slower stage, the workers wait for
// it most of the time. When no worker is free the producer waits for one
// in Atomics.wait (in both modes). Prints
//   jobs: N in S s = R jobs/s (MODE, W workers)
// counted over the SECONDS the producer runs, once every worker is online.
const { Worker, isMainThread, workerData } = require('worker_threads');

const PREPARE_US = 50;
const JOB_US = 30;

// CPU work for `us` microseconds (clock_gettime is the vDSO: no syscall).
function burn(us) {
  const end = process.hrtime.bigint() + BigInt(us * 1000);
  let x = 1;
  while (process.hrtime.bigint() < end) {
    for (let i = 0; i < 100; i++) x = (x * 1103515245 + 12345) % 2147483648;
  }
  return x;
}

// The shared array: slot i (< workers) of worker i: 0 idle, 1 a job is
// there, 2 stop; then the number of idle workers and the jobs done.
const IDLE = 0;
const JOB = 1;
const STOP = 2;

if (isMainThread) {
  const [mode, workersArg, secondsArg, pidfile] = process.argv.slice(2);
  const workers = Number(workersArg);
  const seconds = Number(secondsArg);
  if (!['spin', 'wait'].includes(mode) || !(workers > 0) || !(seconds > 0)) {
    console.error('usage: node spin_work.js spin|wait WORKERS SECONDS [PIDFILE]');
    process.exit(2);
  }
  if (pidfile) require('fs').writeFileSync(pidfile, `${process.pid}\n`);
  const slots = new Int32Array(new SharedArrayBuffer(4 * (workers + 2)));
  const FREE = workers;
  const DONE = workers + 1;
  Atomics.store(slots, FREE, workers);
  let online = 0;
  let exited = 0;
  let result = '';

  // Prepares a job, hands it to an idle worker (waiting for one if none
  // is), for `seconds`.
  function produce() {
    const t0 = process.hrtime.bigint();
    const end = t0 + BigInt(seconds * 1e9);
    const done0 = Atomics.load(slots, DONE);
    let next = 0;
    while (process.hrtime.bigint() < end) {
      burn(PREPARE_US);
      while (Atomics.load(slots, FREE) === 0) Atomics.wait(slots, FREE, 0);
      while (Atomics.load(slots, next) !== IDLE) next = (next + 1) % workers;
      Atomics.sub(slots, FREE, 1);
      Atomics.store(slots, next, JOB);
      if (mode === 'wait') Atomics.notify(slots, next, 1);
      next = (next + 1) % workers;
    }
    const secs = Number(process.hrtime.bigint() - t0) / 1e9;
    const jobs = Atomics.load(slots, DONE) - done0;
    result = `jobs: ${jobs} in ${secs.toFixed(3)} s = ${(jobs / secs).toFixed(0)} jobs/s (${mode}, ${workers} workers)`;
    // Stop each worker once it is idle.
    for (let i = 0; i < workers; i++) {
      while (Atomics.compareExchange(slots, i, IDLE, STOP) !== IDLE) {}
      Atomics.notify(slots, i, 1);
    }
  }

  for (let i = 0; i < workers; i++) {
    const w = new Worker(__filename, { workerData: { mode, slots, i } });
    w.on('online', () => {
      if (++online === workers) setImmediate(produce);
    });
    w.on('error', (e) => {
      console.error(e);
      process.exitCode = 1;
    });
    w.on('exit', () => {
      if (++exited === workers) console.log(result);
    });
  }
} else {
  const { mode, slots, i } = workerData;
  const FREE = slots.length - 2;
  const DONE = slots.length - 1;

  // The wait for the next job: a busy-wait on the slot, or a sleep in V8's
  // futex emulation until the producer notifies.
  function waitForJob() {
    if (mode === 'wait') {
      Atomics.wait(slots, i, IDLE);
      return;
    }
    while (Atomics.load(slots, i) === IDLE) {}
  }

  function workerLoop() {
    for (;;) {
      waitForJob();
      if (Atomics.load(slots, i) === STOP) return;
      burn(JOB_US);
      Atomics.add(slots, DONE, 1);
      Atomics.store(slots, i, IDLE);
      // The producer may be waiting for a free worker.
      if (Atomics.add(slots, FREE, 1) === 0) Atomics.notify(slots, FREE, 1);
    }
  }

  workerLoop();
}
