# Writes files outside its working folder: next to itself, in /tmp, in world-writable folders the
# test names in hostile.json. Bounded: a few bytes per file, only at the paths listed.
import os

from _hostile import attempt, config, wrong_answer

TARGETS = config().get("write_targets", [])


def write(path):
    with open(path, "w") as fh:
        fh.write("escaped")
    return path


for path in TARGETS:
    attempt(f"write {path}", lambda path=path: write(path))
attempt("write in the working folder", lambda: write(os.path.join(os.getcwd(), "scratch.txt")))


def attention(Q, K, V):
    return wrong_answer(Q, K, V)
