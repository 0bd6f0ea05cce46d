#!/usr/bin/env python3
"""Per-call self instructions by function: (script profile - load-only profile) / calls.
Usage: diff.py LOAD.out SCRIPT.out CALLS [inclusive]"""
import re, subprocess, sys
def parse(path, inclusive):
    args = ["callgrind_annotate", "--auto=no", "--threshold=100"]
    if inclusive:
        args.append("--inclusive=yes")
    out = subprocess.run(args + [path], capture_output=True, text=True).stdout
    d = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(.*)", line)
        if m and "PROGRAM TOTALS" not in line:
            name = re.sub(r"\s*\[/.*\]$", "", m.group(2))
            name = re.sub(r"^.*?:", "", name, count=1) if ":" in name.split("::")[0] else name
            d[name] = d.get(name, 0) + int(m.group(1).replace(",", ""))
    return d
inclusive = len(sys.argv) > 4
l, s = parse(sys.argv[1], inclusive), parse(sys.argv[2], inclusive)
calls = int(sys.argv[3])
diff = {k: (s.get(k, 0) - l.get(k, 0)) / calls for k in set(s) | set(l)}
if not inclusive:
    print(f"total per call: {sum(diff.values()):.0f}")
for k, v in sorted(diff.items(), key=lambda x: -x[1])[:60]:
    print(f"{v:9.0f}  {k[:150]}")
