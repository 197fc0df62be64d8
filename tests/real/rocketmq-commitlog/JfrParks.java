// Ground truth for tests/real/rocketmq-commitlog: sums a broker's JFR
// recording (jdk.ThreadPark and jdk.JavaMonitorEnter, threshold 0, with
// stack traces) over a time window.
//
//   java JfrParks.java FILE.jfr FROM_EPOCH_MS TO_EPOCH_MS
//
// Prints, per (thread pool, what was waited for, where), the parks that
// began in the window: how many, their total time, the threads, and the
// waiting per second of the window (= threads waiting there on average).
// "Thread pool" is the thread's name without its trailing number; "what" is
// the park's blocker class (ReentrantLock$NonfairSync: a ReentrantLock;
// AbstractQueuedSynchronizer$ConditionObject: a condition, e.g. a
// LinkedBlockingQueue's notEmpty) or the monitor's class; "where" is the
// first frame outside java.*/jdk.*/sun.* ("> the JDK method it called").
import java.nio.file.Path;
import java.time.Instant;
import java.util.*;

import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordedStackTrace;
import jdk.jfr.consumer.RecordedThread;
import jdk.jfr.consumer.RecordingFile;

public class JfrParks {
    static final class Row {
        long n, ns;
        Set<String> threads = new TreeSet<>();
    }

    public static void main(String[] a) throws Exception {
        Instant from = Instant.ofEpochMilli(Long.parseLong(a[1]));
        Instant to = Instant.ofEpochMilli(Long.parseLong(a[2]));
        double secs = (Long.parseLong(a[2]) - Long.parseLong(a[1])) / 1000.0;
        Map<String, Row> rows = new HashMap<>();
        long total = 0;
        try (RecordingFile f = new RecordingFile(Path.of(a[0]))) {
            while (f.hasMoreEvents()) {
                RecordedEvent e = f.readEvent();
                String type = e.getEventType().getName();
                boolean park = type.equals("jdk.ThreadPark");
                if (!park && !type.equals("jdk.JavaMonitorEnter")) continue;
                if (e.getStartTime().isBefore(from) || e.getStartTime().isAfter(to)) continue;
                RecordedThread t = e.getThread();
                String name = t == null ? "?" : t.getJavaName();
                String pool = name == null ? "?" : name.replaceAll("[0-9]+$", "");
                String what;
                if (park) {
                    jdk.jfr.consumer.RecordedClass c = e.getClass("parkedClass");
                    what = "park " + (c == null ? "-" : c.getName().replaceAll("^.*\\.", ""));
                } else {
                    jdk.jfr.consumer.RecordedClass c = e.getClass("monitorClass");
                    what = "monitor " + (c == null ? "-" : c.getName().replaceAll("^.*\\.", ""));
                }
                String where = where(e.getStackTrace());
                Row r = rows.computeIfAbsent(pool + "\t" + what + "\t" + where, k -> new Row());
                r.n++;
                r.ns += e.getDuration().toNanos();
                r.threads.add(t == null ? name : name + "#" + t.getJavaThreadId());
                total++;
            }
        }
        List<Map.Entry<String, Row>> list = new ArrayList<>(rows.entrySet());
        list.sort((x, y) -> Long.compare(y.getValue().ns, x.getValue().ns));
        System.out.printf("JFR: %d parks and monitor enters began in the %.1f s window; by time waited:%n", total, secs);
        System.out.printf("  %8s %8s %7s %4s  %s%n", "events", "waited", "waiting", "thr", "pool | what | where");
        int shown = 0;
        for (Map.Entry<String, Row> x : list) {
            Row r = x.getValue();
            // The 14 longest, and every one of the send pool's.
            if (shown++ >= 14 && !x.getKey().startsWith("SendMessageThread_")) continue;
            System.out.printf("  %8d %7.2fs %7.2f %4d  %s%n", r.n, r.ns / 1e9, r.ns / 1e9 / secs,
                r.threads.size(), x.getKey().replace("\t", " | "));
        }
    }

    static String where(RecordedStackTrace st) {
        if (st == null) return "-";
        List<RecordedFrame> fs = st.getFrames();
        String below = "", queue = null;
        for (RecordedFrame fr : fs) {
            String cls = fr.getMethod().getType().getName();
            String m = cls.replaceAll("^.*\\.", "") + "." + fr.getMethod().getName();
            if (cls.startsWith("java.") || cls.startsWith("jdk.") || cls.startsWith("sun.")) {
                // A JDK-only stack (a pool's worker) is told by its queue's
                // method: the first frame above the lock and park code.
                if (queue == null && !cls.startsWith("java.util.concurrent.locks.")
                    && !cls.startsWith("jdk.internal.") && !cls.equals("java.util.concurrent.ForkJoinPool")) {
                    queue = m;
                }
                below = m;
                continue;
            }
            return m + (below.isEmpty() ? "" : " > " + below);
        }
        return queue != null ? queue + " (JDK frames only)" : below;
    }
}
