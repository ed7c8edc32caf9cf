#!/usr/bin/env bash
# Usage: preemption_restart_test.sh WEFT_LAUNCH PROGRAM NP TARGET
# PROGRAM is data_parallel_restart. An uninterrupted run of 30 steps; then a preemptible run
# (PreemptionCheckpoint, 100 ms between steps) that gets SIGTERM once step 4 is done, and a restart
# from the checkpoint it saved. The steps of the two runs together must be the uninterrupted run's,
# loss for loss: none lost, none repeated. TARGET:
#   task      SIGTERM to task 1 (not the chief: it tells the chief). The job is run under
#             weft-launch --max-restarts 1, which restarts it (exit status 143 is a failure).
#   launcher  SIGTERM to weft-launch: it passes the signal to every task and ends by SIGTERM (143),
#             restarting nothing; the test then restarts the job itself.
set -uo pipefail
launch=$1 program=$2 np=$3 target=$4
dir=$(mktemp -d)
job=
trap '[[ -n $job ]] && kill -KILL $job 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; for f in "$dir"/*.txt; do echo "--- $f"; cat "$f"; done; exit 1; }
steps() { grep -E "^step [0-9]+ loss" "$@"; }

timeout 120 "$launch" -np "$np" "$program" "$dir" run 30 > "$dir/full.txt" 2> "$dir/full.err" ||
  fail "the uninterrupted run failed"

restarts=0
[[ $target == task ]] && restarts=1
# Not under timeout(1), which would pass the test's signal to the whole process group: weft-launch
# alone must get it. The wait below is bounded instead.
"$launch" --max-restarts $restarts -np "$np" "$program" "$dir" preemptible 30 100 \
  > "$dir/preempted.txt" 2> "$dir/preempted.err" &
job=$!
for _ in $(seq 1 1200); do grep -q "^step 4 loss" "$dir/preempted.txt" && break; sleep 0.05; done
grep -q "^step 4 loss" "$dir/preempted.txt" || fail "the preemptible run did not reach step 4"
case $target in
  task) kill -TERM "$(cat "$dir/pid.1")" ;;
  launcher) kill -TERM "$job" ;;
  *) echo "unknown target $target"; exit 2 ;;
esac
for _ in $(seq 1 1200); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
kill -0 "$job" 2>/dev/null && fail "the job did not end within 120 s of the signal"
wait "$job"; status=$?
job=
grep -q "saved $dir/preempt/ckpt-1.safetensors after /job:worker/replica:0/task:[01] got SIGTERM" "$dir/preempted.err" ||
  fail "no checkpoint was saved after the signal"
if [[ $target == task ]]; then
  (( status == 0 )) || fail "weft-launch --max-restarts 1 exited $status, not 0 after its restart"
  grep -q "weft-launch: the job failed (task rank 0 exited with status 143); restart 1 of 1" "$dir/preempted.err" ||
    fail "weft-launch did not say why it restarted the job"
  cat "$dir/preempted.txt" > "$dir/both.txt"
else
  (( status == 143 )) || fail "weft-launch exited $status, not 143 (SIGTERM)"
  grep -q "restart" "$dir/preempted.err" && fail "weft-launch restarted a job it was told to stop"
  timeout 120 "$launch" -np "$np" "$program" "$dir" preemptible 30 > "$dir/resumed.txt" 2> "$dir/resumed.err" ||
    fail "the restarted run failed"
  cat "$dir/preempted.txt" "$dir/resumed.txt" > "$dir/both.txt"
fi
resumed=$(grep -o "resumed from [^ ]* at step [0-9]*" "$dir"/*.err | head -n1)
[[ -n $resumed ]] || fail "the restarted job did not resume from the checkpoint"
if ! diff <(steps "$dir/full.txt") <(steps "$dir/both.txt"); then
  fail "the preempted and restarted runs' losses differ from the uninterrupted run's"
fi
grep -hE "^weft" "$dir"/preempted.err
echo "PASS: preempted by SIGTERM to the $target, ${resumed#*:}; the losses of 30 steps are the uninterrupted run's"
