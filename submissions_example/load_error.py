"""Bug: imports a helper module that was not submitted."""

import numpy as np
from my_attention_helpers import softmax


def attention(Q, K, V):
    return softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])) @ V
