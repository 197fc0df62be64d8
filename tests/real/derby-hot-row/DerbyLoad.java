// The load client of tests/real/derby-hot-row/run (which documents its
// arguments) and of bench/real's derby row: JDBC transactions on one row
// or on random rows of a Derby network server.
import java.sql.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import java.util.concurrent.locks.LockSupport;

public class DerbyLoad {
    public static void main(String[] a) throws Exception {
        String url = a[1];
        if (a[0].equals("setup")) {
            setup(url, Integer.parseInt(a[2]));
        } else {
            load(url, Integer.parseInt(a[2]), Double.parseDouble(a[3]), Integer.parseInt(a[4]),
                 Double.parseDouble(a[5]), a[6], Long.parseLong(a[7]) * 1000);
        }
    }

    // Row 1, then doubling INSERT ... SELECT: ROWS rows in ~17 statements.
    static void setup(String url, int rows) throws SQLException {
        try (Connection c = DriverManager.getConnection(url + ";create=true");
             Statement s = c.createStatement()) {
            c.setAutoCommit(false);
            s.execute("CREATE TABLE acct (id INT NOT NULL PRIMARY KEY, bal BIGINT NOT NULL)");
            s.execute("INSERT INTO acct VALUES (1, 0)");
            for (int n = 1; n < rows; n *= 2) {
                s.execute("INSERT INTO acct SELECT id + " + n + ", 0 FROM acct WHERE id + " + n + " <= " + rows);
            }
            c.commit();
            try (ResultSet r = s.executeQuery("SELECT COUNT(*) FROM acct")) {
                r.next();
                if (r.getInt(1) != rows) throw new IllegalStateException("rows: " + r.getInt(1));
            }
            c.commit();
        }
    }

    static void load(String url, int threads, double secs, int pick, double warm, String dir,
                     long think) throws Exception {
        Connection[] conns = new Connection[threads];
        for (int i = 0; i < threads; i++) {
            conns[i] = DriverManager.getConnection(url);
            conns[i].setAutoCommit(false);
        }
        AtomicLong commits = new AtomicLong();
        AtomicReference<Throwable> failed = new AtomicReference<>();
        CyclicBarrier start = new CyclicBarrier(threads + 1);
        CyclicBarrier warmed = new CyclicBarrier(threads + 1);
        long[] deadline = new long[1];
        Thread[] ts = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            Connection c = conns[i];
            ts[i] = new Thread(() -> {
                try (PreparedStatement p = c.prepareStatement("UPDATE acct SET bal = bal + 1 WHERE id = ?");
                     PreparedStatement q = c.prepareStatement("SELECT bal FROM acct WHERE id = ?")) {
                    ThreadLocalRandom rnd = ThreadLocalRandom.current();
                    start.await();
                    long n = 0;
                    for (int phase = 0; phase < 2; phase++) {
                        while (System.nanoTime() < deadline[0]) {
                            int id = pick == 1 ? 1 : 1 + rnd.nextInt(pick);
                            p.setInt(1, id);
                            if (p.executeUpdate() != 1) throw new IllegalStateException("no row updated");
                            LockSupport.parkNanos(think);  // the application's own work
                            q.setInt(1, id);
                            try (ResultSet r = q.executeQuery()) {
                                if (!r.next()) throw new IllegalStateException("row gone");
                            }
                            c.commit();
                            n++;
                        }
                        if (phase == 0) {
                            n = 0;
                            warmed.await();  // all warmed up
                            warmed.await();  // the measured phase's deadline is set
                        }
                    }
                    commits.addAndGet(n);
                } catch (Throwable e) {
                    if (failed.compareAndSet(null, e)) e.printStackTrace();
                    start.reset();
                    warmed.reset();
                }
            });
            ts[i].start();
        }
        deadline[0] = System.nanoTime() + (long) (warm * 1e9);
        start.await();
        warmed.await();
        // Warmed up: tell the script, wait until it has attached the profiler.
        java.nio.file.Path go = java.nio.file.Paths.get(dir, "load.go");
        java.nio.file.Files.createFile(java.nio.file.Paths.get(dir, "load.warm"));
        for (int i = 0; !java.nio.file.Files.exists(go); i++) {
            if (i == 6000) throw new IllegalStateException("no " + go + " after 60 s");
            Thread.sleep(10);
        }
        deadline[0] = System.nanoTime() + (long) (secs * 1e9);
        long t0 = System.nanoTime();
        warmed.await();
        for (Thread t : ts) t.join();
        double elapsed = (System.nanoTime() - t0) / 1e9;
        for (Connection c : conns) c.close();
        if (failed.get() != null) System.exit(1);
        System.out.printf("throughput: %.0f tx/s (%d commits in %.2f s, %d clients)%n",
                commits.get() / elapsed, commits.get(), elapsed, threads);
    }
}
