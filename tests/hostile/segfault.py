# Crashes the interpreter by reading address 0.
import ctypes


def attention(Q, K, V):
    return ctypes.string_at(0)
