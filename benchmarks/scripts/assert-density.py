#!/usr/bin/env python3
"""Asserts per 1,000 code lines of each crate's src/, as issue 37 counts them.

Asserts: assert!, assert_eq!, assert_ne! and their debug_ forms. Code lines: non-blank lines
that are not // comments, in each file up to its first #[cfg(test)] (tests are not counted).
  python3 benchmarks/scripts/assert-density.py store/src runtime/src lang/src
"""
import os
import re
import sys

for root in sys.argv[1:] or ["store/src", "runtime/src", "lang/src", "serve/src"]:
    code = asserts = 0
    for folder, _, files in os.walk(root):
        for name in files:
            if not name.endswith(".rs"):
                continue
            with open(os.path.join(folder, name)) as f:
                text = f.read().split("#[cfg(test)]")[0]
            code += sum(1 for line in text.split("\n") if line.strip() and not line.strip().startswith("//"))
            asserts += len(re.findall(r"\b(debug_)?assert(_eq|_ne)?!", text))
    print(f"{root}: {asserts} asserts in {code} code lines = {1000 * asserts / code:.2f} per 1,000")
