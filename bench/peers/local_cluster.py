"""Runs N worker processes of a peer benchmark on this machine and relays worker 0's results.

Shared by the peers of bench/data_parallel.cpp (tf_multiworker.py, torch_ddp.py). The script is
started once without --worker-index (the launcher); it starts itself N times with --worker-index i,
waits for all of them within --timeout, and copies worker 0's `key=value` lines to its stdout.

Never hangs: the launcher's wait is bounded and kills every worker when it runs out or when one
worker fails (the others would wait forever in a collective); each worker also dies with its
launcher (PR_SET_PDEATHSIG) and on its own deadline.

Exit codes: 0 results printed; 1 a worker failed; 2 bad arguments; 3 the peer library is not
installed for this interpreter ("peer unavailable"); 124 timed out.
"""
import argparse
import ctypes
import math
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

EXIT_FAILED = 1
EXIT_UNAVAILABLE = 3
EXIT_TIMEOUT = 124

RESULT_LINE = re.compile(r"^[A-Za-z0-9_]+=[-+0-9.eE]+(inf|nan)?$")


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def mib_list(text):
    """'1,4,64' -> [1, 4, 64]; whole MiB only, so that the keys read allreduce_<k>MiB_ms."""
    if not text.strip():
        return []
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--allreduce-mib wants whole MiB separated by commas, got {text!r}")
    if any(s < 1 for s in sizes):
        raise argparse.ArgumentTypeError(f"--allreduce-mib sizes must be >= 1, got {text!r}")
    return sizes


def parse_args(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--workers", type=positive_int, default=2, help="worker processes (default 2)")
    p.add_argument("--steps", type=positive_int, default=50, help="timed training steps (default 50)")
    p.add_argument("--warmup", type=positive_int, default=5, help="untimed steps first (default 5)")
    p.add_argument("--batch-per-replica", type=positive_int, default=256, help="examples per worker and step")
    p.add_argument("--allreduce-mib", type=mib_list, default=[], help="all-reduce sizes to time, e.g. 1,4,64")
    p.add_argument("--allreduce-reps", type=positive_int, default=10, help="timed all-reduces per size")
    p.add_argument("--timeout", type=positive_int, default=300, help="seconds for the whole run (default 300)")
    # Internal: set by the launcher for each worker it starts.
    p.add_argument("--worker-index", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--ports", type=str, default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker_index is not None and not 0 <= args.worker_index < args.workers:
        p.error(f"--worker-index {args.worker_index} outside 0..{args.workers - 1}")
    return args


def free_ports(n):
    """n distinct localhost ports free right now (all held open together so they differ)."""
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def log(name, message):
    print(f"{name}: {message}", file=sys.stderr, flush=True)


def _kill_all(procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def launch(name, args, env_for_worker):
    """The launcher: starts args.workers copies of the calling script, returns the exit code.

    env_for_worker(i, ports) -> dict of extra environment variables for worker i; ports are
    args.workers free localhost ports picked here.
    """
    ports = free_ports(args.workers)
    script = os.path.abspath(sys.argv[0])
    passed_on = list(sys.argv[1:])
    procs = []
    # Worker 0's stdout goes to a file, not a pipe: a pipe nobody reads could fill and block it.
    with tempfile.TemporaryFile(mode="w+") as worker0_out:
        # mpirun, `timeout` and the shell signal the launcher with SIGTERM: turn it into an exit
        # that runs the `finally` below, which kills the workers.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(EXIT_TIMEOUT))
        try:
            for i in range(args.workers):
                env = dict(os.environ)
                env.update(env_for_worker(i, ports))
                cmd = [sys.executable, script, *passed_on, "--worker-index", str(i),
                       "--ports", ",".join(map(str, ports))]
                procs.append(subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                              stdout=worker0_out if i == 0 else subprocess.DEVNULL))
            deadline = time.monotonic() + args.timeout
            while True:
                codes = [p.poll() for p in procs]
                if all(c == 0 for c in codes):
                    break
                failed = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
                if failed:
                    _kill_all(procs)
                    if any(c == EXIT_UNAVAILABLE for _, c in failed):
                        log(name, "peer unavailable (see the worker's message above)")
                        return EXIT_UNAVAILABLE
                    what = ", ".join(f"worker {i} exited with status {c}" for i, c in failed)
                    log(name, f"failed: {what}; the other workers were stopped")
                    return EXIT_FAILED
                if time.monotonic() > deadline:
                    _kill_all(procs)
                    log(name, f"timed out after {args.timeout} s (--timeout); all workers were killed")
                    return EXIT_TIMEOUT
                time.sleep(0.05)
        finally:
            _kill_all(procs)
        worker0_out.seek(0)
        results = [line.strip() for line in worker0_out if RESULT_LINE.match(line.strip())]
    if not results:
        log(name, "worker 0 finished but printed no key=value results")
        return EXIT_FAILED
    print("\n".join(results), flush=True)
    return 0


def become_worker(timeout_s):
    """Call first in a worker: it dies with its launcher and on its own deadline, whatever happens."""
    try:
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # not Linux: the launcher's kill and the deadline below still hold
    # A little after the launcher's own deadline, so that the launcher reports the timeout.
    watchdog = threading.Timer(timeout_s + 15, lambda: os._exit(EXIT_TIMEOUT))
    watchdog.daemon = True
    watchdog.start()
    # Results go to the real stdout through emit(); anything else printed goes to stderr.
    real_stdout = sys.stdout
    sys.stdout = sys.stderr
    return real_stdout


def emit(out, results):
    """Writes results ({key: float}) as key=value lines to out (the stdout become_worker returned)."""
    for key, value in results.items():
        out.write(f"{key}={value:.6g}\n")
    out.flush()


def median(values):
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return math.nan
    return ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])


def mib_elements(mib):
    """float32 elements in `mib` MiB."""
    return mib * 1024 * 1024 // 4
