#!/usr/bin/env python3
"""Clients that ask for large answers and never read them, against a running pure-serve (kv app).

Standard library only. Steps:

1. Fills the kv app with --values (16) entries `big00`, `big01`, ... of 65,536 characters of
   U+0001 each (JSON writes each as `\\u0001`, six bytes: a page of all of them is about 6.3 MB),
   and one small entry `small`.
2. Reads the server's VmRSS (/proc/PID/status) while idle.
3. Opens --clients (200) connections, each sending `GET /kv?limit=1000` once, and never reads.
   A sampler reads VmRSS every ~10 ms from then on.
4. After --settle seconds (5), a normal client sends `GET /kv/small` --requests (1000) times one
   after the other on a keep-alive connection, while the non-readers hold on; it measures each
   request's wall time from before its first byte is sent to the answer's last byte.
5. Prints idle RSS, the peak and the last RSS above idle, the normal client's p50, p99, p99.9
   and max in ms, and how many of the non-readers' connections the server had closed by then.

Example:
    pure-serve apps/kv --data /tmp/d --listen 127.0.0.1:18300 &
    python3 slow_readers.py --port 18300 --pid $!
"""

import argparse
import json
import socket
import threading
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def request(sock, method, path, body=None):
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n"
    data = b""
    if body is not None:
        data = json.dumps(body).encode()
        head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    sock.sendall(head.encode() + b"\r\n" + data)
    return read_answer(sock)


def read_answer(sock):
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        buffer += chunk
    head, rest = buffer.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed in the body")
        rest += chunk
    return status, rest[:length]


def percentile(sorted_values, p):
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, int(round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[index]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--values", type=int, default=16)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    address = (args.host, args.port)

    setup = socket.create_connection(address)
    for i in range(args.values):
        status, _ = request(setup, "PUT", f"/kv/big{i:02}", {"value": "\u0001" * 65536})
        assert status == 204, status
    status, _ = request(setup, "PUT", "/kv/small", {"value": "x"})
    assert status == 204, status
    status, page = request(setup, "GET", "/kv?limit=1000")
    assert status == 200, status
    setup.close()
    time.sleep(1.0)
    idle = rss_kib(args.pid)

    samples = []
    sampling = threading.Event()

    def sample():
        while not sampling.is_set():
            try:
                samples.append(rss_kib(args.pid))
            except (OSError, RuntimeError):
                return
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    holders = []
    for _ in range(args.clients):
        sock = socket.create_connection(address)
        sock.sendall(b"GET /kv?limit=1000 HTTP/1.1\r\nHost: localhost\r\n\r\n")
        holders.append(sock)
    time.sleep(args.settle)

    latencies = []
    failures = 0
    client = socket.create_connection(address)
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(args.requests):
        started = time.perf_counter()
        try:
            status, _ = request(client, "GET", "/kv/small")
            if status != 200:
                failures += 1
        except (OSError, ConnectionError):
            failures += 1
            client = socket.create_connection(address)
            continue
        latencies.append((time.perf_counter() - started) * 1000)
    last = rss_kib(args.pid)
    sampling.set()
    sampler.join()

    closed = 0
    for sock in holders:
        sock.setblocking(False)
        try:
            # A connection the server closed reads its buffered bytes, then EOF or a reset.
            while True:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    closed += 1
                    break
        except BlockingIOError:
            pass
        except ConnectionResetError:
            closed += 1
        sock.close()

    latencies.sort()
    figures = {
        "page_bytes": len(page),
        "clients": args.clients,
        "idle_rss_mb": idle / 1024,
        "peak_above_idle_mb": (max(samples) - idle) / 1024 if samples else None,
        "last_above_idle_mb": (last - idle) / 1024,
        "get_p50_ms": percentile(latencies, 50),
        "get_p99_ms": percentile(latencies, 99),
        "get_p999_ms": percentile(latencies, 99.9),
        "get_max_ms": latencies[-1] if latencies else None,
        "get_failures": failures,
        "holders_closed_by_server": closed,
    }
    for name, value in figures.items():
        print(f"{name:28} {value:.1f}" if isinstance(value, float) else f"{name:28} {value}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(figures, out, indent=2)


if __name__ == "__main__":
    main()
