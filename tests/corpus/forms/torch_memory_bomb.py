"""Allocates 2 GB in the call: the memory limit, counted after the framework import, stops it."""

import torch


def attention(q, k, v):
    big = torch.ones(2**28, dtype=torch.float64)  # 2 GB
    return q
