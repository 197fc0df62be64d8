#!/usr/bin/env python3
"""Holds N idle keep-alive connections to a local HTTP server.

Usage: idle.py PORT N PATH READY_FILE MAX_SECS. Opens N connections to
127.0.0.1:PORT, sends one keep-alive GET of PATH on each and reads the whole
reply, writes the number of connections it holds to READY_FILE, then keeps
them open and silent until it is killed or MAX_SECS have passed."""
import socket
import sys
import time

port, count, path, ready, max_secs = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
                                      sys.argv[4], float(sys.argv[5]))
request = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n").encode()


def read_reply(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("closed before the reply's header")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    if not head.startswith(b"HTTP/1.1 200"):
        raise ConnectionError(head.split(b"\r\n", 1)[0].decode(errors="replace"))
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the reply's body")
        body += chunk


socks = []
for _ in range(count):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(request)
    read_reply(s)
    socks.append(s)
with open(ready, "w") as f:
    f.write(f"{len(socks)}\n")
time.sleep(max_secs)
