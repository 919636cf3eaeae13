# Reads standard input at import: it must get end-of-file at once, never the grader's terminal.
import sys

DATA = sys.stdin.read()
print(f"stdin gave {len(DATA)} characters")


def attention(Q, K, V):
    raise RuntimeError(f"stdin gave {len(DATA)} characters")
