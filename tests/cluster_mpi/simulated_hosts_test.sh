#!/bin/bash
# Usage: simulated_hosts_test.sh MPIEXEC PROGRAM [PROGRAM...]
# Four simulated hosts on one machine, simhost0..3: each is a network namespace of its own, with
# its own address (10.213.14.1 .. .4/24) on a veth whose other end is on a bridge in a fifth,
# 'switch' namespace; nothing in this machine's own namespace is touched. Each host has its own
# hostname too (a UTS namespace). mpirun runs on simhost0 and starts a daemon on each other host
# through simulated_hosts_agent.sh (in place of ssh), which enters that host's namespaces. Each
# PROGRAM then runs as 4 ranks, one per host, talking over TCP between the namespaces only: no
# shared memory (btl self,tcp; pml ob1, so not UCX). Each rank first writes down its namespace,
# hostname and address, and the test checks that they were the four hosts'.
# With WEFT_SIMHOSTS_LAUNCH (weft-launch) and WEFT_SIMHOSTS_PREEMPT (data_parallel_restart) set, a
# last run trains data-parallel under weft-launch --cluster over the four hosts, and SIGTERM to
# weft-launch (on simhost0) must reach the tasks on the other hosts in time for the chief to save a
# checkpoint (tools/launch_job.h: weft-launch forwards it through mpirun); a restart resumes with
# the losses of an uninterrupted run.
# Exit 77 (ctest's SKIP_RETURN_CODE) when namespaces cannot be made here: not root, no
# CAP_NET_ADMIN, no iproute2, no veth or bridge in the kernel.
set -u
mpiexec=$1
shift
programs=("$@")
agent="$(cd "$(dirname "$0")" && pwd)/simulated_hosts_agent.sh"
subnet=10.213.14
hosts=4
# Every name carries this shell's pid, so runs side by side (ctest -j) never share a namespace.
prefix="weftsim$$-"
switch="${prefix}sw"
namespaces=("$switch")
for ((k = 0; k < hosts; ++k)); do namespaces+=("$prefix$k"); done
tmp=${TMPDIR:-/tmp}
dir=$(mktemp -d "$tmp/weftsim$$-XXXXXX")

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

remove_namespace() {
  # A namespace lives on while a process is in it, so a daemon that outlived mpirun would keep
  # its veth alive: those (started by this test) are ended first.
  local pids
  mapfile -t pids < <(ip netns pids "$1" 2>/dev/null)
  ((${#pids[@]})) && kill -KILL "${pids[@]}" 2>/dev/null
  ip netns delete "$1" 2>/dev/null
}
cleanup() {
  trap - EXIT INT TERM
  for ns in "${namespaces[@]}"; do remove_namespace "$ns"; done
  rm -rf "$dir"
}
trap cleanup EXIT
# Interrupted (Ctrl-C, a runner's TERM): the run under way is ended, then the trap above removes
# the namespaces. bash runs a trap only between commands, hence mpirun runs in the background and
# the script waits for it.
job=
trap 'echo "FAIL: interrupted"; [[ -n $job ]] && kill -TERM "$job" 2>/dev/null; exit 143' INT TERM

# A run killed outright could not clean up (ctest 3.25 ends a test past its TIMEOUT with SIGKILL;
# the runs below are bounded well inside it): its namespaces and folder are removed here once
# the shell that made them is gone.
running() {   # not gone, and not a zombie that nobody has reaped yet
  local stat
  { stat=$(< "/proc/$1/stat"); } 2> /dev/null || return 1
  stat=${stat##*) }
  [[ ${stat:0:1} != Z ]]
}
sweep_stale() {
  local name pid
  while read -r name _; do
    [[ $name =~ ^weftsim([0-9]+)- ]] || continue
    pid=${BASH_REMATCH[1]}
    running "$pid" && continue
    echo "removing $name, left by an earlier run (pid $pid) that ended without cleaning up"
    remove_namespace "$name"
  done < <(ip netns list 2>/dev/null)
  for name in "$tmp"/weftsim*-*; do
    [[ $name =~ /weftsim([0-9]+)-[^/]*$ ]] && ! running "${BASH_REMATCH[1]}" && rm -rf "$name"
  done
}

command -v ip > /dev/null || skip "no 'ip' command (iproute2) to make network namespaces with"
command -v unshare > /dev/null || skip "no 'unshare' command (util-linux) to give each host its name"
[[ -x $mpiexec ]] || command -v "$mpiexec" > /dev/null || fail "no mpiexec '$mpiexec'"
sweep_stale
err=$(ip netns add "$switch" 2>&1) ||
  skip "cannot make a network namespace (needs root or CAP_NET_ADMIN): $err"

# The switch: a bridge, and one veth per host with its other end (eth0) in the host's namespace.
setup() {
  ip -n "$switch" link set lo up &&
    ip -n "$switch" link add br0 type bridge &&
    ip -n "$switch" link set br0 up || return 1
  for ((k = 0; k < hosts; ++k)); do
    local ns="$prefix$k"
    ip netns add "$ns" &&
      ip -n "$switch" link add "host$k" type veth peer name eth0 netns "$ns" &&
      ip -n "$switch" link set "host$k" master br0 up &&
      ip -n "$ns" link set lo up &&
      ip -n "$ns" addr add "$subnet.$((k + 1))/24" dev eth0 &&
      ip -n "$ns" link set eth0 up || return 1
  done
}
err=$(setup 2>&1) || skip "cannot make the simulated hosts' network (veth, bridge): $err"

# Hosts by address: Open MPI resolves each name, and takes every host but the one mpirun runs
# on (its own address) as remote, so it starts their daemons through the agent.
for ((k = 0; k < hosts; ++k)); do echo "$subnet.$((k + 1)) slots=1"; done > "$dir/hostfile"
expected=()
for ((k = 0; k < hosts; ++k)); do expected+=("$(ip netns exec "$prefix$k" readlink /proc/self/ns/net)"); done
own=$(readlink /proc/self/ns/net)

# Each rank writes down where it runs, then becomes the program (expanded by the rank's shell).
# shellcheck disable=SC2016
record='echo "$(readlink /proc/self/ns/net) $(hostname) $(ip -4 -o addr show dev eth0 | grep -o "inet [0-9.]*")" > '"$dir"'/rank.$OMPI_COMM_WORLD_RANK && exec "$@"'

export WEFT_SIMHOSTS_PREFIX=$prefix OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
forward=()
for var in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do [[ -n ${!var:-} ]] && forward+=(-x "$var"); done

for program in "${programs[@]}"; do
  rm -f "$dir"/rank.*
  echo "== $(basename "$program") as $hosts ranks on $hosts simulated hosts"
  # Bounded inside ctest's TIMEOUT, so that this script, not ctest's SIGKILL, ends every run and
  # removes the namespaces. --leave-session-attached: the daemons stay mpirun's children instead
  # of daemonizing, so a daemon that cannot reach mpirun fails the job at once, not at the timeout.
  # Open MPI's session files go in this test's folder, so that even a killed run leaves none.
  timeout -k 10 180 ip netns exec "${prefix}0" unshare --uts \
    /bin/sh -c 'hostname simhost0 && exec "$@"' sh "$mpiexec" --allow-run-as-root -np "$hosts" \
    --hostfile "$dir/hostfile" --mca orte_tmpdir_base "$dir" \
    --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1 --leave-session-attached \
    --mca pml ob1 --mca btl self,tcp \
    --mca btl_tcp_if_include "$subnet.0/24" --mca oob_tcp_if_include "$subnet.0/24" \
    "${forward[@]}" /bin/bash -c "$record" "$program" "$program" &
  job=$!
  wait "$job"
  rc=$?
  job=
  [[ $rc -eq 0 ]] || fail "$(basename "$program") over the simulated hosts exited $rc"
  for ((r = 0; r < hosts; ++r)); do
    [[ -f $dir/rank.$r ]] || fail "rank $r did not start"
    read -r ns name inet < "$dir/rank.$r"
    echo "rank $r ran in $ns on $name ($inet)"
    [[ $ns != "$own" ]] || fail "rank $r ran in this machine's own network namespace"
    [[ $ns == "${expected[$r]}" ]] || fail "rank $r ran in $ns, not in simhost$r's ${expected[$r]}"
    [[ $name == "simhost$r" ]] || fail "rank $r ran on '$name', not on simhost$r"
    [[ $inet == "inet $subnet.$((r + 1))" ]] || fail "rank $r has '$inet', not simhost$r's address"
  done
done

if [[ -n ${WEFT_SIMHOSTS_PREEMPT:-} ]]; then
  echo "== SIGTERM to weft-launch on simhost0, tasks on $hosts simulated hosts"
  work=$dir/preempt
  mkdir -p "$work"
  list=
  for ((k = 0; k < hosts; ++k)); do list+="${list:+, }\"$subnet.$((k + 1)):2222\""; done
  echo "{\"cluster\": {\"worker\": [$list]}}" > "$dir/spec.json"
  # What the mpirun runs above were given as options, weft-launch's mpirun gets from the environment.
  export OMPI_MCA_plm_rsh_agent=$agent OMPI_MCA_plm_rsh_no_tree_spawn=1 OMPI_MCA_orte_tmpdir_base=$dir \
    OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=$subnet.0/24 \
    OMPI_MCA_oob_tcp_if_include=$subnet.0/24
  on_simhost0() { ip netns exec "${prefix}0" unshare --uts /bin/sh -c 'hostname simhost0 && exec "$@"' sh "$@"; }
  launch() { on_simhost0 "$WEFT_SIMHOSTS_LAUNCH" --cluster "$dir/spec.json" "$WEFT_SIMHOSTS_PREEMPT" "$work" "$@"; }
  steps() { grep -hE "^step [0-9]+ loss" "$@"; }
  bounded() {  # in the background, so the INT/TERM trap can end it; killed after 120 s
    "$@" &
    job=$!
    for _ in $(seq 1 1200); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$job" 2>/dev/null && kill -KILL "$job"
    wait "$job"
    local status=$?
    job=
    return $status
  }
  bounded launch run 20 > "$work/full.txt" 2> "$work/full.err" ||
    { cat "$work/full.err"; fail "the uninterrupted run over the hosts failed"; }
  # Not through the functions (a function in the background is a subshell of its own): ip netns
  # exec, unshare and sh each exec the next, so the job's pid is weft-launch's.
  ip netns exec "${prefix}0" unshare --uts /bin/sh -c 'hostname simhost0 && exec "$@"' sh \
    "$WEFT_SIMHOSTS_LAUNCH" --cluster "$dir/spec.json" "$WEFT_SIMHOSTS_PREEMPT" "$work" preemptible 20 100 \
    > "$work/preempted.txt" 2> "$work/preempted.err" &
  job=$!
  for _ in $(seq 1 1200); do grep -q "^step 4 loss" "$work/preempted.txt" && break; sleep 0.05; done
  grep -q "^step 4 loss" "$work/preempted.txt" || { cat "$work/preempted.err"; fail "the preemptible run did not reach step 4"; }
  sent=$(date +%s.%N)
  kill -TERM "$job"
  for _ in $(seq 1 600); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$job" 2>/dev/null && fail "the job did not end within 60 s of SIGTERM to weft-launch"
  wait "$job"
  rc=$?
  job=
  took=$(awk -v a="$sent" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  grep -hE "^weft" "$work/preempted.err"
  (( rc == 143 )) || fail "weft-launch exited $rc, not 143 (SIGTERM)"
  for ((k = 1; k < hosts; ++k))
    do grep -q "task:$k got SIGTERM" "$work/preempted.err" || fail "the task on simhost$k did not get SIGTERM"; done
  grep -q "saved $work/preempt/ckpt-1.safetensors after" "$work/preempted.err" || fail "no checkpoint was saved"
  bounded launch preemptible 20 > "$work/resumed.txt" 2> "$work/resumed.err" ||
    { cat "$work/resumed.err"; fail "the restarted run failed"; }
  diff <(steps "$work/full.txt") <(steps "$work/preempted.txt" "$work/resumed.txt") ||
    fail "the preempted and restarted runs' losses differ from the uninterrupted run's"
  echo "preempted over $hosts hosts: every task got SIGTERM, the checkpoint was saved, the job ended $took s after the signal, and the restart's losses are the uninterrupted run's"
fi
echo "PASS: every program ran as $hosts ranks in $hosts network namespaces, over TCP between them"
