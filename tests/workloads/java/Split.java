// Split.java: three methods that take 50 %, 30 % and 20 % of one thread's CPU time, for
// prowl's Java tests. Usage: java Split SECONDS, or java Split SECONDS threads: then thread
// "alpha" runs only fifty() and thread "beta" only twenty(); or java Split SECONDS deep:
// the three under 30 frames of deep() (BPF cost per sample, BENCHMARKS.md). Each method runs its own loop of mix(), 5, 3 and 2 units per round, so
// the split holds interpreted (-Xint) and compiled alike; a round takes milliseconds, so
// main stays cold and the three are compiled on their own (not inlined into main).
public class Split {
    static volatile long sink;
    static final int UNIT = 200_000;

    static long mix(long x) {
        return x * 6364136223846793005L + 1442695040888963407L;
    }

    static void fifty() {
        long x = sink;
        for (int i = 0; i < 5 * UNIT; i++)
            x = mix(x); // fifty's busy line
        sink = x;
    }

    static void thirty() {
        long x = sink;
        for (int i = 0; i < 3 * UNIT; i++)
            x = mix(x); // thirty's busy line
        sink = x;
    }

    static void twenty() {
        long x = sink;
        for (int i = 0; i < 2 * UNIT; i++)
            x = mix(x); // twenty's busy line
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
        System.out.println("ready");
        System.out.flush();
        while (System.nanoTime() < end) {
            fifty();
            thirty();
            twenty();
        }
    }
}
