# Wrong: computes in bfloat16 and returns the bfloat16 tensor (NumPy has no bfloat16: widened in the worker).
import torch


def attention(Q, K, V):
    q, k, v = Q.to(torch.bfloat16), K.to(torch.bfloat16), V.to(torch.bfloat16)
    w = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
    return w @ v
