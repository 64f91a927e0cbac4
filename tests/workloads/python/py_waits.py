"""Off-CPU time in Python functions, then the process exits at once.

    python py_waits.py ROUNDS SECONDS

warm spins 0.3 s of CPU first (its first samples make the agent read the
process and put its tables in BPF: a wait before that is walked as far as
frame pointers go); then waiter sleeps SECONDS, ROUNDS times, under main ->
<module>, and the process exits (a script run by cron, a short job).
Prints slept= at the end."""
import sys
import time


def warm():
    end = time.process_time() + 0.3
    x = 0
    while time.process_time() < end:
        x = (x + 1) & 0xFFFF
    return x


def waiter(seconds):
    time.sleep(seconds)


def main(rounds, seconds):
    warm()
    for _ in range(rounds):
        waiter(seconds)


main(int(sys.argv[1]), float(sys.argv[2]))
print(f"slept={int(sys.argv[1]) * float(sys.argv[2]):.2f}")
