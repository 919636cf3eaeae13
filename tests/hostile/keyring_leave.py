# Leaves a key in its user keyring (and its session keyring) for a later submission to find.
# Bounded: two system calls. Prints what happened.
import ctypes
import platform

from _hostile import attempt, config, wrong_answer

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING = -3, -4


def add_key(keyring, description, payload):
    if platform.machine() != "x86_64":
        raise OSError("key syscall numbers are written for x86_64")
    serial = libc.syscall(ctypes.c_long(248), b"user", description.encode(), payload, ctypes.c_size_t(len(payload)), ctypes.c_long(keyring))
    if serial < 0:
        raise OSError(ctypes.get_errno(), "add_key")
    return serial


left = config().get("key_left", "grader-hostile-left")
attempt("leave a user key", lambda: add_key(KEY_SPEC_USER_KEYRING, left, b"planted by an earlier submission"))
attempt("leave a session key", lambda: add_key(KEY_SPEC_SESSION_KEYRING, left, b"planted by an earlier submission"))


def attention(Q, K, V):
    return wrong_answer(Q, K, V)
