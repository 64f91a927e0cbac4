#!/usr/bin/env bash
# Runs each unit test binary; prints one closing line for all of them.
# UNIT_RUNNER: a command each binary runs under (qemu-user for a cross build).
set -u
pass=0 fail=0
for t in "$@"; do
    # shellcheck disable=SC2086 # the runner's words
    if ${UNIT_RUNNER:-} "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $t" >&2; fi
done
echo "unit: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
