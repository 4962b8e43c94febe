// Split.java: three methods that take 50 %, 30 % and 20 % of one thread's CPU time, for
// prowl's Java tests. Usage: java Split SECONDS, or java Split SECONDS threads: then thread
// "alpha" runs only fifty() and thread "beta" only twenty(); or java Split SECONDS deep:
// the three under 30 frames of deep() (BPF cost per sample, BENCHMARKS.md); or java Split
// SECONDS count: no "ready", and the number of rounds done is printed at the end; or java
// Split ROUNDS fixed: that many rounds (a fixed amount of work), then the milliseconds they
// took, wall and the thread's CPU. Each method runs its own loop of mix(), 5, 3 and 2 units per round, so
// the split holds interpreted (-Xint) and compiled alike; a round takes milliseconds, so
// main stays cold and the three are compiled on their own (not inlined into main). mix()
// runs the busy loop itself, and C2 inlines it into each caller: its loop's safepoint
// keeps mix in the compiled code's debug information (an inlined frame under each).
public class Split {
    static volatile long sink;
    static volatile int inner = 1000;
    static final int ROUNDS = 200; // a unit: ROUNDS calls of mix, inner steps each

    static long mix(long x, int n) {
        for (int k = 0; k < n; k++)
            x = x * 6364136223846793005L + 1442695040888963407L; // mix's busy line
        return x;
    }

    static void fifty() {
        long x = sink;
        int n = inner;
        for (int i = 0; i < 5 * ROUNDS; i++)
            x = mix(x, n); // fifty's busy line
        sink = x;
    }

    static void thirty() {
        long x = sink;
        int n = inner;
        for (int i = 0; i < 3 * ROUNDS; i++)
            x = mix(x, n); // thirty's busy line
        sink = x;
    }

    static void twenty() {
        long x = sink;
        int n = inner;
        for (int i = 0; i < 2 * ROUNDS; i++)
            x = mix(x, n); // twenty's busy line
        sink = x;
    }

    static void deep(int n, long end) {
        if (n > 0) {
            deep(n - 1, end);
            return;
        }
        while (System.nanoTime() < end) {
            fifty();
            thirty();
            twenty();
        }
    }

    public static void main(String[] args) {
        long end = System.nanoTime() + (long)(Double.parseDouble(args[0]) * 1e9);
        if (args.length > 1 && args[1].equals("threads")) {
            Thread a = new Thread(() -> { while (System.nanoTime() < end) fifty(); }, "alpha");
            Thread b = new Thread(() -> { while (System.nanoTime() < end) twenty(); }, "beta");
            a.start();
            b.start();
            System.out.println("ready");
            System.out.flush();
            return;
        }
        if (args.length > 1 && args[1].equals("deep")) {
            System.out.println("ready");
            System.out.flush();
            deep(30, end);
            return;
        }
        if (args.length > 1 && args[1].equals("fixed")) {
            java.lang.management.ThreadMXBean mx = java.lang.management.ManagementFactory.getThreadMXBean();
            long n = Long.parseLong(args[0]), t0 = System.nanoTime(), c0 = mx.getCurrentThreadCpuTime();
            for (long r = 0; r < n; r++) {
                fifty();
                thirty();
                twenty();
            }
            System.out.println((System.nanoTime() - t0) / 1000000 + " " + (mx.getCurrentThreadCpuTime() - c0) / 1000000);
            return;
        }
        boolean count = args.length > 1 && args[1].equals("count");
        if (!count) {
            System.out.println("ready");
            System.out.flush();
        }
        long rounds = 0;
        for (; System.nanoTime() < end; rounds++) {
            fifty();
            thirty();
            twenty();
        }
        if (count)
            System.out.println(rounds);
    }
}
