"""An mpi4py program (Debian's python3-mpi4py, unchanged) that checks what a user relies on
under hyrun's PMIx server: random values of every rank reduced and gathered, every element of
the sum checked; prints "rank R of N: ok" (or WRONG)."""
import random

from mpi4py import MPI

c = MPI.COMM_WORLD
mine = [random.getrandbits(32) for _ in range(1000)]
total = c.allreduce(mine, op=lambda a, b, t=None: [x + y for x, y in zip(a, b)])
every = c.allgather(mine)
ok = all(total[i] == sum(v[i] for v in every) for i in range(1000))
print(f"rank {c.rank} of {c.size}: " + ("ok" if ok else "WRONG"), flush=True)
