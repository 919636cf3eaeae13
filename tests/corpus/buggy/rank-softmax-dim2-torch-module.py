# nn.Softmax(dim=2) built once in a module: fine for 3-D scores, wrong axis for 4-D ones.
import math

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.softmax = nn.Softmax(dim=2)

    def forward(self, q, k, v):
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        return torch.matmul(self.softmax(scores), v)


_layer = Attention()


def attention(Q, K, V):
    with torch.no_grad():
        out = _layer(torch.as_tensor(Q), torch.as_tensor(K), torch.as_tensor(V))
    return out.numpy()
