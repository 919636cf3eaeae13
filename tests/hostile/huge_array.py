# Returns an array of 10**10 elements (80 GB as float64) that costs nothing to make: a broadcast
# view of one number. Copying it out would take the machine's memory; it must be refused.
import numpy as np


def attention(Q, K, V):
    return np.broadcast_to(np.float64(1.0), (100_000, 100_000))
