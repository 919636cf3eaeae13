# Makes folders in its working folder that nobody may list or enter (mode 000, nested), so that
# a plain rmtree by an unprivileged grader fails. Writes only inside its own working folder.
import os

from _hostile import attempt, report, wrong_answer


def lock_up():
    top = os.path.join(os.getcwd(), "locked")
    os.makedirs(os.path.join(top, "inner", "deeper"))
    with open(os.path.join(top, "inner", "deeper", "file.txt"), "w") as fh:
        fh.write("left behind?")
    os.chmod(os.path.join(top, "inner", "deeper"), 0)
    os.chmod(os.path.join(top, "inner"), 0o300)
    os.chmod(top, 0)
    return top


report("WORKDIR", os.getcwd())
attempt("lock up", lock_up)


def attention(Q, K, V):
    return wrong_answer(Q, K, V)
