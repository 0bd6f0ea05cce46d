#!/usr/bin/env python3
"""Probes of the kv app's contract against a running server, and a property check of range
paging (forward and reverse, with from/to bounds, limits 1..N) against a sorted list.

Usage: review/kv_probe.py [--serve BIN] [--app apps/kv]
Starts its own pure-serve on a temporary data directory and stops it at the end.
Prints one line per probe: OK or FAIL with what was seen. Exits 1 if any FAIL.
"""
import json, os, random, subprocess, sys, tempfile, urllib.parse, http.client, argparse

ap = argparse.ArgumentParser()
ap.add_argument("--serve", default=os.environ.get("PURE_SERVE", "/work/target-review17/release/pure-serve"))
ap.add_argument("--app", default=os.path.join(os.path.dirname(__file__), "..", "apps", "kv"))
ap.add_argument("--only", default="")
ap.add_argument("--seed", type=int, default=17)
args = ap.parse_args()

data = tempfile.mkdtemp(prefix="kvprobe")
proc = subprocess.Popen([args.serve, args.app, "--data", data, "--listen", "127.0.0.1:0",
                         "--log-capacity", str(8 << 20), "--max-body", str(16 << 20)],
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
line = proc.stdout.readline()
addr = line.split("http://")[1].split()[0].strip().rstrip("/")
host, port = addr.split(":")
conn = http.client.HTTPConnection(host, int(port), timeout=60)

def req(method, path, body=None):
    data = None if body is None else (body if isinstance(body, (bytes, str)) else json.dumps(body))
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data is not None else {})
    r = conn.getresponse()
    raw = r.read()
    try:
        js = json.loads(raw) if raw else None
    except Exception:
        js = raw
    return r.status, js

def q(k):
    return urllib.parse.quote(k, safe="")

fails = 0
def check(name, cond, seen):
    global fails
    if not cond:
        fails += 1
    print(("OK   " if cond else "FAIL ") + name + ("" if cond else f": {seen}"))
    sys.stdout.flush()

def clear():
    while True:
        s, js = req("GET", "/kv?limit=10")
        keys = [e["key"] for e in js["entries"]]
        if not keys:
            return
        for i in range(0, len(keys), 500):
            req("POST", "/kv", {"delete": keys[i:i+500]})

def run(name):
    return not args.only or name in args.only.split(",")

try:
    if run("contract"):
        clear()
        # Keys with characters a path must escape.
        for key in ["a/b", "a?b", "100%", "é", "日本", "a b", "+", "#x", ".", "..", " ", "\u0000x", "k" * 256]:
            s, _ = req("PUT", "/kv/" + q(key), {"value": key})
            s2, js = req("GET", "/kv/" + q(key))
            check(f"key {key!r} round-trips", s == 204 and s2 == 200 and js == {"key": key, "value": key}, (s, s2, js))
        # '+' in a path segment is a plus (not a space).
        s, js = req("GET", "/kv/a+b")
        check("path + is literal (absent key a+b)", s == 404 and js.get("error") == 'no key "a+b"', (s, js))
        # Bad percent-encoding.
        s, js = req("GET", "/kv/%zz")
        check("bad escape %zz is 400", s == 400, (s, js))
        s, js = req("GET", "/kv/%ff")
        check("non-UTF-8 %ff is 400", s == 400, (s, js))
        # Empty key.
        s, js = req("PUT", "/kv/", {"value": "x"})
        check("PUT /kv/ (empty key) not written", s in (400, 404, 405), (s, js))
        s, js = req("GET", "/kv?limit=1000")
        check("no empty key stored", all(e["key"] != "" for e in js["entries"]), js)
        # A value of 65536 bytes of 4-byte characters, and one more.
        s, _ = req("PUT", "/kv/v4", {"value": "😀" * 16384})
        check("value of 65536 bytes in 4-byte chars taken", s == 204, s)
        s, _ = req("PUT", "/kv/v4", {"value": "😀" * 16384 + "a"})
        check("value of 65537 bytes refused", s == 400, s)
        # JSON-escaped key in a batch: counted after JSON decoding.
        s, js = req("POST", "/kv", '{"put": {"' + "\\u00e9" * 128 + '": "x"}}')
        check("batch key of 128 \\u00e9 escapes (256 bytes) taken", s == 200, (s, js))
        s, js = req("POST", "/kv", '{"put": {"' + "\\u00e9" * 128 + 'a": "x"}}')
        check("batch key of 257 bytes via escapes refused", s == 400, (s, js))
        # Duplicate keys in a JSON object.
        s, js = req("POST", "/kv", '{"put": {"dup": "1", "dup": "2"}}')
        s2, js2 = req("GET", "/kv/dup")
        check("duplicate field in put: answered 400 or one entry counted", (s == 400) or (s == 200 and js["put"] == 1), (s, js, js2))
        # Duplicate deletes.
        req("PUT", "/kv/dd", {"value": "x"})
        s, js = req("POST", "/kv", {"delete": ["dd", "dd"]})
        check("delete listing a key twice counts it once", s == 200 and js == {"put": 0, "deleted": 1}, (s, js))
        # Empty batch.
        s, js = req("POST", "/kv", {})
        check("empty batch", s == 200 and js == {"put": 0, "deleted": 0}, (s, js))
        # Batch with null parts.
        s, js = req("POST", "/kv", {"put": None})
        check("put: null is 400 (not a string map)", s == 400, (s, js))
        # Value null.
        s, js = req("PUT", "/kv/n", {"value": None})
        check("value null is 400", s == 400, (s, js))
        # Limit edge forms.
        for lim, want in [("1", 200), ("1000", 200), ("01", 200), ("+1", None), ("1.0", 400), ("abc", 400), ("", 400), ("-1", 400)]:
            s, js = req("GET", "/kv?limit=" + lim)
            if want is not None:
                check(f"limit={lim!r} -> {want}", s == want, (s, js))
            else:
                print(f"INFO limit={lim!r} -> {s}")
        for rv in ["True", "1", "yes", ""]:
            s, js = req("GET", "/kv?reverse=" + rv)
            print(f"INFO reverse={rv!r} -> {s} {js if s != 200 else ''}")
        s, js = req("GET", "/kv?unknown=1")
        print(f"INFO unknown query field -> {s} {js if s != 200 else ''}")
        s, js = req("GET", "/kv?from=a&from=b")
        print(f"INFO duplicate from -> {s} {js if s != 200 else ''}")
        # from > to
        clear()
        for k in "abcdef":
            req("PUT", "/kv/" + k, {"value": k})
        s, js = req("GET", "/kv?from=d&to=b")
        check("from > to: 200 and no entries", s == 200 and js == {"entries": [], "next": None}, (s, js))
        s, js = req("GET", "/kv?from=d&to=b&reverse=true")
        check("from > to reverse: 200 and no entries", s == 200 and js == {"entries": [], "next": None}, (s, js))
        s, js = req("GET", "/kv?from=c&to=c")
        check("from == to: empty", s == 200 and js == {"entries": [], "next": None}, (s, js))
        s, js = req("GET", "/kv?from=&limit=2")
        check("from= (empty) is the start", s == 200 and [e["key"] for e in js["entries"]] == ["a", "b"], (s, js))
        s, js = req("GET", "/kv?from=a+b")
        check("query + decodes to space: from='a b'", s == 200 and [e["key"] for e in js["entries"]][:1] == ["b"], (s, js))
        # Status after reverse paging ends exactly at the limit.
        s, js = req("GET", "/kv?reverse=true&limit=6")
        check("reverse page holding all entries: next null", s == 200 and js["next"] is None and len(js["entries"]) == 6, (s, js))
        s, js = req("GET", "/kv?limit=6")
        check("forward page holding all entries: next null", s == 200 and js["next"] is None, (s, js))

    if run("bigpage"):
        clear()
        big = "v" * 65536
        s, js = req("POST", "/kv", {"put": {f"big{i:02}": big for i in range(15)}})
        check("batch of 15 values of 64 KiB (~983 KB) taken", s == 200, (s, js if not isinstance(js, bytes) else js[:200]))
        s, js = req("POST", "/kv", {"put": {f"big{i:02}": big for i in range(15, 20)}})
        s, js = req("GET", "/kv/big19")
        check("20 values of 64 KiB stored", s == 200, s)
        s, js = req("GET", "/kv?limit=100")
        check("range over 20 values of 64 KiB (1.25 MiB) answered 200 with 20 entries",
              s == 200 and len(js["entries"]) == 20, (s, js if not isinstance(js, dict) or "error" in js else len(js["entries"])))
        s, js = req("POST", "/kv", {"put": {f"b2ig{i:02}": big for i in range(20)}})
        check("batch of 20 values of 64 KiB (1.3 MB, --max-body 16 MiB) taken", s == 200, (s, js))

    if run("paging"):
        rng = random.Random(args.seed)
        alphabet = ["a", "b", "z", "é", "A", "0", "~", "/", "%", " ", "\u00ff", "日", "😀", "\u007f"]
        for trial in range(40):
            clear()
            n = rng.randint(0, 40)
            keys = set()
            while len(keys) < n:
                keys.add("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))))
            keys = sorted(keys, key=lambda k: k.encode())
            if keys:
                s, js = req("POST", "/kv", {"put": {k: "v" + k for k in keys}})
                assert s == 200, (s, js)
            def bound():
                if rng.random() < 0.4:
                    return None
                if keys and rng.random() < 0.5:
                    return rng.choice(keys)
                return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3)))
            for _ in range(6):
                lo, hi = bound(), bound()
                limit = rng.choice([1, 2, 3, 7, 1000])
                want = [k for k in keys if (lo is None or k.encode() >= lo.encode()) and (hi is None or k.encode() < hi.encode())]
                for reverse in (False, True):
                    got, pages = [], 0
                    cur_lo, cur_hi = lo, hi
                    ok = True
                    while True:
                        qs = [("limit", str(limit))]
                        if cur_lo is not None: qs.append(("from", cur_lo))
                        if cur_hi is not None: qs.append(("to", cur_hi))
                        if reverse: qs.append(("reverse", "true"))
                        s, js = req("GET", "/kv?" + urllib.parse.urlencode(qs, quote_via=urllib.parse.quote))
                        if s != 200:
                            ok = False; got = (s, js); break
                        page = [e["key"] for e in js["entries"]]
                        if any(e["value"] != "v" + e["key"] for e in js["entries"]) or len(page) > limit:
                            ok = False; got = js; break
                        got += page
                        pages += 1
                        if js["next"] is None:
                            break
                        if reverse: cur_hi = js["next"]
                        else: cur_lo = js["next"]
                        if pages > 200:
                            ok = False; break
                    expect = list(reversed(want)) if reverse else want
                    if not (ok and got == expect):
                        check(f"paging trial {trial} from={lo!r} to={hi!r} limit={limit} reverse={reverse}", False, (got, expect))
                        break
        check("paging property (40 key sets, forward and reverse)", True, None)
finally:
    proc.terminate()
    proc.wait()
    subprocess.run(["rm", "-rf", data])
sys.exit(1 if fails else 0)
