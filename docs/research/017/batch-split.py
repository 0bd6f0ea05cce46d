"""Where a fillbatch request's time goes in the server: sends 300 batches of 1,000 entries
(pre-encoded, so that the client spends nothing but the send) to a running pure-serve with the
kv app, one at a time on one connection, and divides the server's own counters
(/_pure/metrics) by the batches.

    target/release/pure-serve apps/kv --data DIR --listen 127.0.0.1:8999 &
    python3 docs/research/017/batch-split.py
"""
import socket
import time
import urllib.request

ADDRESS = ("127.0.0.1", 8999)
bodies = []
for b in range(300):
    body = ("{\"put\":{" + ",".join('"%016d":"%s"' % (b * 1000 + i, "v%099d" % i)
                                   for i in range(1000)) + "}}").encode()
    bodies.append(b"POST /kv HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)


def metrics():
    text = urllib.request.urlopen("http://%s:%d/_pure/metrics" % ADDRESS).read().decode()
    return {k: float(v) for k, v in (l.rsplit(" ", 1) for l in text.splitlines()
                                     if l and not l.startswith("#"))}


s = socket.create_connection(ADDRESS)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
before = metrics()
start = time.perf_counter()
for request in bodies:
    s.sendall(request)
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += s.recv(65536)
    head, rest = answer.split(b"\r\n\r\n", 1)
    length = int([l.split(b":")[1] for l in head.split(b"\r\n")
                  if l.lower().startswith(b"content-length")][0])
    while len(rest) < length:
        rest += s.recv(65536)
wall = (time.perf_counter() - start) / len(bodies) * 1e3
after = metrics()
n = len(bodies)
d = lambda k: (after[k] - before.get(k, 0)) / n * 1e3
print("ms per batch of 1,000 entries")
print("  wall, at the client          %.3f" % wall)
print("  server, head to answer       %.3f" % d('pure_http_request_duration_seconds_sum{method="POST",route="/kv"}'))
print("  owner: handler and encoding  %.3f" % d("pure_owner_busy_seconds_total"))
print("  fdatasync                    %.3f" % d("pure_sync_seconds_sum"))
