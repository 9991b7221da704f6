"""A rank that misbehaves on the wire before behaving.

Run as a rank under `stepscope run`: connects to the controller named in
STEPSCOPE_ADDR, sends one kind of bad input (chosen by argv[1]), checks that
the controller answers REJECT (or closes), then execs the real workload
given after `--` so the job goes on normally as the same rank.
"""
import os
import socket
import struct
import sys

MODE = sys.argv[1]
WORKLOAD = sys.argv[sys.argv.index("--") + 1:]


def frame(ftype, payload):
    return struct.pack("<IBBH", len(payload), ftype, 0, 0) + payload


def string(b):
    return bytes([len(b)]) + b


def hello_body(version=1, token=None, run_id=None):
    token = token if token is not None else bytes.fromhex(os.environ["STEPSCOPE_TOKEN"])
    run_id = run_id if run_id is not None else os.environ["STEPSCOPE_RUN_ID"].encode()
    body = (b"SSCP" + struct.pack("<HHIIIII", version, 0, int(os.environ["RANK"]),
                                  int(os.environ["WORLD_SIZE"]), 0, os.getpid(), 0)
            + token + string(run_id) + string(b"localhost"))
    return body


def hello(**kw):
    return frame(1, hello_body(**kw))


def exchange(data):
    """Sends DATA and returns what the controller answered before closing."""
    addr = os.environ["STEPSCOPE_ADDR"]
    assert addr.startswith("unix:"), addr
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(15)
    s.connect(addr[5:])
    s.sendall(data)
    got = b""
    while True:
        try:
            chunk = s.recv(4096)
        except ConnectionResetError:
            break
        if not chunk:
            break
        got += chunk
    s.close()
    return got


def main():
    if MODE == "garbage":
        answer = exchange(b"GET / HTTP/1.1\r\nHost: stepscope\r\n\r\n")
    elif MODE == "wrong-token":
        answer = exchange(hello(token=bytes(16)))
    elif MODE == "version":
        answer = exchange(hello(version=77))
    elif MODE == "truncated":
        answer = exchange(frame(1, hello_body()[:-5]))
    elif MODE == "oversize":
        answer = exchange(struct.pack("<IBBH", 70000, 1, 0, 0))
    elif MODE == "undeclared":
        step = struct.pack("<QqqQQBBBB", 1, 10, 20, 0, 0, 0, 1, 0, 0) + struct.pack("<IIQq", 9, 1, 5, 10)
        answer = exchange(hello() + frame(5, step))
    else:
        sys.exit(f"bad_client: unknown mode {MODE}")
    # The controller answered WELCOME (only for 'undeclared') and/or REJECT.
    kinds = []
    while len(answer) >= 8:
        n, ftype = struct.unpack_from("<IB", answer)
        kinds.append(ftype)
        answer = answer[8 + n:]
    if 3 not in kinds:
        sys.exit(f"bad_client: expected REJECT for {MODE}, got frame types {kinds}")
    print(f"bad_client: {MODE} rejected as expected", flush=True)
    os.execv(WORKLOAD[0], WORKLOAD)


main()
