// The load client of tests/real/rocketmq-commitlog/run (which documents its
// arguments): THREADS threads of one RocketMQ producer (rocketmq-client,
// unmodified) sending messages synchronously to one topic.
//
//   RocketLoad NAMESRV TOPIC QUEUES THREADS SECS WARM DIR BODY
//
// Waits until the name server NAMESRV routes TOPIC's QUEUES queues (the
// broker has the topic in its config and registers it at start), then
// sends from THREADS threads for WARM seconds (warm-up, not counted),
// creates DIR/load.warm, waits for DIR/load.go, sends for SECS seconds more
// and prints the messages per second of those SECS seconds.
// Each send is DefaultMQProducer.send(msg): synchronous, one BODY-byte
// message, the queue picked by the producer's own round robin (each thread
// its own index), no retries (a failure is counted, not resent).
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

public class RocketLoad {
    public static void main(String[] a) throws Exception {
        String namesrv = a[0], topic = a[1];
        int queues = Integer.parseInt(a[2]), threads = Integer.parseInt(a[3]);
        double secs = Double.parseDouble(a[4]), warm = Double.parseDouble(a[5]);
        String dir = a[6];
        int body = Integer.parseInt(a[7]);

        long began = System.nanoTime();
        DefaultMQProducer producer = new DefaultMQProducer("kerntax-load");
        producer.setNamesrvAddr(namesrv);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setSendMsgTimeout(10_000);
        producer.setCompressMsgBodyOverHowmuch(1 << 20);
        producer.start();
        // The topic is in the broker's config (its store's topics.json),
        // routed once the broker has registered with the name server.
        for (int i = 0; ; i++) {
            try {
                if (producer.fetchPublishMessageQueues(topic).size() == queues) break;
            } catch (Exception e) {
                if (i == 300) throw e;
            }
            if (i == 300) throw new IllegalStateException("no route to " + topic + " after 30 s");
            Thread.sleep(100);
        }
        System.err.printf("topic %s with %d queues routed after %.1f s%n", topic, queues, (System.nanoTime() - began) / 1e9);

        AtomicLong sent = new AtomicLong(), failed = new AtomicLong();
        AtomicReference<Throwable> error = new AtomicReference<>();
        CyclicBarrier start = new CyclicBarrier(threads + 1);
        CyclicBarrier warmed = new CyclicBarrier(threads + 1);
        long[] deadline = new long[1];
        Thread[] ts = new Thread[threads];
        byte[] payload = new byte[body];
        for (int i = 0; i < body; i++) payload[i] = (byte) ('a' + i % 26);
        for (int i = 0; i < threads; i++) {
            ts[i] = new Thread(() -> {
                try {
                    start.await();
                    long n = 0, bad = 0;
                    for (int phase = 0; phase < 2; phase++) {
                        while (System.nanoTime() < deadline[0]) {
                            try {
                                SendResult r = producer.send(new Message(topic, payload));
                                if (r.getSendStatus() == SendStatus.SEND_OK) n++; else bad++;
                            } catch (Exception e) {
                                bad++;
                                if (bad == 1) System.err.println("send failed: " + e);
                            }
                        }
                        if (phase == 0) {
                            n = 0;
                            bad = 0;
                            warmed.await();  // all warmed up
                            warmed.await();  // the measured phase's deadline is set
                        }
                    }
                    sent.addAndGet(n);
                    failed.addAndGet(bad);
                } catch (Throwable e) {
                    if (error.compareAndSet(null, e)) e.printStackTrace();
                    start.reset();
                    warmed.reset();
                }
            }, "load-" + i);
            ts[i].start();
        }
        deadline[0] = System.nanoTime() + (long) (warm * 1e9);
        start.await();
        warmed.await();
        // Warmed up: tell the script, wait until it has attached the profiler.
        Path go = Paths.get(dir, "load.go");
        Files.createFile(Paths.get(dir, "load.warm"));
        for (int i = 0; !Files.exists(go); i++) {
            if (i == 6000) throw new IllegalStateException("no " + go + " after 60 s");
            Thread.sleep(10);
        }
        deadline[0] = System.nanoTime() + (long) (secs * 1e9);
        long t0 = System.nanoTime();
        warmed.await();
        for (Thread t : ts) t.join();
        double elapsed = (System.nanoTime() - t0) / 1e9;
        producer.shutdown();
        if (error.get() != null) System.exit(1);
        System.out.printf("throughput: %.0f msg/s (%d messages in %.2f s, %d failed, %d threads, %d queues)%n",
            sent.get() / elapsed, sent.get(), elapsed, failed.get(), threads, queues);
        // The client's own non-daemon threads must not keep the JVM.
        System.exit(failed.get() > sent.get() / 100 ? 1 : 0);
    }
}
