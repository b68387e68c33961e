"""A torch.distributed program as a user writes it for torchrun: env:// rendezvous, gloo.

Every rank contributes rank + 1; each prints the sum it received and what torchrun-style
variables it was given, so a test can check them against the job. Exits 0 on a right sum.
"""
import os
import socket
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://", timeout=__import__("datetime").timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
expected = world * (world + 1) / 2
names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
         "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS", "TORCHELASTIC_RUN_ID")
seen = " ".join(f"{n}={os.environ.get(n, '-')}" for n in names)
node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
cpus = len(os.sched_getaffinity(0))
print(f"gloo rank {rank}/{world} on {node}: sum={t.item():g} expected={expected:g} {seen} cpus={cpus}", flush=True)
dist.destroy_process_group()
sys.exit(0 if t.item() == expected else 1)
