# Merely imports the function: not the submission file.
import numpy as np

from model.attention import attention


def test_shape():
    Q = np.ones((2, 3))
    assert attention(Q, Q, Q).shape == (2, 3)
