"""Rank program of tests/e2e/test_stacks_multinode.py: steps of 50 ms
through stepscope's Python API (no PyTorch needed).  At step STUCK_AT the
rank STUCK_RANK sleeps forever in load_batch(); every other rank finishes
that step and waits in the next one, in wait_for_peers(), as ranks do when
they block in a collective that the stuck rank never joins.  Without
STUCK_RANK every rank waits there: the job stands still, alive, for
`stepscope stacks`."""
import os
import time

import stepscope

rank = int(os.environ["RANK"])
stuck = int(os.environ.get("STUCK_RANK", "-1"))
at = int(os.environ.get("STUCK_AT", "5"))


def load_batch():
    time.sleep(100000)


def wait_for_peers():
    while True:
        time.sleep(0.05)


step = 0
while True:
    with stepscope.step():
        if step == at and rank == stuck:
            load_batch()
        if step == at + 1:
            wait_for_peers()
        time.sleep(0.05)
    step += 1
