#!/usr/bin/python3
"""Times one step of PyTorch's PowerSGD math on one 4096 x 4096 gradient at
rank 4 on one thread, as BenchmarkPowerSGD times compress's (one rank, so
no all-reduce): M = g + E; orthogonalise Q; P = M Q; orthogonalise P
(torch.linalg.qr, which powerSGD_hook's _orthogonalize uses for rank > 2);
Q = M^T P; E = M - P Q^T; out = P Q^T. The hook itself needs a process
group and DDP; this is its arithmetic, step for step, on preallocated
tensors (the hook also clones the bucket for its error feedback each
call, which this leaves out).

    /usr/bin/python3 compress/testdata/powersgd_torch.py [n] [m] [rank] [calls]
"""
import sys
import time

import torch


def step(g, e, q, m, out):
    torch.add(g, e, out=m)  # the hook adds E to the bucket in place
    q, _ = torch.linalg.qr(q)
    p = m @ q  # all-reduce of P here
    p, _ = torch.linalg.qr(p)
    q = m.t() @ p  # all-reduce of Q here
    torch.matmul(p, q.t(), out=out)
    torch.sub(m, out, out=e)  # error feedback: E = M - P Q^T
    return q


def main():
    n, m, r, calls = 4096, 4096, 4, 10
    if len(sys.argv) > 1:
        n, m, r, calls = (int(a) for a in sys.argv[1:5])
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(1)
    g = torch.randn(n, m, generator=gen)
    e = torch.zeros(n, m)
    out = torch.empty(n, m)
    mbuf = torch.empty(n, m)  # preallocated, as fresh 64 MiB tensors each call cost page faults
    q = torch.randn(m, r, generator=gen)
    q = step(g, e, q, mbuf, out)  # warm up
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        q = step(g, e, q, mbuf, out)
        times.append(time.perf_counter() - t)
    times.sort()
    print("torch %s, %d thread: PowerSGD rank %d on %dx%d: median %.1f ms, min %.1f ms per call"
          % (torch.__version__, torch.get_num_threads(), r, n, m,
             1e3 * times[len(times) // 2], 1e3 * times[0]))


if __name__ == "__main__":
    main()
