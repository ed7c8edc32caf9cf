"""PyTorch's side of bench/data_parallel.cpp: DistributedDataParallel over gloo on this machine.

  python3 torch_ddp.py --workers N --steps S --batch-per-replica 256 [--allreduce-mib 1,4,64]

Starts N worker processes (CPU only, rendezvous on a free localhost port), each training the MLP
784-128-128-128-10 (relu) wrapped in DDP on synthetic data with SGD(0.01), batch-per-replica
examples per process. Worker 0 prints, and the launcher relays, only these lines on stdout:

  step_ms=<median ms per training step>
  images_per_s=<global batch / median step time>
  allreduce_<k>MiB_ms=<median ms of dist.all_reduce (SUM) of k MiB of float32>

Logs go to stderr. Exit codes as in local_cluster.py (3: torch, torch.distributed or gloo missing
for this interpreter; scripts/bench installs Debian's python3-torch for /usr/bin/python3).
"""
import datetime
import sys
import time

import local_cluster as lc

NAME = "torch_ddp"


def env_for_worker(index, ports):
    return {"CUDA_VISIBLE_DEVICES": ""}  # CPU only, as weft's side of the comparison


def train_step_timings(torch, dist, args):
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)  # DDP broadcasts worker 0's initial weights anyway
    model = DistributedDataParallel(nn.Sequential(
        nn.Linear(784, 128), nn.ReLU(),
        nn.Linear(128, 128), nn.ReLU(),
        nn.Linear(128, 128), nn.ReLU(),
        nn.Linear(128, 10)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    # The mean over this worker's batch; DDP averages the gradients over the workers, which makes
    # it the gradient of the global batch's mean loss, as on TensorFlow's and weft's sides.
    loss_fn = nn.CrossEntropyLoss()

    # Each worker its own synthetic batch, as each replica of a real input pipeline would have.
    gen = torch.Generator().manual_seed(1 + args.worker_index)
    x = torch.rand(args.batch_per_replica, 784, generator=gen)
    y = torch.randint(0, 10, (args.batch_per_replica,), generator=gen)

    def one_step():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()  # DDP all-reduces the gradients here, waiting for every worker
        optimizer.step()

    for _ in range(args.warmup):
        one_step()
    times_ms = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        one_step()
        times_ms.append((time.perf_counter() - t0) * 1e3)
    step_ms = lc.median(times_ms)
    with torch.no_grad():
        weights_sum = float(sum(p.sum() for p in model.parameters()))
    # Identical on every worker when the gradients really were all-reduced; stderr, for checking.
    print(f"{NAME}: worker {args.worker_index} weights checksum {weights_sum:.9g}", file=sys.stderr)
    global_batch = args.batch_per_replica * args.workers
    return {"step_ms": step_ms, "images_per_s": global_batch / (step_ms / 1e3)}


def allreduce_timings(torch, dist, args):
    results = {}
    for mib in args.allreduce_mib:
        t = torch.zeros(lc.mib_elements(mib))
        for _ in range(3):
            dist.all_reduce(t)
        times_ms = []
        for _ in range(args.allreduce_reps):
            dist.barrier()  # start together, so that no worker's time includes waiting for a late one
            t0 = time.perf_counter()
            dist.all_reduce(t)  # SUM, synchronous with gloo on the CPU
            times_ms.append((time.perf_counter() - t0) * 1e3)
        results[f"allreduce_{mib}MiB_ms"] = lc.median(times_ms)
    return results


def worker(args):
    out = lc.become_worker(args.timeout)
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        lc.log(NAME, f"PyTorch is not installed for {sys.executable}: {e}")
        return lc.EXIT_UNAVAILABLE
    if not dist.is_available() or not dist.is_gloo_available():
        lc.log(NAME, f"torch {torch.__version__} for {sys.executable} has no torch.distributed with gloo")
        return lc.EXIT_UNAVAILABLE
    port = int(args.ports.split(",")[0])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=args.worker_index,
                            world_size=args.workers, timeout=datetime.timedelta(seconds=args.timeout))
    try:
        results = train_step_timings(torch, dist, args)
        results.update(allreduce_timings(torch, dist, args))
    finally:
        dist.destroy_process_group()
    if args.worker_index == 0:
        lc.emit(out, results)
    return 0


def main():
    args = lc.parse_args(__doc__.splitlines()[0])
    if args.worker_index is None:
        return lc.launch(NAME, args, env_for_worker)
    return worker(args)


if __name__ == "__main__":
    sys.exit(main())
