// A Java workload of tiny calls: a recursive fib spends much of its time in
// its compiled frames' prologues and epilogues, where the frame is not made
// yet or not any more. Usage: java -cp DIR JavaFib SECONDS
public class JavaFib {
    static int fib(int n) {
        return n < 2 ? n : fib(n - 1) + fib(n - 2);
    }

    public static void main(String[] args) {
        long end = System.nanoTime() + (long) (Double.parseDouble(args[0]) * 1e9);
        long s = 0;
        while (System.nanoTime() < end) s += fib(27);
        System.out.println("s=" + s % 10);
    }
}
