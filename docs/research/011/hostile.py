#!/usr/bin/env python3
"""Hostile-client figures for a running pure-serve (scoreboard app). Standard library only.

Three scenarios, each a figure of how the server holds up against a hostile or careless peer.
Every request goes through a tiny HTTP/1.1 client on raw sockets (Content-Length framing both
ways; a connection the server closes is reopened).

bodies
    Memory held for request bodies. Reads the server's VmRSS while idle, then opens --connections
    (256) connections at once, each sending `POST /scores` with a --body-bytes (1 MiB) body that
    is valid JSON but which the scoreboard rejects (an extra "pad" field): `--body-shape array`
    (default) pads with as many small items as fit, `{"player": "x", "score": 1, "pad":
    [0,0,...]}`; `--body-shape string` with one long string, `"pad": "aaaa..."`. All the threads
    send together (a barrier), a sampler reads VmRSS and VmHWM from /proc/PID/status every
    ~10 ms, and every answer is awaited. Prints the idle RSS, the peak RSS (the larger of the
    highest sample and VmHWM), peak minus idle, and the count of answers per status. VmHWM is
    the high-water mark over the server's whole life, so run this on a fresh server.

idle-sockets
    Whether one greedy peer can lock a normal client out. The greedy peer (its own process)
    binds --idle-sockets (10000) sockets to source address 127.0.0.2, connects them without
    blocking and holds them open, sending nothing; with --reconnect, a socket the server closes
    (or that fails to connect) is opened again at once. Once every socket has connected or
    failed (or --settle-seconds passed: the rest count as pending, and the kernel keeps
    retrying them), a normal client on 127.0.0.1 does sequential `GET /players/ann` (ann posted
    a score first), each on a NEW connection so that it must get through accept, for --requests
    (200) requests or --seconds, whichever ends first, each with a --timeout (60 s) deadline
    covering connect, send and the whole answer. Prints p50, p90, p99 and max latency in ms
    over the requests that succeeded, the number that failed, and the greedy peer's counts.
    Without --reconnect the figure depends on the phase of the server's idle timeout (its
    connections are freed in waves): typically one request waits for the next wave and the rest
    pass at once, so look at max; with --reconnect the peer refills every freed slot at once.

invalid-bodies
    Whether a flood of invalid bodies slows honest writes. --abusers (64) clients (in their own
    process) loop sending --body-bytes (1 MiB) bodies to `POST /scores` on keep-alive
    connections: `--invalid array` (default) is valid JSON of the array shape above, which the
    handler rejects; `--invalid string` the string shape; `--invalid malformed` is `[` followed
    by garbage, which fails to parse. Meanwhile one client posts valid scores
    (`{"player":"p<i>","score":<i>}`) one after another on one keep-alive connection; after
    --warmup (2 s) it measures for --seconds (10 s). Prints the valid posts' p50, p90, p99 and
    max latency in ms and their count and statuses, and the abusers' requests and statuses in
    the same window.

Latencies are wall time on the client, from before the first byte is sent (before connect, for
new connections) to the last byte of the answer. The clients share the machine's CPUs with the
server, as real clients on the same host would.

Example:
    pure-serve apps/scoreboard --data /tmp/d --listen 127.0.0.1:18200 &
    python3 hostile.py --url http://127.0.0.1:18200 --pid $! --scenario bodies --json out.json
"""

import argparse
import errno
import json
import math
import multiprocessing
import os
import resource
import select
import socket
import statistics
import sys
import threading
import time
import urllib.parse

MIB = 1 << 20


# ---------------------------------------------------------------------------------------------
# A tiny HTTP/1.1 client


class Closed(Exception):
    """The server closed the connection (or reset it) before a whole answer arrived."""


class Connection:
    """One HTTP/1.1 connection: send a request with Content-Length, read one answer."""

    def __init__(self, host, port, timeout, source=None, deadline=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if source:
            self.sock.bind((source, 0))
        self.sock.settimeout(_remaining(deadline, timeout))
        try:
            self.sock.connect((host, port))
        except BaseException:
            self.sock.close()
            raise
        self.timeout = timeout
        self.buffer = b""
        self.open = True

    def close(self):
        self.open = False
        self.sock.close()

    def request(self, method, path, body=b"", deadline=None):
        """Returns (status, body bytes). Raises Closed, socket.timeout or OSError."""
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: pure\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.sock.settimeout(_remaining(deadline, self.timeout))
        try:
            self.sock.sendall(head + body if len(body) < 65536 else head)
            if len(body) >= 65536:
                self.sock.sendall(body)
        except (BrokenPipeError, ConnectionResetError) as error:
            # The server may have answered early (413, 408) and closed: read what it said.
            try:
                return self._read_answer(deadline)
            except (Closed, OSError):
                raise Closed(f"send failed: {error}") from error
        return self._read_answer(deadline)

    def _read_answer(self, deadline):
        while b"\r\n\r\n" not in self.buffer:
            self._fill(deadline)
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            self._fill(deadline)
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, body

    def _fill(self, deadline):
        self.sock.settimeout(_remaining(deadline, self.timeout))
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError as error:
            raise Closed("connection reset") from error
        if not chunk:
            raise Closed("connection closed by the server")
        self.buffer += chunk


def _remaining(deadline, timeout):
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("deadline passed")
    return left


def parse_url(url):
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme != "http" or not parsed.hostname:
        sys.exit(f"--url must look like http://HOST:PORT, not {url!r}")
    return parsed.hostname, parsed.port or 80


# ---------------------------------------------------------------------------------------------
# Bodies, figures, /proc


def make_body(shape, size):
    """A body of exactly `size` bytes: valid JSON the scoreboard rejects, or malformed JSON."""
    if shape == "malformed":
        garbage = b"garbage}{,:" * (size // 11 + 1)
        return (b"[" + garbage)[:size]
    if shape == "string":
        prefix = b'{"player": "x", "score": 1, "pad": "'
        suffix = b'"}'
        return prefix + b"a" * (size - len(prefix) - len(suffix)) + suffix
    if shape == "array":
        prefix = b'{"player": "x", "score": 1, "pad": ['
        suffix = b"0]}"
        room = size - len(prefix) - len(suffix)
        body = prefix + b"0," * (room // 2) + suffix + b" " * (room % 2)
        assert len(body) == size
        return body
    raise ValueError(shape)


def describe_shape(shape):
    return {
        "array": '{"player": "x", "score": 1, "pad": [0,0,...,0]} (valid JSON, rejected: extra field)',
        "string": '{"player": "x", "score": 1, "pad": "aaa...a"} (valid JSON, rejected: extra field)',
        "malformed": '"[" followed by garbage (malformed JSON)',
    }[shape]


def proc_status(pid):
    """VmRSS and VmHWM of `pid` in bytes, or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            text = status.read()
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(rest.split()[0]) * 1024
    return values


def open_fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def alive(pid):
    return os.path.exists(f"/proc/{pid}")


def percentiles(values):
    """p50, p90, p99 and max (nearest rank) of latencies in seconds, as milliseconds."""
    if not values:
        return {"p50_ms": None, "p90_ms": None, "p99_ms": None, "max_ms": None}
    ordered = sorted(values)

    def rank(q):
        index = max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))
        return round(ordered[index] * 1000, 2)

    return {"p50_ms": rank(0.50), "p90_ms": rank(0.90), "p99_ms": rank(0.99),
            "max_ms": round(ordered[-1] * 1000, 2)}


def format_latency(figures):
    if figures["p50_ms"] is None:
        return "no successful request"
    return "p50 {p50_ms} ms, p90 {p90_ms} ms, p99 {p99_ms} ms, max {max_ms} ms".format(**figures)


def format_statuses(counts):
    return ", ".join(f"{status}: {count}" for status, count in sorted(counts.items(), key=str)) or "none"


def count(counts, key):
    counts[key] = counts.get(key, 0) + 1


def remember(samples, status, body, distinct=8):
    """Counts the answer bodies seen for each status (the first `distinct` kinds, cut short)."""
    kinds = samples.setdefault(status, {})
    text = body[:160].decode("utf-8", "replace")
    if text in kinds or len(kinds) < distinct:
        kinds[text] = kinds.get(text, 0) + 1


def format_samples(samples):
    return "; ".join(f"{status}: {n}x {text}" for status, kinds in sorted(samples.items(), key=str)
                     for text, n in kinds.items())


def mib(value):
    return None if value is None else round(value / MIB, 1)


def post_ann(host, port, timeout):
    connection = Connection(host, port, timeout)
    try:
        status, body = connection.request("POST", "/scores", b'{"player": "ann", "score": 42}')
    finally:
        connection.close()
    if status != 200:
        sys.exit(f"POST /scores for ann answered {status}: {body[:200]!r}")


# ---------------------------------------------------------------------------------------------
# Scenario 1: bodies


def scenario_bodies(args, host, port):
    body = make_body(args.body_shape, args.body_bytes)
    idle = proc_status(args.pid)
    if idle is None:
        sys.exit(f"no process {args.pid}")
    samples = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            status = proc_status(args.pid)
            if status:
                samples.append(status["VmRSS"])
            time.sleep(args.sample_interval)

    results = [None] * args.connections
    barrier = threading.Barrier(args.connections + 1)

    def client(index):
        try:
            connection = Connection(host, port, args.timeout)
        except OSError as error:
            barrier.wait()
            results[index] = (f"connect: {type(error).__name__}", None, b"")
            return
        barrier.wait()
        started = time.monotonic()
        try:
            status, answer = connection.request("POST", "/scores", body,
                                                deadline=started + args.timeout)
            results[index] = (status, time.monotonic() - started, answer)
        except (Closed, OSError) as error:
            results[index] = (f"error: {type(error).__name__}", time.monotonic() - started,
                              str(error).encode())
        finally:
            connection.close()

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    threads = [threading.Thread(target=client, args=(i,), daemon=True)
               for i in range(args.connections)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.monotonic()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    time.sleep(0.1)
    stop.set()
    sampler.join()
    after = proc_status(args.pid) or {}
    hwm = after.get("VmHWM")
    peak = max([hwm or 0] + samples)
    statuses, answers = {}, {}
    latencies = []
    for status, latency, answer in results:
        count(statuses, status)
        remember(answers, status, answer)
        if latency is not None:
            latencies.append(latency)
    figures = {
        "scenario": "bodies",
        "body_shape": args.body_shape,
        "body": describe_shape(args.body_shape),
        "body_bytes": len(body),
        "connections": args.connections,
        "idle_rss_mib": mib(idle["VmRSS"]),
        "peak_rss_mib": mib(peak),
        "max_sample_rss_mib": mib(max(samples) if samples else None),
        "vmhwm_mib": mib(hwm),
        "peak_minus_idle_mib": mib(peak - idle["VmRSS"]),
        "rss_after_mib": mib(after.get("VmRSS")),
        "samples": len(samples),
        "statuses": statuses,
        "answers": answers,
        "elapsed_s": round(elapsed, 2),
        "latency": percentiles(latencies),
        "server_alive": alive(args.pid),
    }
    say = lambda text: print(f"bodies: {text}", flush=True)
    say(f"{args.connections} concurrent POST /scores of {len(body)} bytes: {figures['body']}")
    say(f"idle RSS {figures['idle_rss_mib']} MiB")
    say(f"peak RSS {figures['peak_rss_mib']} MiB (highest of {len(samples)} samples "
        f"{figures['max_sample_rss_mib']} MiB, VmHWM {figures['vmhwm_mib']} MiB)")
    say(f"peak minus idle {figures['peak_minus_idle_mib']} MiB")
    say(f"statuses {format_statuses(statuses)}")
    say(f"answers {format_samples(answers)}")
    say(f"all answered in {figures['elapsed_s']} s; per request {format_latency(figures['latency'])}; "
        f"RSS after {figures['rss_after_mib']} MiB; server alive: {figures['server_alive']}")
    return figures


# ---------------------------------------------------------------------------------------------
# Scenario 2: idle-sockets


def greedy_peer(host, port, total, source, reconnect, connect_timeout, pipe, partial=False):
    """Runs in its own process: holds `total` idle connections from `source` (a comma-separated
    list of addresses, used in turn), sending nothing (with `partial`, the start of a request
    head that never ends).

    Reports {"settled": counts} once every socket has connected or failed (or the parent asks),
    then holds on until the parent sends "stop", and reports the final counts."""
    poller = select.epoll()
    sockets = {}  # fd -> (socket, "connecting" | "connected", when opened)
    counts = {"connected": 0, "failed": 0, "closed_by_server": 0, "reopened": 0,
              "open_errors": 0, "open_error_kinds": {}}

    sources = source.split(",")
    opened_total = [0]

    def open_one():
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.bind((sources[opened_total[0] % len(sources)], 0))
            opened_total[0] += 1
            code = sock.connect_ex((host, port))
        except OSError as error:
            sock.close()
            counts["open_errors"] += 1
            count(counts["open_error_kinds"], errno.errorcode.get(error.errno, str(error.errno)))
            return False
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            counts["open_errors"] += 1
            count(counts["open_error_kinds"], errno.errorcode.get(code, str(code)))
            return False
        sockets[sock.fileno()] = (sock, "connecting", time.monotonic())
        poller.register(sock.fileno(), select.EPOLLOUT)
        return True

    def drop(fd):
        sock, _, _ = sockets.pop(fd)
        poller.unregister(fd)
        sock.close()

    for _ in range(total):
        open_one()
    settled_sent = False
    first_settled = None
    stop = False
    while not stop:
        for fd, events in poller.poll(0.05):
            sock, state, opened = sockets[fd]
            if state == "connecting":
                error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if error == 0:
                    counts["connected"] += 1
                    if partial:
                        try:
                            sock.send(b"GET /players/ann HTTP/1.1\r\nHo")
                        except OSError:
                            pass
                    sockets[fd] = (sock, "connected", opened)
                    poller.modify(fd, select.EPOLLIN | select.EPOLLRDHUP)
                    continue
                counts["failed"] += 1
                drop(fd)
            else:
                try:
                    data = sock.recv(4096)
                except OSError:
                    data = b""
                if data:
                    continue  # the server said something (a 408?): keep holding the socket
                counts["closed_by_server"] += 1
                drop(fd)
            if reconnect and open_one():
                counts["reopened"] += 1
        now = time.monotonic()
        for fd, (sock, state, opened) in list(sockets.items()):
            if state == "connecting" and now - opened > connect_timeout:
                counts["failed"] += 1
                drop(fd)
                if reconnect and open_one():
                    counts["reopened"] += 1
        pending = sum(1 for _, state, _ in sockets.values() if state == "connecting")
        held = len(sockets) - pending
        if not settled_sent and (pending == 0 or pipe.poll(0)):
            if pipe.poll(0):
                pipe.recv()  # "settle now"
            first_settled = dict(counts, held=held, pending=pending)
            pipe.send({"settled": first_settled})
            settled_sent = True
        if settled_sent and pipe.poll(0):
            stop = pipe.recv() == "stop"
    pending = sum(1 for _, state, _ in sockets.values() if state == "connecting")
    pipe.send({"final": dict(counts, held=len(sockets) - pending, pending=pending)})
    for fd in list(sockets):
        drop(fd)


def scenario_idle_sockets(args, host, port):
    post_ann(host, port, args.timeout)
    context = multiprocessing.get_context("fork")
    parent_end, child_end = context.Pipe()
    peer = context.Process(target=greedy_peer, daemon=True, args=(
        host, port, args.idle_sockets, args.greedy_source, args.reconnect,
        args.connect_timeout, child_end, args.partial_head))
    started = time.monotonic()
    peer.start()
    if parent_end.poll(args.settle_seconds):
        settled = parent_end.recv()["settled"]
    else:
        parent_end.send("settle now")
        settled = parent_end.recv()["settled"]
    settle_s = time.monotonic() - started
    server_fds = open_fds(args.pid)
    print(f"idle-sockets: greedy peer from {args.greedy_source}: {args.idle_sockets} sockets, "
          f"after {settle_s:.1f} s {settled['held']} held, {settled['pending']} still connecting, "
          f"{settled['failed']} failed, {settled['closed_by_server']} closed by the server, "
          f"{settled['open_errors']} could not be opened {settled['open_error_kinds'] or ''}; "
          f"server has {server_fds} fds open", flush=True)

    latencies, failures, statuses, answers = [], {}, {}, {}
    measure_start = time.monotonic()
    end = measure_start + args.seconds if args.seconds else None
    done = 0
    while done < args.requests and (end is None or time.monotonic() < end):
        began = time.monotonic()
        deadline = began + args.timeout
        connection = None
        try:
            connection = Connection(host, port, args.timeout, deadline=deadline)
            status, answer = connection.request("GET", "/players/ann", deadline=deadline)
            count(statuses, status)
            remember(answers, status, answer)
            if status == 200:
                latencies.append(time.monotonic() - began)
            else:
                count(failures, f"status {status}")
        except (Closed, OSError) as error:
            count(failures, type(error).__name__)
        finally:
            if connection:
                connection.close()
        done += 1
        if args.verbose:
            print(f"  request {done}: {(time.monotonic() - began) * 1000:.1f} ms", flush=True)
    measured_s = time.monotonic() - measure_start
    parent_end.send("stop")
    final = parent_end.recv()["final"] if parent_end.poll(30) else {}
    peer.join(10)
    figures = {
        "scenario": "idle-sockets",
        "idle_sockets": args.idle_sockets,
        "greedy_source": args.greedy_source,
        "reconnect": args.reconnect,
        "settle_s": round(settle_s, 1),
        "greedy_at_start": settled,
        "greedy_at_end": final,
        "server_fds_at_start": server_fds,
        "requests": done,
        "succeeded": len(latencies),
        "failed": sum(failures.values()),
        "failures": failures,
        "statuses": statuses,
        "answers": answers,
        "measured_s": round(measured_s, 1),
        "stopped_by": "requests" if done >= args.requests else "seconds",
        "latency": percentiles(latencies),
        "server_alive": alive(args.pid),
    }
    say = lambda text: print(f"idle-sockets: {text}", flush=True)
    say(f"GET /players/ann on a new connection each, from 127.0.0.1: {done} requests in "
        f"{figures['measured_s']} s (stopped by --{figures['stopped_by']})")
    say(f"latency {format_latency(figures['latency'])}")
    say(f"failed {figures['failed']} {failures or ''}")
    say(f"greedy peer at the end: {final.get('held')} held, {final.get('pending')} connecting, "
        f"{final.get('failed')} failed, {final.get('closed_by_server')} closed by the server, "
        f"{final.get('reopened')} reopened; server alive: {figures['server_alive']}")
    return figures


# ---------------------------------------------------------------------------------------------
# Scenario 3: invalid-bodies


def abusers(host, port, clients, body, timeout, stop_at, queue):
    """Runs in its own process: `clients` threads loop sending `body` until `stop_at`.

    Puts a list of (finish time, status) for every answer or error on `queue`."""
    records, answers = [], {}
    lock = threading.Lock()

    def loop():
        connection = None
        mine = []
        while time.monotonic() < stop_at:
            try:
                if connection is None or not connection.open:
                    connection = Connection(host, port, timeout)
                status, answer = connection.request("POST", "/scores", body)
            except (Closed, OSError) as error:
                status, answer = f"error: {type(error).__name__}", str(error).encode()
                if connection:
                    connection.close()
                connection = None
            mine.append((time.monotonic(), status))
            with lock:
                remember(answers, status, answer)
        if connection:
            connection.close()
        with lock:
            records.extend(mine)

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 5)
    queue.put((records, answers))


def scenario_invalid_bodies(args, host, port):
    body = make_body(args.invalid, args.body_bytes)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    begin = time.monotonic()
    measure_start = begin + args.warmup
    measure_end = measure_start + args.seconds
    abuse = context.Process(target=abusers, daemon=True, args=(
        host, port, args.abusers, body, args.timeout, measure_end, queue))
    abuse.start()

    latencies, statuses, answers, reconnects, i = [], {}, {}, 0, 0
    connection = None
    while time.monotonic() < measure_end:
        i += 1
        payload = json.dumps({"player": f"p{i}", "score": i}, separators=(",", ":")).encode()
        began = time.monotonic()
        try:
            if connection is None or not connection.open:
                if connection is not None:
                    reconnects += 1
                connection = Connection(host, port, args.timeout, deadline=began + args.timeout)
            status, answer = connection.request("POST", "/scores", payload,
                                                deadline=began + args.timeout)
        except (Closed, OSError) as error:
            status, answer = f"error: {type(error).__name__}", str(error).encode()
            if connection:
                connection.close()
        finished = time.monotonic()
        if began >= measure_start:
            count(statuses, status)
            if status != 200:
                remember(answers, status, answer)
            if status == 200:
                latencies.append(finished - began)
    if connection:
        connection.close()
    records, abuse_answers = queue.get(timeout=args.timeout + 30)
    abuse.join(10)
    abuse_statuses = {}
    for finished, status in records:
        if measure_start <= finished <= measure_end:
            count(abuse_statuses, status)
    abuse_total = sum(abuse_statuses.values())
    figures = {
        "scenario": "invalid-bodies",
        "invalid": args.invalid,
        "body": describe_shape(args.invalid),
        "body_bytes": len(body),
        "abusers": args.abusers,
        "warmup_s": args.warmup,
        "seconds": args.seconds,
        "valid_posts": len(latencies),
        "valid_statuses": statuses,
        "valid_other_answers": answers,
        "valid_reconnects": reconnects,
        "latency": percentiles(latencies),
        "abuser_requests": abuse_total,
        "abuser_requests_per_s": round(abuse_total / args.seconds, 1),
        "abuser_statuses": abuse_statuses,
        "abuser_answers": abuse_answers,
        "abuser_requests_whole_run": len(records),
        "server_alive": alive(args.pid),
    }
    say = lambda text: print(f"invalid-bodies: {text}", flush=True)
    say(f"{args.abusers} abusers looping POST /scores of {len(body)} bytes: {figures['body']}")
    say(f"valid posts over {args.seconds} s after {args.warmup} s warm-up: "
        f"{format_latency(figures['latency'])}; {len(latencies)} posts "
        f"({len(latencies) / args.seconds:.1f}/s), statuses {format_statuses(statuses)}, "
        f"{reconnects} reconnects" + (f"; answers {format_samples(answers)}" if answers else ""))
    say(f"abusers in the same window: {abuse_total} requests "
        f"({figures['abuser_requests_per_s']}/s), statuses {format_statuses(abuse_statuses)}; "
        f"server alive: {figures['server_alive']}")
    say(f"abusers' answers over the whole run {format_samples(abuse_answers)}")
    return figures


# ---------------------------------------------------------------------------------------------


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = 1 << 20
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def main():
    parser = argparse.ArgumentParser(
        description="Hostile-client figures for a running pure-serve serving apps/scoreboard.",
        epilog="See the module docstring (head of this file) for what each scenario measures.")
    parser.add_argument("--url", required=True, help="the server, e.g. http://127.0.0.1:18200")
    parser.add_argument("--pid", type=int, required=True, help="the server's pid (/proc/PID/status)")
    parser.add_argument("--scenario", required=True,
                        choices=["bodies", "idle-sockets", "invalid-bodies", "all"])
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON here")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="client-side deadline per request, seconds (default 60)")
    parser.add_argument("--body-bytes", type=int, default=MIB,
                        help="size of each large body (default 1 MiB = 1048576, the server's "
                             "default --max-body)")
    parser.add_argument("--verbose", action="store_true", help="print each idle-sockets request")

    group = parser.add_argument_group("bodies")
    group.add_argument("--connections", type=int, default=256,
                       help="concurrent large bodies (default 256)")
    group.add_argument("--body-shape", choices=["array", "string"], default="array",
                       help="array: many small items (default); string: one long string")
    group.add_argument("--sample-interval", type=float, default=0.01,
                       help="seconds between RSS samples (default 0.01)")

    group = parser.add_argument_group("idle-sockets")
    group.add_argument("--idle-sockets", type=int, default=10000,
                       help="sockets the greedy peer holds (default 10000)")
    group.add_argument("--greedy-source", default="127.0.0.2",
                       help="source address of the greedy peer, or several, comma-separated, "
                            "used in turn (default 127.0.0.2)")
    group.add_argument("--partial-head", action="store_true",
                       help="each greedy socket sends the start of a request head and stalls")
    group.add_argument("--reconnect", action="store_true",
                       help="the greedy peer reopens at once each socket that closes or fails")
    group.add_argument("--settle-seconds", type=float, default=15.0,
                       help="longest wait for the greedy sockets to connect or fail before "
                            "measuring; the rest count as pending (default 15)")
    group.add_argument("--connect-timeout", type=float, default=120.0,
                       help="the greedy peer gives up on a connect after this (default 120 s)")
    group.add_argument("--requests", type=int, default=200,
                       help="normal client's GETs (default 200)")

    group = parser.add_argument_group("idle-sockets and invalid-bodies")
    group.add_argument("--seconds", type=float, default=None,
                       help="idle-sockets: stop the GETs after this many seconds (default: no "
                            "limit, only --requests); invalid-bodies: measuring time (default 10)")

    group = parser.add_argument_group("invalid-bodies")
    group.add_argument("--abusers", type=int, default=64,
                       help="clients looping invalid bodies (default 64)")
    group.add_argument("--invalid", choices=["array", "string", "malformed"], default="array",
                       help="array (default) or string: valid JSON the handler rejects; "
                            "malformed: '[' followed by garbage")
    group.add_argument("--warmup", type=float, default=2.0,
                       help="seconds of abuse before measuring (default 2)")
    args = parser.parse_args()

    host, port = parse_url(args.url)
    nofile = raise_nofile()
    if not alive(args.pid):
        sys.exit(f"no process {args.pid}")
    print(f"hostile.py: {args.url} pid {args.pid}, RLIMIT_NOFILE {nofile}", flush=True)

    results = []
    scenarios = (["bodies", "idle-sockets", "invalid-bodies"] if args.scenario == "all"
                 else [args.scenario])
    for name in scenarios:
        if name == "bodies":
            results.append(scenario_bodies(args, host, port))
        elif name == "idle-sockets":
            results.append(scenario_idle_sockets(args, host, port))
        else:
            seconds = args.seconds
            if seconds is None:
                args.seconds = 10.0
            results.append(scenario_invalid_bodies(args, host, port))
            args.seconds = seconds
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results if len(results) > 1 else results[0], out, indent=2, default=str)
            out.write("\n")


if __name__ == "__main__":
    main()
