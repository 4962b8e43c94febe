// AntWork.java: the worker that Churn.java loads afresh each round, as AntWork for thread
// "ant" and, its names rewritten, as BeeWork for "bee": a loop hot enough to be compiled,
// then a type its compiled code never saw (deoptimization).
public class AntWork implements Runnable {
    static volatile long sink;

    static long antStep(long x, Object o) {
        return o instanceof Integer ? x * 31 + (Integer)o : x ^ o.hashCode();
    }

    static long antLoop(long x, Object o, int n) {
        for (int i = 0; i < n; i++)
            x = antStep(x, o);
        return x;
    }

    @Override
    public void run() {
        Integer one = 1;
        long x = sink;
        for (int k = 0; k < 40; k++)
            x = antLoop(x, one, 20_000);
        x = antLoop(x, "other", 20_000); // the uncommon trap
        sink = x;
    }
}
