# Before runs' range and after runs' median per configuration: python3 spread.py before-*.txt -- after-*.txt
import sys, statistics
def load(files):
    rows = {}
    for f in files:
        for line in open(f):
            c = [x.strip() for x in line.strip().strip('|').split('|')]
            if len(c) == 10 and c[2].isdigit():
                rows.setdefault((c[0], c[1], int(c[2])), []).append(float(c[3]))
    return rows
args = sys.argv[1:]; cut = args.index('--')
b, a = load(args[:cut]), load(args[cut + 1:])
print("| handler | sync | clients | writes/s before (min–max) | after (min–max) | after median vs before min |")
print("|---|---|---:|---|---|---:|")
for k in sorted(b):
    bm, am = statistics.median(a[k]), min(b[k])
    print(f"| {k[0]} | {k[1]} | {k[2]} | {min(b[k]):.0f}–{max(b[k]):.0f} | {min(a[k]):.0f}–{max(a[k]):.0f} | {100*(bm-am)/am:+.0f}% |")
