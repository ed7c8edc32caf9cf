#!/usr/bin/env bash
# Usage: data_parallel_restart_test.sh MPIEXEC PROGRAM NP
# An uninterrupted run of 10 steps; a run killed at step 8 (its last checkpoint after step 6);
# a restart from that checkpoint: its losses for steps 6..9 must be the uninterrupted run's.
set -uo pipefail
mpiexec=$1 program=$2 np=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() { timeout 120 "$mpiexec" --allow-run-as-root --oversubscribe -np "$np" "$program" "$dir" "$@"; }
run run 10 > "$dir/full.txt" || { echo "FAIL: the uninterrupted run failed"; cat "$dir/full.txt"; exit 1; }
run die-after 8 > "$dir/killed.txt" 2>&1 && { echo "FAIL: the killed run exited cleanly"; exit 1; }
[[ -f $dir/ckpt.safetensors ]] || { echo "FAIL: no checkpoint was written"; cat "$dir/killed.txt"; exit 1; }
grep -q "^step 7 loss" "$dir/killed.txt" || { echo "FAIL: the killed run did not reach step 7"; cat "$dir/killed.txt"; exit 1; }
run resume 10 > "$dir/resumed.txt" || { echo "FAIL: the resumed run failed"; cat "$dir/resumed.txt"; exit 1; }
first=$(head -n1 "$dir/resumed.txt")
[[ $first == "step 6 loss "* ]] || { echo "FAIL: the resumed run starts with '$first', not step 6"; exit 1; }
if ! diff <(grep -E "^step [6-9] " "$dir/full.txt") "$dir/resumed.txt"; then
  echo "FAIL: the resumed losses differ from the uninterrupted run's"
  exit 1
fi
echo "PASS: resumed from the checkpoint of step 6 with the uninterrupted run's losses"
cat "$dir/resumed.txt"
