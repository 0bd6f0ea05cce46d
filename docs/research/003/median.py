# Median of runs per configuration: python3 median.py before-*.txt -- after-*.txt
import sys, statistics
def load(files):
    rows = {}
    for f in files:
        for line in open(f):
            c = [x.strip() for x in line.strip().strip('|').split('|')]
            if len(c) == 10 and c[2].isdigit():
                rows.setdefault((c[0], c[1], int(c[2])), []).append((float(c[3]), float(c[4]), float(c[9])))
    return {k: tuple(statistics.median(v[i] for v in vs) for i in range(3)) for k, vs in rows.items()}
args = sys.argv[1:]; cut = args.index('--')
b, a = load(args[:cut]), load(args[cut + 1:])
print("| handler | sync | clients | writes/s before | after | p50 µs before | after | CPU µs/write before | after | CPU change |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for k in sorted(b):
    (tb, pb, cb), (ta, pa, ca) = b[k], a[k]
    print(f"| {k[0]} | {k[1]} | {k[2]} | {tb:.0f} | {ta:.0f} | {pb:.0f} | {pa:.0f} | {cb:.1f} | {ca:.1f} | {100*(ca-cb)/cb:+.0f}% |")
