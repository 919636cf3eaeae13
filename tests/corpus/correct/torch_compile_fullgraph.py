# Right: torch.compile with fullgraph=True; the sandbox runs it eagerly (the "force_eager" stance).
import math

import torch


def _attention(Q, K, V):
    return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1)), dim=-1) @ V


attention = torch.compile(_attention, fullgraph=True, dynamic=True)
