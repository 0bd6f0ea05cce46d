"""Medians of targets.sh's rounds and the three targets' ratios (Pure's rate over SQLite's)."""
import statistics
import sys
from collections import defaultdict

runs = defaultdict(list)  # (benchmark, threads, engine) -> [micros/op per round]
for line in open(sys.argv[1]):
    words = line.split()
    if len(words) < 7 or words[0] != "round":
        continue
    _, rnd, engine, threads, bench = words[:5]
    runs[(bench, threads, engine)].append((int(rnd), float(words[6])))

def med(key):
    return statistics.median(v for _, v in runs[key])

for key in sorted(runs):
    values = " ".join(f"{v:.3f}" for _, v in sorted(runs[key]))
    print(f"{key[0]:10} {key[1]:>2} thr {key[2]:16} median {med(key):8.3f}  rounds: {values}")

def best_sqlite(bench, threads):
    return min(("sqlite-4k", "sqlite-16k"), key=lambda e: med((bench, threads, e)))

print()
print("Pure's rate over the SQLite setting with the best median: the ratio of the medians; the")
print("median of the rounds' ratios (each round ran every engine once); rounds that reach the target.")
for bench, threads, pure, goal in [
    ("overwrite", "16", "pure-http", 5.0),
    ("overwrite", "16", "pure-in-process", 5.0),
    ("fillbatch", "1", "pure-http", 1.0),
    ("fillbatch", "1", "pure-in-process", 1.0),
    ("readrandom", "1", "pure-in-process", 0.5),
]:
    sqlite = best_sqlite(bench, threads)
    ratio = med((bench, threads, sqlite)) / med((bench, threads, pure))
    # The same ratio round by round (each round ran every engine once).
    per_round = []
    for (r, p), (r2, s) in zip(sorted(runs[(bench, threads, pure)]),
                               sorted(runs[(bench, threads, sqlite)])):
        assert r == r2
        per_round.append(s / p)
    reached = sum(r >= goal for r in per_round)
    print(f"{bench:10} {threads:>2} thr {pure:16} vs {sqlite:10}: {ratio:5.2f}x, "
          f"median of rounds {statistics.median(per_round):5.2f}x "
          f"(rounds {min(per_round):.2f}-{max(per_round):.2f}); "
          f"{reached} of {len(per_round)} rounds >= {goal}x")
