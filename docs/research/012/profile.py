#!/usr/bin/env python3
"""Reads `perf script` (call graphs) of pure-serve on stdin; prints where the samples went.

Each sample is put in the first category whose test matches, walking its stack from the root
down for the thread's role and from the leaf up for the kind of work:
- owner: the stack holds Owner::run_one (a write handler run under the owner's role), split by
  the innermost frame that names the work: encoding the record, copying a tree node the
  snapshot shares (imbl's clone in make_mut), other map operations (imbl), allocation
  (mimalloc), the handler's own steps (everything else under run_write);
- syncer: the syncer thread (commit, publish, answer, waiting awake), and freeing the nodes
  of the snapshot each publish replaces (the other half of copy-on-write);
- read handlers: App::run_read;
- http and the rest: hyper, tokio, parsing bodies, the kernel's socket work."""
import sys, re, collections

samples = []
stack = []
header = None
for line in sys.stdin:
    line = line.rstrip("\n")
    if not line.strip():
        if header is not None:
            samples.append((header, stack))
        header, stack = None, []
        continue
    if not line.startswith((" ", "\t")):
        header = line
        stack = []
    else:
        parts = line.strip().split(" ", 1)
        stack.append(parts[1] if len(parts) > 1 else parts[0])
if header is not None:
    samples.append((header, stack))

def category(header, frames):
    """The kind of work of one sample; frames are leaf first."""
    text = "\n".join(frames)
    thread = header.split()[0]
    leaf = frames[0] if frames else ""
    if "pure_runtime::owner::" in text:
        # Under the owner's role (on the owner thread or an HTTP thread that took the role).
        if "make_mut" in text:
            return "owner: copying tree nodes shared with the snapshot (imbl make_mut)"
        if "imbl::" in text or "Key as core::cmp::Ord" in text:
            return "owner: map operations (imbl: search, insert)"
        if "record::encode" in text:
            return "owner: encoding the record"
        if "kernel.kallsyms" in leaf:
            return "owner: kernel (page faults of new memory, scheduling)"
        if "mi_" in leaf or "mimalloc" in leaf:
            return "owner: allocation and freeing (mimalloc)"
        if "run_write" in text or "pure_lang::" in text or "rhai::" in text:
            return "owner: handler steps (script values, compiled ops, the script API)"
        return "owner: queue, role and group (outside handlers)"
    if thread.startswith("pure-syncer") or "pure_runtime::syncer" in text:
        if "fdatasync" in text or "sync_data" in text:
            return "syncer: fdatasync"
        if "yield" in text:
            return "syncer: waiting awake (yield)"
        if "drop_in_place" in text or "drop_slow" in text:
            return "syncer: freeing the nodes of the snapshot it replaced"
        if "Building>::take" in text or "building::Building::take" in text:
            return "syncer: taking the group and its snapshot"
        return "syncer: commit, publish, answer"
    if "checkpoint" in text.lower():
        return "checkpoint writer"
    if "run_read" in text:
        return "read handlers (Order-Status, Stock-Level)"
    if "App::request" in text or "pure_lang::body" in text:
        return "http: parsing bodies into script values"
    if "serde_json" in text or "to_json" in text:
        return "http: answers to JSON"
    if "hyper::" in text:
        return "http: hyper"
    if "kernel.kallsyms" in leaf:
        return "http: kernel (sockets, epoll, scheduling)"
    return "http: tokio and the rest"

counts = collections.Counter(category(h, s) for h, s in samples)
threads = collections.Counter(h.split()[0] for h, _ in samples)
total = sum(counts.values())
print(f"{total} samples of pure-serve\n")
print("| where | samples | share |")
print("|---|---|---|")
for name, n in sorted(counts.items(), key=lambda kv: -kv[1]):
    print(f"| {name} | {n} | {100*n/total:.1f}% |")
owner = sum(n for k, n in counts.items() if k.startswith("owner"))
print(f"\nowner's work: {owner} samples, {100*owner/total:.1f}% of the process")
print("\nthreads:", ", ".join(f"{t} {n}" for t, n in threads.most_common()))
# The leaf functions of the owner's samples, for the note.
leaf = collections.Counter()
for h, s in samples:
    if s and category(h, s).startswith("owner"):
        leaf[re.sub(r"\+0x[0-9a-f]+$", "", s[0])] += 1
print("\ntop leaf functions under the owner:\n")
for f, n in leaf.most_common(25):
    print(f"- {100*n/max(owner,1):.1f}% {f[:160]}")
