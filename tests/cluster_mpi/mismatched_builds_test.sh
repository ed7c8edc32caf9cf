#!/bin/bash
# Two builds of weft in one job (cluster/build_identity.h): task 1 registers an op the chief does
# not have, so their op registries differ. Every task must name both builds and the job must end
# non-zero at start-up, without hanging (ctest's timeout bounds it).
#   mismatched_builds_test.sh MPIEXEC PROGRAM
mpiexec=$1 program=$2
start=$(date +%s%N)
out=$("$mpiexec" --allow-run-as-root --oversubscribe -np 1 "$program" : -np 1 -x WEFT_TEST_EXTRA_OP=1 "$program" 2>&1)
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "$out"
if [[ $rc -eq 0 ]]; then echo "FAIL: the job exited 0"; exit 1; fi
expected="runs weft with other ops registered than the chief"
count=$(grep -o -F -- "$expected" <<< "$out" | wc -l)
if [[ $count -lt 2 ]]; then echo "FAIL: $count of 2 tasks printed '$expected'"; exit 1; fi
# Both registries are named: the chief's and the task's differ, so two distinct fingerprints.
registries=$(grep -o -E "op registry [0-9a-f]{16}" <<< "$out" | sort -u | wc -l)
if [[ $registries -lt 2 ]]; then echo "FAIL: the message does not name both registries"; exit 1; fi
echo "PASS: every task named both builds; exit status $rc after ${elapsed_ms} ms"
