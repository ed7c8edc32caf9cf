#!/bin/bash
# A spec that is wrong, or does not match the processes started: every task must print the error
# and the job must end non-zero, without hanging (ctest's timeout bounds it).
#   bad_spec_test.sh MPIEXEC PROGRAM SPEC NP EXPECTED_TEXT [VAR=VALUE ...]
# Each VAR=VALUE is put in every task's environment.
mpiexec=$1 program=$2 spec=$3 np=$4 expected=$5
env_args=()
for e in "${@:6}"; do env_args+=(-x "$e"); done
out=$("$mpiexec" --allow-run-as-root --oversubscribe -np "$np" -x WEFT_CLUSTER="$spec" "${env_args[@]}" "$program" 2>&1)
rc=$?
echo "$out"
if [[ $rc -eq 0 ]]; then echo "FAIL: the job exited 0"; exit 1; fi
# Occurrences, not lines: two tasks' reports may share a line of mpirun's output.
count=$(grep -o -F -- "$expected" <<< "$out" | wc -l)
if [[ $count -lt $np ]]; then echo "FAIL: $count of $np tasks printed '$expected'"; exit 1; fi
echo "PASS: every task printed the error; exit status $rc"
