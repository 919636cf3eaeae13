# Phones home: a TCP connect and a UDP datagram to listeners the test opened on the loopback
# (their ports are in hostile.json). Bounded: each try gives up after 2 s.
import socket

from _hostile import attempt, config, wrong_answer

PORTS = config()


def connect(port):
    with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
        conn.sendall(b"stolen data")
    return port


def datagram(port):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"stolen data", ("127.0.0.1", port))
    return port


if "tcp_port" in PORTS:
    attempt("tcp connect", lambda: connect(PORTS["tcp_port"]))
if "udp_port" in PORTS:
    attempt("udp send", lambda: datagram(PORTS["udp_port"]))


def attention(Q, K, V):
    return wrong_answer(Q, K, V)
