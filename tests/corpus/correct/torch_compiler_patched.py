# Right, and hostile to the worker: torch.compiler replaced by an object that raises on any attribute,
# which the worker's compile stance must survive (it looks it up after the submission loaded).
import torch
import torch._dynamo


class Boom:
    def __getattr__(self, name):
        raise RuntimeError("patched")


torch.compiler = Boom()


def attention(Q, K, V):
    return torch.softmax(Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5, dim=-1) @ V
