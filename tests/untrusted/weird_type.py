"""Returns an object whose type name and repr carry escapes and workflow commands."""


class Weird:
    def __repr__(self):
        return "\x1b[2J\r::error::repr ##[add-mask]repr-secret \ud83d"


Weird.__name__ = Weird.__qualname__ = "T\x1b[31m\n::notice::typename\r##[debug]x\u202e"
Weird.__module__ = "mod\x1b]0;t\x07\n::warning::module"


def attention(Q, K, V):
    return Weird()
