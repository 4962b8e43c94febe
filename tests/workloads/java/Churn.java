// Churn.java: code that moves, for prowl's Java tests. Threads "ant" and "bee" each load a
// fresh copy of their own worker class per round through a new class loader (AntWork, and
// BeeWork: AntWork.class with its names rewritten), drive it into compiled code and out
// again (a type its profile never saw: an uncommon trap, deoptimization), and drop it;
// System.gc() every few rounds unloads the old copies, so their metadata and compiled code
// are freed and reused. Ant never runs BeeWork's code nor bee AntWork's.
// Usage: java Churn SECONDS
import java.io.IOException;
import java.io.InputStream;

public class Churn {
    /** Same-length renames that make BeeWork of AntWork's class file. */
    static final String[][] BEE = { { "AntWork", "BeeWork" }, { "antStep", "beeStep" }, { "antLoop", "beeLoop" } };

    /** Defines the *Work classes itself (a new class each time); the rest from its parent. */
    static class Fresh extends ClassLoader {
        Fresh() {
            super(Churn.class.getClassLoader());
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (!name.endsWith("Work"))
                return super.loadClass(name, resolve);
            synchronized (getClassLoadingLock(name)) {
                Class<?> c = findLoadedClass(name);
                if (c == null) {
                    byte[] b;
                    try (InputStream in = getParent().getResourceAsStream("AntWork.class")) {
                        b = in.readAllBytes();
                    } catch (IOException | NullPointerException e) {
                        throw new ClassNotFoundException(name, e);
                    }
                    if (name.equals("BeeWork"))
                        for (String[] r : BEE)
                            replace(b, r[0].getBytes(), r[1].getBytes());
                    c = defineClass(name, b, 0, b.length);
                }
                return c;
            }
        }
    }

    static void replace(byte[] b, byte[] from, byte[] to) {
        for (int i = 0; i + from.length <= b.length; i++)
            if (java.util.Arrays.equals(b, i, i + from.length, from, 0, from.length))
                System.arraycopy(to, 0, b, i, to.length);
    }

    static void churn(String cls, long end) {
        try {
            for (int round = 1; System.nanoTime() < end; round++) {
                Runnable r = (Runnable) new Fresh().loadClass(cls).getDeclaredConstructor().newInstance();
                r.run();
                if (round % 8 == 0)
                    System.gc();
            }
        } catch (ReflectiveOperationException e) {
            throw new RuntimeException(e);
        }
    }

    public static void main(String[] args) throws InterruptedException {
        long end = System.nanoTime() + (long)(Double.parseDouble(args[0]) * 1e9);
        Thread a = new Thread(() -> churn("AntWork", end), "ant");
        Thread b = new Thread(() -> churn("BeeWork", end), "bee");
        a.start();
        b.start();
        System.out.println("ready");
        System.out.flush();
        a.join();
        b.join();
    }
}
