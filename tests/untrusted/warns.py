"""Compiling this file warns (an invalid escape, `is` with a literal); a printed warning would
quote the line with the comment below, which a CI runner would take as a workflow command."""

import numpy as np

PATTERN = "\d+"  # ##[stop-commands]attacker-token


def attention(Q, K, V):
    if Q is 1:  # ::warning::is-literal
        pass
    print("::attacker-token::")
    print("::add-mask::after-resume")
    return np.zeros((1, 1))
