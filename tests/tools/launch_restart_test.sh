#!/usr/bin/env bash
# Usage: launch_restart_test.sh WEFT_LAUNCH
# weft-launch --max-restarts (tools/launch_job.h): a job that fails on its first run (task 1 leaves
# a marker file and exits 9) is started again and succeeds; one that always fails is restarted N
# times and ends with its status; a SIGTERM to weft-launch is never restarted and ends it by SIGTERM.
set -uo pipefail
launch=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; echo "--- output"; cat "$dir/out.txt"; exit 1; }

task='[ "$OMPI_COMM_WORLD_RANK" = 1 ] && [ ! -f "$0/failed" ] && { touch "$0/failed"; exit 9; }; exit 0'
"$launch" --max-restarts 3 -np 2 sh -c "$task" "$dir" > "$dir/out.txt" 2>&1; rc=$?
(( rc == 0 )) || fail "the restarted job exited $rc"
grep -q "^weft-launch: the job failed (task rank 1 exited with status 9); restart 1 of 3$" "$dir/out.txt" ||
  fail "no line saying why the job was restarted"
(( $(grep -c "restart [0-9] of" "$dir/out.txt") == 1 )) || fail "restarted more than once"

"$launch" --max-restarts 2 -np 2 sh -c 'exit 3' > "$dir/out.txt" 2>&1; rc=$?
(( rc == 3 )) || fail "a job that always fails exited $rc, not 3"
grep -q "restart 2 of 2" "$dir/out.txt" && ! grep -q "restart 3" "$dir/out.txt" || fail "not restarted exactly twice"
grep -q "^weft-launch: task rank 0 exited with status 3$" "$dir/out.txt" || fail "the last failure was not named"

"$launch" --max-restarts 3 -np 2 sleep 60 > "$dir/out.txt" 2>&1 &
pid=$!
sleep 1
kill -TERM $pid
wait $pid; rc=$?
(( rc == 143 )) || fail "weft-launch exited $rc after SIGTERM, not 143"
grep -q "restart" "$dir/out.txt" && fail "a job stopped by a signal to weft-launch was restarted"
echo "PASS: restarted once, restarted up to the limit, not restarted after SIGTERM"
