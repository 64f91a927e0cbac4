// A Java workload with a known answer: hotA takes twice the CPU time of
// hotB, each called from its own caller (callA, callB); the two have the
// same body, so only the iteration counts set the split. Run with no flag
// (the agent walks the JVM's frames itself; C2 inlines hotA into callA),
// or for the perf-map path with -XX:+PreserveFramePointer and -XX:-Inline
// (each method its own frame, as the perf map names nmethods only).
// Usage: java -cp DIR JitSplit SECONDS
public class JitSplit {
    static long sink;

    static long hotA(int n) {
        long x = 1;
        for (int i = 0; i < n; i++) x = (x * 31 + i) % 1000003;
        return x;
    }

    static long hotB(int n) {
        long x = 1;
        for (int i = 0; i < n; i++) x = (x * 31 + i) % 1000003;
        return x;
    }

    static long callA(int n) {
        return hotA(n) + 1;
    }

    static long callB(int n) {
        return hotB(n) + 1;
    }

    public static void main(String[] args) {
        long end = System.nanoTime() + (long) (Double.parseDouble(args[0]) * 1e9);
        while (System.nanoTime() < end) {
            sink += callA(200000);
            sink += callB(100000);
        }
        System.out.println("sink=" + sink % 10);
    }
}
