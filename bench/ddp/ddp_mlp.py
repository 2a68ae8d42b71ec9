#!/usr/bin/env python3
"""PyTorch's side of make bench-ddp: the 784-1024-1024-10 MLP, ReLU, SGD with
momentum, batch --batch per rank, one thread per rank, trained with
DistributedDataParallel (gloo) when run as several ranks: under gorun, whose
ranks get torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
so init_process_group's env:// rendezvous works as under torchrun.

    gorun -np 2 python3 bench/ddp/ddp_mlp.py --steps 50
    python3 bench/ddp/ddp_mlp.py --local     # the same step, no communication

It prints, as examples/ddp does, "step N loss L samples/s S" on rank 0, and
"blas LIB" with the BLAS library the process mapped.
"""
import argparse
import os
import time

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # CPU only, as examples/ddp

import torch
import torch.distributed as dist
import torch.nn as nn


def blas_in_use():
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "blas" in line.lower()}
    return ",".join(sorted(os.path.basename(l) for l in libs)) or "none"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch", type=int, default=64, help="per rank")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--local", action="store_true", help="no DDP: the same step without communication")
    ap.add_argument("--bucket-mb", type=float, default=25)
    a = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    net = model
    if world > 1 and not a.local:
        net = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb)
    opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(100 + rank)
    n = 8192
    centres = torch.randn(10, 784, generator=g) * 0.5
    ys = torch.randint(0, 10, (n,), generator=g)
    xs = centres[ys] + torch.randn(n, 784, generator=g)
    for step in range(a.steps):
        i = (step * a.batch) % (n - a.batch)
        x, y = xs[i:i + a.batch], ys[i:i + a.batch]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if world > 1:
            l = loss.detach().clone()
            dist.all_reduce(l)
            loss = l / world
        if rank == 0:
            print(f"step {step + 1} loss {loss.item():.6f} samples/s {a.batch * world / dt:.1f}", flush=True)
    if rank == 0:
        print(f"blas {blas_in_use()} torch {torch.__version__}")
        print(f"final loss {loss.item():.6f}")
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
