# Graded as a candidate's checkout with `src -> /` beside it (and `up -> ..`): through them the
# whole file system, or the other candidates, would become readable. Bounded: lists two folders.
import os

from _hostile import attempt, wrong_answer

HERE = os.path.dirname(os.path.abspath(__file__))
attempt("list src/etc", lambda: len(os.listdir(os.path.join(HERE, "src", "etc"))))
attempt("list up", lambda: sorted(os.listdir(os.path.join(HERE, "up"))))


def attention(Q, K, V):
    return wrong_answer(Q, K, V)
