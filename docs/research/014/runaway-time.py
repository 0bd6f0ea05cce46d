# usage: python3 docs/research/014/runaway-time.py OLD_PURE_SERVE NEW_PURE_SERVE
import os, subprocess, re, time, urllib.request, json, sys, statistics, tempfile
def run(bin, path, n=7):
    d = tempfile.mkdtemp()
    p = subprocess.Popen([bin, os.path.join(os.path.dirname(os.path.abspath(__file__)), "spin"), "--data", d, "--listen", "127.0.0.1:0", "--sync", "none"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    addr = re.search(r"http://(\S+)", p.stdout.readline()).group(1)
    times = []; body = None
    for _ in range(n):
        t = time.perf_counter()
        req = urllib.request.Request(f"http://{addr}{path}", data=b"{}", method="POST")
        try: urllib.request.urlopen(req)
        except urllib.error.HTTPError as e: body = e.read().decode()
        times.append((time.perf_counter() - t) * 1000)
    p.terminate(); p.wait()
    return statistics.median(times), body
for path in ["/spin", "/slow"]:
    for name, bin in [("old", sys.argv[1]), ("new", sys.argv[2])]:
        ms, body = run(bin, path)
        print(f"{path} {name}: median {ms:.0f} ms  {body}")
