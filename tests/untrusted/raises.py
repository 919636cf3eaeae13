"""Raises an exception whose message carries escapes, commands, links and a lone surrogate."""


def attention(Q, K, V):
    raise ValueError(
        "boom\x1b[2K\r\x1b[32mPASSED 15/15\x1b[0m\n::error::forged\n##[add-mask]raised-secret"
        " see https://evil.example/x and www.evil.example, ping @octocat, mail a@evil.example"
        " \u202egnp.exe \x9b2J lone \ud800 end"
    )
