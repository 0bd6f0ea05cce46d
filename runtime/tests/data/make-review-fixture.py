#!/usr/bin/env python3
"""Writes a data directory of the review test app (runtime/tests/apps/review) with a given
pure-serve build, for the test that a newer build opens what an older one wrote
(runtime/tests/it/compat.rs).

    make-review-fixture.py PURE_SERVE OUT_DIR

OUT_DIR/data is the data directory (checkpoints and a log with records after the last one);
OUT_DIR/dump.json is what GET /dump answered before the server stopped. The operations are
deterministic: every kind of stored value (negative and extreme integers, floats, strings with
NUL bytes and non-ASCII characters, arrays, nested maps, booleans, unit), integer, string and
pair keys, whole-row puts, field patches and deletes.
"""
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys

binary, out = sys.argv[1], sys.argv[2]
app = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apps", "review")
data = os.path.join(out, "data")
shutil.rmtree(out, ignore_errors=True)
os.makedirs(out)
server = subprocess.Popen(
    [binary, app, "--data", data, "--listen", "127.0.0.1:0", "--log-capacity", str(1 << 20),
     "--checkpoint-interval", str(24 << 10)],
    stdout=subprocess.PIPE, text=True)
line = server.stdout.readline()
address = line.split("http://")[1].strip()
host, port = address.rsplit(":", 1)
conn = http.client.HTTPConnection(host, int(port))

rng = random.Random(14)
strings = ["", "a", "\u0000", "a\u0000b", "héllo", "ключ", "x" * 40, "player-0000000042"]

def value(depth=0):
    kind = rng.randrange(9 if depth < 2 else 6)
    if kind == 0: return None
    if kind == 1: return rng.choice([True, False])
    if kind == 2: return rng.choice([0, -1, 1, 255, 256, -256, 2**63 - 1, -2**63, rng.randrange(-10**6, 10**6)])
    if kind == 3: return rng.choice([0.5, -2.25, 1e300, -1e-300, 3.0])
    if kind in (4, 5): return rng.choice(strings)
    if kind == 6: return [value(depth + 1) for _ in range(rng.randrange(4))]
    if kind == 7: return {rng.choice(["k", "é", "z"]): value(depth + 1) for _ in range(rng.randrange(3))}
    return rng.choice(strings) + str(rng.randrange(100))

def key(table):
    part = lambda: rng.choice([rng.randrange(-50, 50), rng.choice(strings), 2**62])
    return [part()] if table == "kv" else [part(), part()]

def row(table):
    fields = ["a", "b", "c"] if table == "kv" else ["x", "y"]
    return {f: value() for f in fields if rng.random() < 0.8}

def op():
    table = rng.choice(["kv", "pairs"])
    kind = rng.choice(["put", "put", "set", "set", "del"])
    k = key(table)
    if kind == "put":
        return ["put", table, k, row(table)]
    if kind == "set":
        field = rng.choice(["a", "b", "c"] if table == "kv" else ["x", "y"])
        return ["set", table, k, field, value()]
    return ["del", table, k]

def call(method, path, body=None):
    payload = json.dumps(body) if body is not None else None
    headers = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, payload, headers)
    answer = conn.getresponse()
    text = answer.read()
    if answer.status != 200:
        raise SystemExit(f"{method} {path}: {answer.status} {text!r}")
    return json.loads(text)

for _ in range(400):
    call("POST", "/apply", {"ops": [op() for _ in range(12)], "fail": False})
dump = call("GET", "/dump")
with open(os.path.join(out, "dump.json"), "w") as f:
    json.dump(dump, f, ensure_ascii=False, indent=0, sort_keys=True)
server.send_signal(signal.SIGTERM)
if server.wait() != 0:
    raise SystemExit("pure-serve did not stop cleanly")
print(f"{len(dump)} rows; files:", sorted(os.listdir(data)))
