// Split.java: three methods that take 50 %, 30 % and 20 % of one thread's CPU time, each
// through a small helper (mix), for prowl's Java tests. Usage: java Split.java SECONDS
// (run from source: no class file to build). The split is by work units, so it holds
// interpreted (-Xint) and compiled alike: each call does the same loop of mix().
public class Split {
    static long sink;

    static long mix(long x) {
        return x * 6364136223846793005L + 1442695040888963407L; // the busy line of every method
    }

    static long work(int units) {
        long x = sink;
        for (int i = 0; i < units * 2000; i++)
            x = mix(x);
        return x;
    }

    static void fifty() { sink += work(5); }
    static void thirty() { sink += work(3); }
    static void twenty() { sink += work(2); }

    public static void main(String[] args) {
        long end = System.nanoTime() + (long)(Double.parseDouble(args[0]) * 1e9);
        System.out.println("ready");
        System.out.flush();
        while (System.nanoTime() < end) {
            fifty();
            thirty();
            twenty();
        }
        System.out.println(sink);
    }
}
