"""Instructions per call of each TPC-C kind from `callgrind_annotate --inclusive=yes` (stdin).

The calls of each kind are read from the benchmark's own table in its output (argv[1])."""
import re
import sys

CALLS = {}
for line in open(sys.argv[1]):
    m = re.match(r"(new_order|payment|order_status|delivery|stock_level) +([0-9]+) ", line)
    if m and m.group(1) not in CALLS:
        CALLS[m.group(1)] = int(m.group(2))
MIX = {"new_order": 45, "payment": 43, "delivery": 4, "order_status": 4, "stock_level": 4}
per = {}
for line in sys.stdin:
    m = re.match(r" *([0-9,]+) .*owner_turn::owner_turn_([a-z_]+)", line)
    if m:
        kind = m.group(2)
        per[kind] = max(per.get(kind, 0), int(m.group(1).replace(",", "")) / CALLS[kind])
for kind in CALLS:
    print(f"{kind:14} {per[kind]:10.0f}")
writes = ["new_order", "payment", "delivery"]
print("writes weighted", round(sum(per[k] * MIX[k] for k in writes) / 100))
print("all weighted   ", round(sum(per[k] * MIX[k] for k in CALLS) / 100))
