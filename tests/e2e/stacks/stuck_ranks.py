"""Rank program of tests/e2e/test_stacks.py: every rank gets stuck in a
way chosen by STUCK (rank:how,...; the others wait):

  sleep   time.sleep forever, in load_batch()
  gil     a libc call through ctypes.PyDLL that never returns and holds the
          GIL meanwhile, in hold_gil(): it locks a mutex it already holds
          (signals do not interrupt pthread_mutex_lock, so no Python code
          of this process runs again; its other thread waits for the GIL)
  read    a C read() on a pipe through ctypes.CDLL (the GIL released), in
          read_pipe(); a thread writes one byte into the pipe once the
          file RELEASE exists, and the rank prints what read() returned
          (READ n errno) and waits
  fifo    time.sleep forever in stuck(), a function whose source file is
          a FIFO (FIFO_DIR/fifo_source.py, compiled under that name): the
          controller must not wait on it for the frame's source line
  csleep  libc's sleep(CSLEEP seconds, default 6) through ctypes, in
          c_sleep(), which does not retry on EINTR: a signal cuts it
          short; then prints SLEPT <seconds> <unslept> and waits
  wait    the default: short sleeps in a loop, in wait_for_peers()

With DDP=1 the ranks first join a gloo process group; the waiting ranks
then block in an all-reduce that the sleeping rank never joins.
Prints READY once it is stuck, so the test knows when to ask.
"""
import ctypes
import os
import sys
import threading
import time

rank = int(os.environ["RANK"])
how = dict(kv.split(":") for kv in os.environ.get("STUCK", "").split(",")
           if kv).get(str(rank), "wait")


def load_batch():
    time.sleep(100000)


def hold_gil():
    sleeper = threading.Thread(target=time.sleep, args=(100000,),
                               name="sleeper", daemon=True)
    sleeper.start()
    libc = ctypes.PyDLL(None)  # PyDLL: the GIL stays held during the call
    mutex = ctypes.create_string_buffer(64)  # PTHREAD_MUTEX_INITIALIZER
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)


def read_pipe():
    libc = ctypes.CDLL(None, use_errno=True)
    r, w = os.pipe()

    def release():
        while not os.path.exists(os.environ["RELEASE"]):
            time.sleep(0.05)
        os.write(w, b"x")
    threading.Thread(target=release, name="release", daemon=True).start()
    buf = ctypes.create_string_buffer(1)
    n = libc.read(r, buf, 1)
    print("READ", n, ctypes.get_errno(), flush=True)
    wait_for_peers()


def c_sleep():
    libc = ctypes.CDLL(None)
    t0 = time.monotonic()
    left = libc.sleep(int(os.environ.get("CSLEEP", "6")))
    print("SLEPT", round(time.monotonic() - t0, 2), left, flush=True)
    wait_for_peers()


def in_fifo_source():
    path = os.path.join(os.environ["FIFO_DIR"], "fifo_source.py")
    os.mkfifo(path)
    code = compile("import time\ndef stuck():\n    time.sleep(100000)\n",
                   path, "exec")
    names = {}
    exec(code, names)
    names["stuck"]()


def wait_for_peers():
    while True:
        time.sleep(0.05)


def all_reduce_step(dist, torch):
    t = torch.ones(4)
    dist.all_reduce(t)


def train():
    dist = torch = None
    if os.environ.get("DDP") == "1":
        import torch
        import torch.distributed as dist
        dist.init_process_group("gloo")
        all_reduce_step(dist, torch)  # everyone takes part once
    print("READY", rank, flush=True)
    if how == "sleep":
        load_batch()
    elif how == "gil":
        hold_gil()
    elif how == "read":
        read_pipe()
    elif how == "fifo":
        in_fifo_source()
    elif how == "csleep":
        c_sleep()
    elif dist is not None:
        all_reduce_step(dist, torch)  # waits for the sleeping rank
    else:
        wait_for_peers()


train()
sys.exit(0)
