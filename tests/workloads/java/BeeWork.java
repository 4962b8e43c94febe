// BeeWork.java: the worker thread "bee" of Churn.java loads afresh each round: a loop
// hot enough to be compiled, then a type its compiled code never saw (deoptimization).
public class BeeWork implements Runnable {
    static volatile long sink;

    static long beeStep(long x, Object o) {
        return o instanceof Integer ? x * 31 + (Integer)o : x ^ o.hashCode();
    }

    static long beeLoop(long x, Object o, int n) {
        for (int i = 0; i < n; i++)
            x = beeStep(x, o);
        return x;
    }

    @Override
    public void run() {
        Integer one = 1;
        long x = sink;
        for (int k = 0; k < 40; k++)
            x = beeLoop(x, one, 20_000);
        x = beeLoop(x, "bee", 20_000); // the uncommon trap
        sink = x;
    }
}
