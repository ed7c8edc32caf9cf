#!/usr/bin/env bash
# Usage: fault_times_test.sh SCENARIO WEFT_LAUNCH PROGRAM
# A 3-task job (PROGRAM is cluster_failure_test with WEFT_TEST_EXTERNAL_FAULT=1) under weft-launch
# (so mpirun --enable-recovery, as users run it); once its steps run, the scenario's fault is made
# from outside and the time until the job has ended (or the chief has named the lost task) is
# measured and printed. SCENARIO:
#   sigterm_task     SIGTERM to task 2: every process ends within 5 s, and the line names it
#   sigterm_chief    SIGTERM to the chief: the same
#   sigint_launcher  SIGINT to weft-launch: the same, and weft-launch ends by SIGINT (status 130)
#   kill_chief       kill -9 of the chief: every task ends within 15 s (the default liveness timeout, 10 s)
#   stop_worker      SIGSTOP of task 2 with WEFT_LIVENESS_TIMEOUT_MS=3000: the chief names it lost
#                    within the timeout and the chief's ping interval (1 s), its check's granularity
set -uo pipefail
scenario=$1 launch=$2 program=$3
dir=$(mktemp -d)
launcher=
cleanup() {
  for f in "$dir"/pid.*; do [[ -f $f ]] && kill -CONT "$(cat "$f")" 2>/dev/null && kill -KILL "$(cat "$f")" 2>/dev/null; done
  [[ -n $launcher ]] && kill -KILL "$launcher" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
within() { awk -v t="$1" -v limit="$2" 'BEGIN { exit !(t <= limit) }'; }
pid_of() { cat "$dir/pid.$1"; }
alive() { local n=0 r; for r in 0 1 2; do kill -0 "$(pid_of $r)" 2>/dev/null && n=$((n + 1)); done; echo $n; }
fail() { echo "FAIL: $*"; echo "--- output"; cat "$dir/out.txt"; exit 1; }

liveness=10000
[[ $scenario == stop_worker ]] && liveness=3000
WEFT_TEST_EXTERNAL_FAULT=1 WEFT_TEST_PID_DIR=$dir WEFT_LIVENESS_TIMEOUT_MS=$liveness \
  "$launch" -np 3 "$program" > "$dir/out.txt" 2>&1 &
launcher=$!
for _ in $(seq 1 1200); do grep -q "steps running" "$dir/out.txt" && break; sleep 0.05; done
grep -q "steps running" "$dir/out.txt" || fail "the job's steps did not start"
sleep 0.5  # mid-step, or between two

start=$(now)
case $scenario in
  sigterm_task) kill -TERM "$(pid_of 2)"; limit=5; line="/job:worker/replica:0/task:2 got SIGTERM; ending the job" ;;
  sigterm_chief) kill -TERM "$(pid_of 0)"; limit=5; line="/job:worker/replica:0/task:0 got SIGTERM; ending the job" ;;
  sigint_launcher) kill -INT "$launcher"; limit=5; line="weft-launch: got SIGINT; passing SIGINT to every task" ;;
  kill_chief) kill -KILL "$(pid_of 0)"; limit=15; line="the chief has not been heard from for 10000 ms; ending the job" ;;
  stop_worker)
    kill -STOP "$(pid_of 2)"
    for _ in $(seq 1 400); do grep -q "lost task reported" "$dir/out.txt" && break; sleep 0.025; done
    took=$(elapsed "$start" "$(now)")
    grep -q "lost task reported.*task:2 (rank 2) is lost" "$dir/out.txt" || fail "the chief did not name task 2 as lost"
    within "$took" 4 || fail "task 2 was named lost after $took s, more than 3 s + 1 s"
    echo "PASS: the stopped task 2 was named lost $took s after SIGSTOP (liveness timeout 3 s)"
    exit 0 ;;
  *) echo "unknown scenario $scenario"; exit 2 ;;
esac
# Every process of the job, and weft-launch, gone.
while (( $(alive) > 0 )) || kill -0 "$launcher" 2>/dev/null; do
  within "$(elapsed "$start" "$(now)")" $((limit + 5)) || fail "processes still running $((limit + 5)) s after the fault"
  sleep 0.02
done
took=$(elapsed "$start" "$(now)")
wait "$launcher"; status=$?
launcher=
grep -qF "$line" "$dir/out.txt" || fail "no line '$line'"
within "$took" $limit || fail "the job took $took s to end, more than $limit s"
(( status != 0 )) || fail "weft-launch exited 0"
[[ $scenario != sigint_launcher ]] || (( status == 130 )) || fail "weft-launch exited $status, not 130 (SIGINT)"
echo "PASS: $scenario: every process ended $took s after the fault; weft-launch exited $status"
grep -E "^weft|got SIG" "$dir/out.txt"
