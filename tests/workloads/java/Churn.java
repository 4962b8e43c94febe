// Churn.java: code that moves, for prowl's Java tests. Threads "ant" and "bee" each load a
// fresh copy of their own worker class (AntWork, BeeWork) per round through a new class
// loader, drive it into compiled code and out again (a type its profile never saw: an
// uncommon trap, deoptimization), and drop it; System.gc() every few rounds unloads the
// old copies, so their compiled code is freed and the code cache reused. Ant never runs
// BeeWork's code nor bee AntWork's. Usage: java Churn SECONDS
import java.io.IOException;
import java.io.InputStream;

public class Churn {
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
                    try (InputStream in = getParent().getResourceAsStream(name + ".class")) {
                        b = in.readAllBytes();
                    } catch (IOException | NullPointerException e) {
                        throw new ClassNotFoundException(name, e);
                    }
                    c = defineClass(name, b, 0, b.length);
                }
                return c;
            }
        }
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
