// Off-CPU time in Java methods, then the JVM exits (`java JavaWaits ROUNDS
// MS`, no flag: a short-lived tool, as javac or a build's wrapper): warm
// spins 1.5 s of CPU first (the agent reads the JVM's VMStructs once its
// code cache is there, and the walk starts), then waiter sleeps MS ms,
// ROUNDS times, under main. Prints slept= at the end.
public class JavaWaits {
    static long warm() {
        long end = System.nanoTime() + 1_500_000_000L, x = 0;
        while (System.nanoTime() < end)
            x = (x * 31 + 1) % 1000003;
        return x;
    }

    static void waiter(long ms) throws InterruptedException {
        Thread.sleep(ms);
    }

    public static void main(String[] args) throws InterruptedException {
        int rounds = Integer.parseInt(args[0]);
        long ms = Long.parseLong(args[1]);
        warm();
        for (int i = 0; i < rounds; i++)
            waiter(ms);
        System.out.printf("slept=%.2f%n", rounds * ms / 1000.0);
    }
}
