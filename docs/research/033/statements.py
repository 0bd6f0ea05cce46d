"""What one statement of New-Order's line loop costs the owner, in instructions.

Each statement is written twice in a copy of the TPC-C app; callgrind counts the owner's
New-Order calls (3,000 transactions of the mix) with and without the copy, and the difference
divided by the lines (about 10 an order) is the statement's cost. The population and the
transaction stream are the same in every run; the allocator's and the tree's state are not
quite, so a difference of about 100 instructions a line is noise.

    python3 docs/research/033/statements.py [PURE_BENCH] [OUT]
"""
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/pure-bench")
OUT = sys.argv[2] if len(sys.argv) > 2 else "/tmp/pure-033-statements"
SOURCE = open(os.path.join(ROOT, "apps/tpcc/tpcc.rhai")).read()

# The statement written twice (None: the app as it is).
STATEMENTS = {
    "base": None,
    "idx": "let i_id = i_ids[n];",
    "get_item": "let item_row = item.get(i_id);",
    "if_unit": "if item_row == () {",
    "field_read": "let on_hand = stock_row.s_quantity;",
    "left_if": "let left = if on_hand >= quantity + 10 { on_hand - quantity } else { on_hand - quantity + 91 };",
    "opassign": "stock_row.s_ytd += quantity;",
    "set_field": "stock_row.s_quantity = left;",
    "mul": "let amount = quantity * price;",
    "sum": "sum += amount;",
    "brand": 'let brand = if item_row.i_data.contains("ORIGINAL") && stock_row.s_data.contains("ORIGINAL") { "B" } else { "G" };',
    "save": "stock_row.save();",
    "if_ne": "if supply != w_id {\n            stock_row.s_remote_cnt += 1;\n        }",
}


def app(name):
    statement = STATEMENTS[name]
    script = SOURCE
    if statement == "if item_row == () {":
        script = script.replace(
            "        if item_row == () {\n", '        if item_row == () { not_found("x"); }\n        if item_row == () {\n', 1
        )
    elif statement:
        assert statement in script, statement
        script = script.replace(statement, statement + "\n        " + statement, 1)
    directory = os.path.join(OUT, name)
    os.makedirs(directory, exist_ok=True)
    shutil.copy(os.path.join(ROOT, "apps/tpcc/app.json"), directory)
    open(os.path.join(directory, "tpcc.rhai"), "w").write(script)
    return directory


def run(name):
    directory = app(name)
    log = os.path.join(OUT, name + ".txt")
    subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + os.path.join(OUT, name + ".cg"),
         "--toggle-collect=*owner_turn_new_order*", BENCH, "owner", "--only", "tpcc",
         "--transactions", "3000", "--tpcc-app", directory],
        stdout=open(log, "w"), stderr=subprocess.STDOUT, cwd=ROOT, check=False)
    text = open(log).read()
    calls = int(re.search(r"new_order +([0-9]+) ", text).group(1))
    collected = int(re.search(r"Collected : ([0-9]+)", text).group(1))
    fallbacks = re.search(r"fallbacks to Rhai.s evaluator: ([0-9]+)", text).group(1)
    return name, collected / calls, fallbacks


with ThreadPoolExecutor(2) as pool:
    results = list(pool.map(run, STATEMENTS))
base = results[0][1]
for name, per_call, fallbacks in results:
    print(f"{name:12} {per_call:10.0f} a New-Order, {(per_call - base) / 10:7.0f} a line; "
          f"fallbacks {fallbacks}")
