"""The known answer of the cpu_split workload (tests/workloads/cpu_split.c
and the debuginfod tests' stripped builds of it): hot_a, hot_b and hot_c
take 3:2:1 of its CPU, each called as hot_X <- dispatch <- run <- main."""

CHAIN = ["dispatch", "run", "main"]
SPLIT = {"hot_a": 3 / 6, "hot_b": 2 / 6, "hot_c": 1 / 6}


def split_of(ts, pid=None):
    """Samples per hot function, the samples with the whole chain under
    their hot function, and all samples (of pid's, when given)."""
    per, whole, total = {k: 0 for k in SPLIT}, 0, 0
    for t in ts:
        if pid is not None and t.labels.get("pid") != str(pid):
            continue
        total += t.count
        leaf = t.frames[0]
        if leaf in per:
            per[leaf] += t.count
            if t.frames[1:1 + len(CHAIN)] == CHAIN:
                whole += t.count
    return per, whole, total
