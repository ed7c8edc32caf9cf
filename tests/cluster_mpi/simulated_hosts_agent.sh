#!/bin/bash
# mpirun's launch agent for simulated_hosts_test.sh, in place of ssh (--mca plm_rsh_agent).
# Open MPI calls it as ssh: `agent [ssh options] HOST COMMAND...`, where COMMAND is shell text
# (e.g. `PATH=...; export PATH; orted -mca ...`) that ssh would hand to the remote shell. HOST is
# one of the simulated hosts' addresses, 10.N.N.<k>; the daemon for it is started inside that
# host's network namespace, $WEFT_SIMHOSTS_PREFIX<k-1>, which the test made and named.
set -u
while [[ $# -gt 0 && $1 == -* ]]; do shift; done   # ssh options (-x, ...) mean nothing here
if [[ $# -lt 2 ]]; then echo "simulated_hosts_agent: usage: agent HOST COMMAND..." >&2; exit 255; fi
host=$1
shift
if [[ -z ${WEFT_SIMHOSTS_PREFIX:-} || ! $host =~ ^10\.[0-9]+\.[0-9]+\.([1-9])$ ]]; then
  echo "simulated_hosts_agent: no simulated host for '$host' (WEFT_SIMHOSTS_PREFIX='${WEFT_SIMHOSTS_PREFIX:-}')" >&2
  exit 255
fi
k=$((BASH_REMATCH[1] - 1))
# As ssh does: the words are joined and run by a shell, here inside the host's network namespace
# and a UTS namespace of its own, so that the host has its own name too (simhost<k>), as Open MPI
# expects of a node. The environment goes along (ip netns exec and unshare keep it), so the
# sanitizers' settings reach the daemon and its ranks.
exec ip netns exec "$WEFT_SIMHOSTS_PREFIX$k" unshare --uts /bin/sh -c "hostname simhost$k && $*"
