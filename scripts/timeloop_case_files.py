"""Write each case of tests/data/timeloop_cases.yaml as Timeloop input files (v0.3 tree
architecture, problem, mapping, ERT) under tests/data/timeloop_format/cases/<id>/.

The cases record what Timeloop was given (problem, flattened architecture with per-action
energies, the mapping directives) and what it reported; these files put the given part back in
Timeloop's own formats so the import path can be checked against the reported part
(tests/test_timeloop_import.py). Run from the checkout root: python3 scripts/timeloop_case_files.py
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "data" / "timeloop_cases.yaml"
OUT = ROOT / "tests" / "data" / "timeloop_format" / "cases"
ATTRIBUTES = ("depth", "width", "datawidth", "multiple_buffering", "cluster_size", "n_banks",
              "reduction_supported", "meshX")


def arch_file(case: dict) -> dict:
    """Components of one instance at the top; the replicated ones inside a PE[0..N-1] subtree."""
    top, pes, count = [], [], 1
    for comp in case["architecture"]:
        attrs = {k: comp[k] for k in ATTRIBUTES if k in comp}
        if comp["class"] == "dummy_storage":
            attrs = {"depth": 1, "width": 1, "datawidth": 1}
        entry = {"name": comp["name"], "class": comp["class"], "attributes": attrs}
        if comp["instances"] == 1 and not pes:
            top.append(entry)
        else:
            count = comp["instances"]
            pes.append(entry)
    node = {"name": "system", "attributes": {"global_cycle_seconds": 1e-9}, "local": top}
    if pes:
        node["subtree"] = [{"name": f"PE[0..{count - 1}]", "local": pes}]
    return {"architecture": {"version": 0.3, "subtree": [node]}}


def ert_file(case: dict) -> dict:
    tables = []
    for comp in case["architecture"]:
        actions = comp.get("ert_pJ_per_vector_action")
        if actions:
            tables.append({"name": f"system.{comp['name']}[1..{comp['instances']}]",
                           "actions": [{"name": k, "energy": v} for k, v in actions.items()]})
    return {"ERT": {"version": "0.3", "tables": tables}}


def problem_file(case: dict) -> dict:
    p = case["problem"]
    spaces = []
    for s in p["data_spaces"]:
        projection = [[[term.strip()] for term in re.split(r"\+", index)] for index in s["index"]]
        space = {"name": s["name"], "projection": projection}
        if s["read_write"]:
            space["read_write"] = True
        spaces.append(space)
    return {"problem": {"shape": {"name": p["name"], "dimensions": list(p["dimensions"]),
                                  "data_spaces": spaces},
                        "instance": dict(p["instance"])}}


def main() -> None:
    cases = yaml.safe_load(CASES.read_text())["cases"]
    for case in cases:
        folder = OUT / case["id"]
        folder.mkdir(parents=True, exist_ok=True)
        note = f"# Timeloop input for case {case['id']} of tests/data/timeloop_cases.yaml " \
               "(written by scripts/timeloop_case_files.py)\n"
        for name, data in (("arch.yaml", arch_file(case)), ("problem.yaml", problem_file(case)),
                           ("map.yaml", {"mapping": case["mapping_input"]}),
                           ("ERT.yaml", ert_file(case))):
            (folder / name).write_text(note + yaml.safe_dump(data, sort_keys=False))
        print(folder)


if __name__ == "__main__":
    main()
