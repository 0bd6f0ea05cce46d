#!/usr/bin/env python3
"""Makes each mistake on a copy of the todo app and prints what pure-serve says.

usage: python3 docs/research/014/mistakes.py target/release/pure-serve
"""
import json, os, re, shutil, subprocess, sys, tempfile, time, urllib.request, signal

BIN = sys.argv[1]
APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "todo")

def variant(script=None, manifest=None):
    d = tempfile.mkdtemp()
    shutil.copytree(APP, d, dirs_exist_ok=True)
    shutil.rmtree(os.path.join(d, "data"), ignore_errors=True)
    if script:
        s = open(os.path.join(d, "todo.rhai")).read()
        s = script(s)
        open(os.path.join(d, "todo.rhai"), "w").write(s)
    if manifest:
        m = json.load(open(os.path.join(d, "app.json")))
        manifest(m)
        json.dump(m, open(os.path.join(d, "app.json"), "w"), indent=2)
    return d

def load(name, **kw):
    d = variant(**kw)
    p = subprocess.run([BIN, d, "--listen", "127.0.0.1:0", "--data", d + "/data"], capture_output=True, text=True, timeout=30)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    print(f"### {name}\nexit {p.returncode}: {lines[-1] if lines else ''}\n")

def serve(d, flags=()):
    p = subprocess.Popen([BIN, d, "--listen", "127.0.0.1:0", "--data", d + "/data", *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    addr = re.search(r"http://(\S+)", line).group(1)
    return p, addr

def call(addr, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://{addr}{path}", data=data, method=method)
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()

def sub(a, b):
    return lambda s: s.replace(a, b, 1)

load("a table the manifest does not declare", script=sub("let row = todos.get(request.params.id);", "let row = todo.get(request.params.id);"))
load("a function no script defines", script=sub("let id = next_id();", "let id = next_idd();"))
load("a top-level constant used in a function", script=lambda s: "const MAX = 100;\n" + s.replace("find(if request.query.done { 1 } else { 0 }, 100)", "find(if request.query.done { 1 } else { 0 }, MAX)"))
load("a handler with two parameters", script=sub("fn get_one(request) {", "fn get_one(request, extra) {"))
load("a wrong arity", script=sub("as_json(todos.get(id))", "as_json(todos.get(id), 1)"))
load("a missing ;", script=sub("let id = next_id();", "let id = next_id()"))
load("an unclosed {", script=sub("if row == () { throw #{ status: 404, error: `no todo ${request.params.id}` }; }\n    as_json(row)", "if row == () { throw #{ status: 404, error: `no todo ${request.params.id}` };\n    as_json(row)"))
load("\"table\" for \"tables\"", manifest=lambda m: m.__setitem__("table", m.pop("tables")))
load("two routes of one shape", manifest=lambda m: m["routes"].update({"GET /todos/{n:int}": "get_one"}))
load("a table named request", manifest=lambda m: m["tables"].__setitem__("request", ["x"]))
load("{*rest}", manifest=lambda m: m["routes"].update({"GET /files/{*rest}": "get_one"}))
load("x{p}", manifest=lambda m: m["routes"].update({"GET /files/x{p}": "get_one"}))
load("{}", manifest=lambda m: m["routes"].update({"GET /files/{}": "get_one"}))

# At run time: a limit, and the notice of a handler left to Rhai's evaluator.
d = variant(script=lambda s: s + "\nfn spin(request) {\n    let n = 0;\n    loop {\n        n += 1;\n    }\n}\n\nfn maybe(request) {\n    let row = todos.get(1);\n    #{ title: row?.title }\n}\n",
            manifest=lambda m: m["routes"].update({"POST /spin": "spin", "GET /maybe": "maybe"}))
p, addr = serve(d)
status, body = call(addr, "POST", "/spin", {})
print(f"### a limit\n{status} {body}\n")
p.send_signal(signal.SIGTERM)
_, err = p.communicate(timeout=30)
print("### the evaluator notice\n" + "\n".join(l for l in err.splitlines() if "evaluator" in l) + "\n")

# A reload with a mistake, then a good one.
d = variant()
p, addr = serve(d)
s = open(d + "/todo.rhai").read()
open(d + "/todo.rhai", "w").write(s.replace("let row = todos.get(request.params.id);", "let row = todo.get(request.params.id);", 1))
p.send_signal(signal.SIGHUP)
time.sleep(1)
status, body = call(addr, "POST", "/todos", {"title": "still served"})
open(d + "/todo.rhai", "w").write(s)
p.send_signal(signal.SIGHUP)
time.sleep(1)
p.send_signal(signal.SIGTERM)
_, err = p.communicate(timeout=30)
print("### a reload with a mistake, then a good one\n" + "\n".join(l for l in err.splitlines() if "reload" in l) + f"\n(between them: POST /todos answered {status})\n")

load("a table method called the wrong way", script=sub("    row.done = 1;\n    todos.update(row);\n    as_json(row)", "    todos.update(request.params.id, #{ done: 1 });\n    as_json(todos.get(request.params.id))"))
load("an index the table does not declare", script=sub("todos.by_done.find(", "todos.by_state.find("))
