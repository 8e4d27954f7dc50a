#!/usr/bin/python3
"""Seeded spellings of one Llama (models/exports/spellings.py) through PyTorch, ONNX Runtime and,
optionally, hetc.

    /usr/bin/python3 tests/e2e/exports/check_spellings.py [--seeds 0-29 | --seeds 3 7 12,14]
        [--hetc BUILD/bin [--allow-hetc-refusal]] [--workdir DIR] [--node /usr/bin/node]
        [--batch] [--no-hf-llama] [--set NAME=OPTION ...]

For each seed:
  1. spellings.py export --seed N (model.onnx, config.json with the "spellings", weights.pt);
  2. spellings.py reference: greedy decoding through the spelled module's own forward, each of the
     prompts [5,17,42,7,99,3], [1,2], [200..210] alone, 16 new tokens;
  3. ONNX Runtime (tests/e2e/ort/greedy.mjs --mode single) on model.onnx, compared with (2) by
     compare.py's comparison: tokens equal, logits within --tol (1e-4);
  3b. with --batch, where the mask value is finite: greedy.mjs --mode batch (one left-padded
     batch), compared with (2) the same way (the mask's padding path; -inf gives NaN rows there);
  4. unless --no-hf-llama, hf_llama.py reference on the same directory (the same weights in
     hf_llama's own spelling), compared with (2) the same way: the spelling changes no math;
  5. with --hetc DIR where DIR/hetc exists: hetc compile model.onnx (float32 plan, --max-batch 4
     --max-seq 128, check_hetc.py's compile command), then hetc run of the three prompts as one
     ragged batch with --logits-out (check_hetc.py's run_plan), compared with ONNX Runtime's
     result. A compile that exits 1 with one error line is a refusal: a failure, unless
     --allow-hetc-refusal (then reported, not counted).
Prints one line per seed (seed, kv heads, the spellings' options in spellings.CHOICES order,
torch vs ORT, ORT batch, hf_llama, hetc), the hetc refusals grouped by message (node names elided), and last `N passed, N failed`; exits 1 on any failure. Each seed's
commands and outputs are kept under WORKDIR/seed-N (log.txt).
"""

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
EXPORTS = os.path.join(REPO, "models", "exports")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, EXPORTS)
import check_hetc  # noqa: E402
import compare  # noqa: E402
import spellings  # noqa: E402
from e2e_common import CheckFailed, call_main  # noqa: E402

SPELLINGS = os.path.join(EXPORTS, "spellings.py")
HF_LLAMA = os.path.join(EXPORTS, "hf_llama.py")
FLOAT16_CONVERT = os.path.join(EXPORTS, "float16_convert.py")
GREEDY = os.path.join(os.path.dirname(HERE), "ort", "greedy.mjs")
PROMPTS = check_hetc.PROMPTS  # e2e_common's ragged set, the suite's prompts
MAX_NEW = 16


def parse_seeds(items):
    seeds = []
    for item in items:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            lo, sep, hi = part.partition("-")
            try:
                if sep:
                    seeds.extend(range(int(lo), int(hi) + 1))
                else:
                    seeds.append(int(part))
            except ValueError:
                raise argparse.ArgumentTypeError(f"--seeds takes N, A-B or lists of them, not {part!r}")
    return seeds


class Seed:
    """One seed's run: its directory, its log, the commands it ran."""

    def __init__(self, root, seed):
        self.seed = seed
        self.dir = os.path.join(root, f"seed-{seed}")
        os.makedirs(self.dir, exist_ok=True)
        self.log = open(os.path.join(self.dir, "log.txt"), "w")

    def run(self, cmd, what, timeout=300, expect_success=True):
        cmd = [str(c) for c in cmd]
        self.log.write("$ " + " ".join(cmd) + "\n")
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  errors="replace", timeout=timeout)
        except subprocess.TimeoutExpired:
            raise CheckFailed(f"{what}: no result after {timeout} s")
        self.log.write(proc.stdout + proc.stderr + f"(exit {proc.returncode})\n")
        self.log.flush()
        if expect_success and proc.returncode != 0:
            last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["(no output)"]
            raise CheckFailed(f"{what}: exit {proc.returncode}: {last[0]}")
        return proc

    def call(self, script, argv, what):
        """Runs an exporter's main in this process (e2e_common.call_main), which has torch
        imported already, its output in the log."""
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                out, err = call_main(script, argv, what)
            buf.write(out + err)
        except CheckFailed as e:
            buf.write(f"{e}\n")
            lines = [line for line in str(e).splitlines() if line.strip()]
            raise CheckFailed(f"{lines[0]}: {lines[-1].strip()}") from None
        finally:
            self.log.write(buf.getvalue())
            self.log.flush()

    def path(self, name):
        return os.path.join(self.dir, name)


def prompt_args():
    return check_hetc.prompt_flags()


def versus(reference, candidate, tol, near_tie=0.0):
    """(ok, text) of compare.py's comparison of two result JSONs (a differing token where the
    reference's top-2 gap is within `near_tie` is a near tie, not a difference)."""
    r = compare.compare(compare.load(reference), compare.load(candidate), near_tie)
    diff = r["max_abs_diff"]
    ok = r["tokens_equal"] and diff <= tol  # NaN fails
    ties = [p["first_diff_step"] for p in r["prompts"] if p["near_tie_gap"] is not None]
    if not r["tokens_equal"]:
        steps = [p["first_diff_step"] for p in r["prompts"] if p["first_diff_step"] is not None]
        text = f"tokens DIFFER (from step {min(steps)}), {diff:.2g}"
    elif diff != diff:
        text = "NaN logits"
    else:
        text = f"equal {diff:.1e}"
    if ties and r["tokens_equal"]:
        text += f" (near tie from step {min(ties)})"
    return ok, text


def hetc_check(s, a, onnx_path, ort_json):
    """(status, ok, refusal line or None)."""
    hetc = os.path.join(a.hetc, "hetc")
    plan = s.path("plan.hplan")
    if os.path.exists(plan):
        os.remove(plan)
    proc = s.run(check_hetc.compile_command(hetc, onnx_path, plan), "hetc compile", expect_success=False)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    if proc.returncode == 1 and len(lines) == 1 and not os.path.exists(plan):
        return f"refused: {lines[0]}", a.allow_hetc_refusal, lines[0]
    if proc.returncode != 0:
        tail = lines[-1] if lines else "(no output)"
        return f"compile FAILED (exit {proc.returncode}, {len(lines)} lines): {tail}", False, None
    hetc_json = s.path("hetc.json")
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            check_hetc.run_plan(hetc, plan, MAX_NEW, s.dir, hetc_json)
    except CheckFailed as e:
        s.log.write(buf.getvalue() + str(e) + "\n")
        return f"run FAILED: {str(e).splitlines()[0]}", False, None
    s.log.write(buf.getvalue())
    ok, text = versus(ort_json, hetc_json, a.tol, a.near_tie)
    return (f"compiled+matched ({text})" if ok else f"MISMATCH vs ORT: {text}"), ok, None


def check_seed(a, seed, hetc_available):
    s = Seed(a.workdir, seed)
    t0 = time.time()
    model_dir = s.path("model")
    result = {"seed": seed, "ok": True, "refusal": None}
    try:
        kv, sp = spellings.choose(seed)
        overrides = spellings.parse_overrides(a.set)
        sp.update(overrides)
        result["kv"], result["spellings"] = kv, sp
        set_flags = [f for o in (a.set or []) for f in ("--set", o)]
        s.call(SPELLINGS, ["export", "--seed", seed, "--out", model_dir, *set_flags],
               "spellings.py export")
        with open(os.path.join(model_dir, "config.json")) as f:
            written = json.load(f)["spellings"]
        if written != sp:
            raise CheckFailed(f"config.json's spellings {written} are not the seed's {sp}")
        onnx_path = os.path.join(model_dir, "model.onnx")
        if a.float16:
            s.call(FLOAT16_CONVERT, ["--model", onnx_path, "--out", onnx_path] +
                   (["--keep-io-types"] if a.float16 == "keep-io-types" else []),
                   "float16_convert.py")
        torch_json = s.path("torch.json")
        s.call(SPELLINGS, ["reference", "--model-dir", model_dir, *prompt_args(),
                                "--max-new", MAX_NEW, "--out", torch_json], "spellings.py reference")
        ort_json = s.path("ort.json")
        s.run([a.node, GREEDY, "--model", onnx_path, *prompt_args(), "--max-new", MAX_NEW,
               "--mode", "single", "--out", ort_json], "greedy.mjs")
        ok, text = versus(torch_json, ort_json, a.tol, a.near_tie)
        result["ort"] = text
        result["ok"] &= ok
        if a.batch:
            if sp["mask_value"] == "neg-inf":
                result["batch"] = "skipped (-inf mask: NaN rows with padding)"
            else:
                batch_json = s.path("ort_batch.json")
                s.run([a.node, GREEDY, "--model", onnx_path, *prompt_args(), "--max-new", MAX_NEW,
                       "--mode", "batch", "--out", batch_json], "greedy.mjs --mode batch")
                ok, text = versus(torch_json, batch_json, a.tol, a.near_tie)
                result["batch"] = text
                result["ok"] &= ok
        if not a.no_hf_llama:
            hf_json = s.path("hf_llama.json")
            s.call(HF_LLAMA, ["reference", "--model-dir", model_dir, *prompt_args(),
                                             "--max-new", MAX_NEW, "--out", hf_json],
                   "hf_llama.py reference")
            ok, text = versus(hf_json, torch_json, a.tol)
            result["hf"] = text
            result["ok"] &= ok
        if hetc_available:
            status, ok, refusal = hetc_check(s, a, onnx_path, ort_json)
            result["hetc"], result["refusal"] = status, refusal
            result["ok"] &= ok
    except (CheckFailed, argparse.ArgumentTypeError, ValueError, OSError) as e:
        result["ok"] = False
        result["error"] = str(e).splitlines()[0]
    finally:
        s.log.close()
    result["seconds"] = time.time() - t0
    return result


def refusal_kind(message):
    """The refusal with node names ('/layers.0/Concat_3') elided, to group seeds by cause."""
    return re.sub(r"'/[^']*'", "'…'", message)


def line(r):
    parts = [f"{'PASS' if r['ok'] else 'FAIL'} seed {r['seed']}"]
    if "kv" in r:
        parts.append(f"kv={r['kv']} [{' '.join(r['spellings'].values())}]")
    if "ort" in r:
        parts.append(f"torch-vs-ORT: {r['ort']}")
    if "batch" in r:
        parts.append(f"ORT-batch: {r['batch']}")
    if "hf" in r:
        parts.append(f"hf_llama: {r['hf']}")
    if "hetc" in r:
        parts.append(f"hetc: {r['hetc']}")
    if "error" in r:
        parts.append(f"ERROR: {r['error']}")
    parts.append(f"({r['seconds']:.1f} s)")
    return " | ".join(parts)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", nargs="+", default=["0-29"], metavar="N|A-B",
                   help="seeds: N, A-B, comma lists (default 0-29)")
    p.add_argument("--hetc", metavar="HETC|BUILD_BIN_DIR",
                   help="also compile and run with this hetc (or BUILD_BIN_DIR/hetc)")
    p.add_argument("--min-compiled", type=int, default=0, metavar="N",
                   help="fail unless hetc compiles (and matches) at least N seeds")
    p.add_argument("--allow-hetc-refusal", action="store_true",
                   help="a hetc refusal (exit 1, one error line) is reported, not a failure")
    p.add_argument("--workdir", help="keep models, results and logs here (default: a temporary directory)")
    p.add_argument("--node", default="/usr/bin/node")
    p.add_argument("--tol", type=float, default=1e-4, help="max |logit difference|")
    p.add_argument("--batch", action="store_true",
                   help="also ONNX Runtime with the prompts as one left-padded batch (--mode batch), "
                        "against the PyTorch reference prompt by prompt; skipped for -inf masks")
    p.add_argument("--no-hf-llama", action="store_true",
                   help="skip the comparison with hf_llama.py's reference of the same weights")
    p.add_argument("--near-tie", type=float, default=0.0, metavar="GAP",
                   help="a differing token where the reference's top-2 gap is <= GAP is a near "
                        "tie, not a difference (float16 files: 1e-2)")
    p.add_argument("--float16", choices=["all", "keep-io-types"],
                   help="convert each export to float16 as onnxconverter-common does before "
                        "ONNX Runtime and hetc read it (PyTorch stays float32: use --tol 1e-2)")
    p.add_argument("--set", action="append", metavar="NAME=OPTION",
                   help="override one spelling in every seed (spellings.py export --set)")
    a = p.parse_args(argv)
    try:
        seeds = parse_seeds(a.seeds)
        spellings.parse_overrides(a.set)
    except argparse.ArgumentTypeError as e:
        p.error(str(e))
    if not os.path.isdir(os.path.join(os.path.dirname(GREEDY), "node_modules", "onnxruntime-node")):
        print(f"check_spellings.py: onnxruntime-node is not installed: cd {os.path.dirname(GREEDY)} && "
              f"npm ci --ignore-scripts", file=sys.stderr)
        return 2
    hetc_available = False
    if a.hetc:
        hetc = a.hetc if os.path.isfile(a.hetc) else os.path.join(a.hetc, "hetc")
        a.hetc = os.path.dirname(os.path.abspath(hetc))
        hetc_available = os.path.isfile(hetc) and os.access(hetc, os.X_OK)
        if not hetc_available:
            print(f"note: {hetc} does not exist: hetc not run")
    a.workdir = a.workdir or tempfile.mkdtemp(prefix="spellings-")
    os.makedirs(a.workdir, exist_ok=True)
    print("spellings, in order: " + " ".join(spellings.CHOICES) + " (spellings.py describe --list)", flush=True)
    results = []
    for seed in seeds:
        r = check_seed(a, seed, hetc_available)
        results.append(r)
        print(line(r), flush=True)
    failed = sum(not r["ok"] for r in results)
    refusals = {}
    for r in results:
        if r["refusal"]:
            refusals.setdefault(refusal_kind(r["refusal"]), []).append(r["seed"])
    if refusals:
        print(f"\nhetc refusals ({sum(len(v) for v in refusals.values())} seeds, "
              f"{'not counted' if a.allow_hetc_refusal else 'counted'} as failures), "
              f"by message with node names as '…':")
        for message, which in sorted(refusals.items(), key=lambda kv: kv[1]):
            print(f"  {len(which)} seeds ({','.join(map(str, which))}): {message}")
    print(f"models, results and logs in {a.workdir}")
    if hetc_available:
        compiled = sum(r["ok"] and not r["refusal"] and "hetc" in r for r in results)
        print(f"hetc compiled and matched {compiled} of {len(results)} seeds"
              f" (at least {a.min_compiled} required)")
        if compiled < a.min_compiled:
            failed += 1
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
