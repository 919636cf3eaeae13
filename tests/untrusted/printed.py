"""Prints what would repaint a terminal and command a CI runner, then returns a wrong shape."""


def attention(Q, K, V):
    print("\r\x1b[2K\x1b[1A\x1b[32mPASSED\x1b[0m  submission.py  15/15 points")
    print("\x1b]52;c;aGk=\x07\x1b]0;title\x07\x1b]8;;https://evil.example\x07link\x1b]8;;\x07")
    print("::add-mask::printed-secret\n##[set-output name=grade;]15\r::warning::after-cr")
    print("bidi \u202eFAILED\u202c c1 \x9b31m del \x7f nel \x85 sep \u2028 end")
    return Q
