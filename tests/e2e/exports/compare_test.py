#!/usr/bin/python3
"""compare.py on synthetic results: equal tokens pass, a differing token fails, and with
--near-tie a differing token passes only where the reference's own top-2 gap is within it.

    /usr/bin/python3 tests/e2e/exports/compare_test.py
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def result(tokens, logits):
    return {"prompts": [[1, 2]], "max_new": len(tokens), "tokens": [tokens], "logits": [logits]}


def run(ref, cand, *flags):
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for name, doc in (("ref", ref), ("cand", cand)):
            paths.append(os.path.join(d, name + ".json"))
            with open(paths[-1], "w") as f:
                json.dump(doc, f)
        proc = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), *paths, *flags],
                              capture_output=True, text=True)
        return proc.returncode, proc.stdout


def main():
    # Step 1's reference row: top-2 gap 0.004 (a near tie), or 0.5.
    tight = [[0.0, 1.0, 0.2], [0.3, 0.996, 1.0]]
    wide = [[0.0, 1.0, 0.2], [0.3, 0.5, 1.0]]
    cases = [
        ("equal tokens", result([1, 2], tight), result([1, 2], tight), [], 0),
        ("a differing token", result([1, 2], tight), result([1, 1], tight), [], 1),
        ("a near tie within --near-tie", result([1, 2], tight), result([1, 1], tight),
         ["--near-tie", "1e-2"], 0),
        ("a difference outside --near-tie", result([1, 2], wide), result([1, 1], wide),
         ["--near-tie", "1e-2"], 1),
    ]
    failed = 0
    for name, ref, cand, flags, want in cases:
        rc, out = run(ref, cand, *flags)
        ok = rc == want and (want == 1 or "PASS" in out)
        if "within" in name and "near tie at step 1" not in out:
            ok = False
        print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {rc} (expected {want})")
        failed += not ok
    print("PASS" if not failed else f"FAIL: {failed} cases")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
