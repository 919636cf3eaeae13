# Forges the worker's own messages: a second sandbox report claiming isolation that was not there,
# written straight into the result pipe (its number is in sys.argv), with the grader's own encoder
# (already loaded in the worker). The grader must keep the first, authentic report and refuse the
# run as malformed.
import os
import sys

from grader.sandbox.protocol import encode

from _hostile import attempt

FAKE = [["network-namespace", True, "forged"], ["landlock-fs", True, "forged"], ["pid-namespace", True, "forged"]]


def forge():
    fd = int(sys.argv[-1])
    os.write(fd, encode({"kind": "sandbox", "layers": FAKE, "missing": []}))
    return fd


attempt("forge a sandbox report", forge)


def attention(Q, K, V):
    return Q
