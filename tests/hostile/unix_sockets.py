# Looks for what others left in the folders the worker shares with them: connects to a unix
# socket the test put in a 0700 folder of the grading user (where a session bus, a user's service
# manager or an ssh-agent would listen), and watches /tmp with inotify for the names of folders
# other processes make there (the test makes one every 20 ms while the batch runs). Bounded: a
# 0.5 s connect timeout and a 0.8 s watch.
import ctypes
import os
import select
import socket
import struct
import time

from _hostile import attempt, config, report, wrong_answer

SETTINGS = config()


def connect(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(0.5)
        client.connect(path)
        client.sendall(b"stolen data")
    return path


def watch(folder, token, seconds=0.8):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK)
    if fd < 0:
        report("inotify", f"failed ({os.strerror(ctypes.get_errno())})")
        return
    try:
        if libc.inotify_add_watch(fd, folder.encode(), 0x100 | 0x200) < 0:  # IN_CREATE | IN_DELETE
            report(f"inotify watch on {folder}", f"failed ({os.strerror(ctypes.get_errno())})")
            return
        report(f"inotify watch on {folder}", "set")
        seen = 0
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([fd], [], [], left)[0]:
                break
            data = os.read(fd, 65536)
            offset = 0
            while offset + 16 <= len(data):
                _wd, _mask, _cookie, size = struct.unpack_from("iIII", data, offset)
                name = data[offset + 16 : offset + 16 + size].rstrip(b"\0").decode(errors="replace")
                seen += token in name
                offset += 16 + size
        report("neighbour names seen", str(seen))
    finally:
        os.close(fd)


if "unix_socket" in SETTINGS:
    attempt("unix connect", lambda: connect(SETTINGS["unix_socket"]))
if "neighbour_token" in SETTINGS:
    watch("/tmp", SETTINGS["neighbour_token"])


def attention(Q, K, V):
    return wrong_answer(Q, K, V)
