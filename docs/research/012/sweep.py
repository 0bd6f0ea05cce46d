#!/usr/bin/env python3
"""Summarizes the sweep's JSON files: per engine and point, the median transactions/s of its
runs, their range, the New-Order p99 (median) and bytes to the device per transaction; the
best point by the criteria (highest median; within 3% of it, the lower New-Order p99)."""
import json, statistics, sys, pathlib, collections

folder = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent / "sweep")
runs = collections.defaultdict(list)
for path in sorted(folder.glob("*.json")):
    engine, rest = ("sqlite-grouped", path.stem[len("sqlite-grouped-"):]) if path.stem.startswith("sqlite-grouped-") else ("sqlite", path.stem[len("sqlite-"):])
    point = rest.rsplit("-", 1)[0]
    runs[(engine, point)].append(json.loads(path.read_text()))

for engine in ["sqlite", "sqlite-grouped"]:
    rows = []
    for (e, point), rs in runs.items():
        if e != engine:
            continue
        tps = [r["tx_per_s"] for r in rs]
        p99 = statistics.median(r["types"]["new_order"]["p99_ms"] for r in rs)
        dev = [r["device_bytes_per_tx"] for r in rs if r["device_bytes_per_tx"] is not None]
        ok = all(r["consistency_ok"] for r in rs)
        rows.append((statistics.median(tps), min(tps), max(tps), p99, statistics.median(dev) if dev else None, point, len(rs), ok))
    rows.sort(reverse=True)
    print(f"\n### {engine}\n")
    print("| point | runs | tx/s median | range | New-Order p99 ms | device B/tx | consistent |")
    print("|---|---|---|---|---|---|---|")
    for m, lo, hi, p99, dev, point, n, ok in rows:
        print(f"| {point} | {n} | {m:.0f} | {lo:.0f}–{hi:.0f} | {p99:.2f} | {'–' if dev is None else f'{dev:.0f}'} | {ok} |")
    if rows:
        top = rows[0][0]
        tied = [r for r in rows if r[0] >= 0.97 * top]
        best = min(tied, key=lambda r: r[3])
        print(f"\nbest: {best[5]} ({best[0]:.0f} tx/s; tied within 3%: {', '.join(r[5] for r in tied)})")
