# Wrong: divides the scores by d_k, inside a function compiled with torch.compile.
import torch


@torch.compile
def attention(Q, K, V):
    scores = Q @ K.transpose(-2, -1) / Q.shape[-1]
    return torch.softmax(scores, dim=-1) @ V
