"""The graded name is a callable object whose type name carries escapes."""


class Caller:
    def __call__(self, Q, K, V):
        return Q


Caller.__name__ = Caller.__qualname__ = "C\x1b[2J\n::error::callable ##[add-mask]c"
attention = Caller()
