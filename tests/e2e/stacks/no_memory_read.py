"""Runs a command with process_vm_readv(2) refused (EPERM) by a seccomp
filter, as a container runtime's default profile refuses it to a process
without CAP_SYS_PTRACE: `no_memory_read.py PROGRAM ARGS...`.  The tests
run `stepscope run` under it to see the controller fall back to the stack
signal when it may not read its ranks' memory."""
import ctypes
import os
import platform
import struct
import sys

NR = {"x86_64": 310, "aarch64": 270}[platform.machine()]
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
EPERM = 1
# load the syscall number; if process_vm_readv, fail it with EPERM; allow
# everything else
prog = [(0x20, 0, 0, 0),                    # ld [nr]
        (0x15, 0, 1, NR),                   # jeq NR ? next : skip one
        (0x06, 0, 0, 0x00050000 | EPERM),   # ret ERRNO(EPERM)
        (0x06, 0, 0, 0x7fff0000)]           # ret ALLOW
raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
filt = ctypes.create_string_buffer(raw, len(raw))


class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


fprog = Fprog(len(prog), ctypes.addressof(filt))
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
        libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER,
                   ctypes.byref(fprog), 0, 0) != 0:
    sys.exit("seccomp: " + os.strerror(ctypes.get_errno()))
os.execv(sys.argv[1], sys.argv[1:])
