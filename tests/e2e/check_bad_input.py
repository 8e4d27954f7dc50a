#!/usr/bin/python3
"""hetc refuses bad input with one clear message and a non-zero exit, never a crash.

    /usr/bin/python3 tests/e2e/check_bad_input.py --hetc BUILD/bin/hetc --workdir DIR

Exports the tiny preset, compiles it (--max-batch 4 --max-seq 128), checks that a valid run
succeeds, then that each bad input below makes hetc exit with a code in [1, 127] (not a signal)
and print a message on stderr that mentions the given word:
  prompt longer than --max-seq                  max-seq
  more prompts than --max-batch                 max-batch
  plan file cut to half                         truncated | plan
  one flipped byte inside a weight segment      checksum
  ONNX file cut to half                         onnx
  --target nosuch                               target
  a prompt id >= vocab                          vocab
  --max-batch 64 --max-seq 100000000            available and largest --max-seq (exit 1)
  the same bounds compiled for spr-cpu (a       available (hetc run exits 1; no memory is
  larger machine), then run here                touched)
and that --max-seq auto compiles a plan whose inspect --json shows max_seq > 0 and a memory
section.
"""

import argparse
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import CheckFailed, check_hetc_binary, describe, export, indent, main_wrapper, run  # noqa: E402

MAX_BATCH = 4
MAX_SEQ = 128
TINY_VOCAB = 256


# --- A minimal FlatBuffers reader, enough to find the weight segments of a plan ---------------
# (runtime/format/hplan.fbs: PlanDef field 6 is `segments: [SegmentDef]`, SegmentDef fields are
# offset, size, xxh64, all ulong; segment offsets count from the start of the file. The
# FlatBuffer is either at offset 0 or size-prefixed, with its identifier at [4, 8) or [8, 12).)

PLAN_SEGMENTS_FIELD = 6
SEGMENT_OFFSET_FIELD = 0
SEGMENT_SIZE_FIELD = 1


def _u32(buf, pos):
    return struct.unpack_from("<I", buf, pos)[0]


def _field_pos(buf, table, field):
    """Absolute position of a table field, or None when absent (default value)."""
    vtable = table - struct.unpack_from("<i", buf, table)[0]
    vtable_size = struct.unpack_from("<H", buf, vtable)[0]
    entry = 4 + 2 * field
    if entry + 2 > vtable_size:
        return None
    off = struct.unpack_from("<H", buf, vtable + entry)[0]
    return table + off if off else None


def plan_segments(buf):
    """[(offset, size)] of the plan's weight segments."""
    buf = bytes(buf)
    if len(buf) >= 12 and buf[8:12] == b"HPLN":
        size = _u32(buf, 0)
        buf = buf[4:4 + size]
    elif not (len(buf) >= 8 and buf[4:8] == b"HPLN"):
        raise CheckFailed("the compiled plan does not carry the HPLN identifier")
    root = _u32(buf, 0)
    pos = _field_pos(buf, root, PLAN_SEGMENTS_FIELD)
    if pos is None:
        return []
    vec = pos + _u32(buf, pos)
    count = _u32(buf, vec)
    segments = []
    for i in range(count):
        elem = vec + 4 + 4 * i
        table = elem + _u32(buf, elem)
        off_pos = _field_pos(buf, table, SEGMENT_OFFSET_FIELD)
        size_pos = _field_pos(buf, table, SEGMENT_SIZE_FIELD)
        offset = struct.unpack_from("<Q", buf, off_pos)[0] if off_pos is not None else 0
        size = struct.unpack_from("<Q", buf, size_pos)[0] if size_pos is not None else 0
        segments.append((offset, size))
    return segments


def flip_weight_byte(src, dst):
    with open(src, "rb") as f:
        buf = bytearray(f.read())
    try:
        segments = plan_segments(buf)
    except (struct.error, IndexError) as e:
        raise CheckFailed(f"cannot read the segment table of {src}: {e}")
    segments = [(o, s) for o, s in segments if s > 0 and o + s <= len(buf)]
    if not segments:
        raise CheckFailed(f"{src} has no weight segment inside the file to corrupt")
    offset, size = max(segments, key=lambda seg: seg[1])
    where = offset + size // 2
    buf[where] ^= 0xFF
    with open(dst, "wb") as f:
        f.write(buf)
    return where


def truncate_copy(src, dst):
    with open(src, "rb") as f:
        data = f.read()
    with open(dst, "wb") as f:
        f.write(data[: len(data) // 2])


# --- The checks -----------------------------------------------------------------------------

def expect_refusal(name, cmd, words):
    proc = run(cmd, name, timeout=120, expect_success=False)  # a signal or a hang raises here
    rc = proc.returncode
    if rc == 0:
        raise CheckFailed(f"{name}: hetc exited 0; expected an error\n  command: {describe(cmd)}\n"
                          f"  stdout:\n{indent(proc.stdout)}")
    if rc >= 128:
        raise CheckFailed(f"{name}: exit code {rc} looks like a crash (>= 128)\n"
                          f"  stderr:\n{indent(proc.stderr)}")
    stderr = proc.stderr.strip()
    if not stderr:
        raise CheckFailed(f"{name}: exit code {rc} but nothing on stderr")
    # File names in the command (truncated.hplan, model.onnx) must not satisfy the check by
    # themselves: look for the word in the message with them removed.
    text = stderr
    paths = [str(c) for c in cmd if os.sep in str(c)]
    for path in sorted(paths + [os.path.abspath(p) for p in paths], key=len, reverse=True):
        text = text.replace(path, "<file>")
    for base in sorted({os.path.basename(p) for p in paths}, key=len, reverse=True):
        text = text.replace(base, "<file>")
    if not any(w.lower() in text.lower() for w in words):
        raise CheckFailed(f"{name}: the message does not mention {' or '.join(repr(w) for w in words)}:\n"
                          f"{indent(stderr)}")
    lines = [line for line in stderr.splitlines() if line.strip()]
    note = f" ({len(lines)} lines on stderr)" if len(lines) > 3 else ""
    print(f"ok   {name}: exit {rc}: {lines[0]}{note}", flush=True)


def check(a):
    check_hetc_binary(a.hetc)
    hetc = a.hetc
    work = a.workdir
    os.makedirs(work, exist_ok=True)
    model_dir = os.path.join(work, "tiny")
    onnx_path = export("tiny", model_dir)
    plan = os.path.join(work, "tiny.hplan")
    run([hetc, "compile", onnx_path, "--target", "host", "--max-batch", MAX_BATCH, "--max-seq", MAX_SEQ,
         "-o", plan], "hetc compile of the valid model")

    # Control: the valid plan runs, so the refusals below are about the bad input.
    proc = run([hetc, "run", plan, "--prompt-ids", "5,17,42", "--max-new", "4"], "hetc run of the valid plan")
    print(f"ok   valid run: {proc.stdout.strip()}", flush=True)

    failures = []

    def attempt(name, cmd, words):
        try:
            expect_refusal(name, cmd, words)
        except CheckFailed as e:
            print(f"FAIL {e}", flush=True)
            failures.append(name)

    long_prompt = ",".join(str(i % TINY_VOCAB) for i in range(MAX_SEQ + 72))
    attempt("prompt longer than --max-seq",
            [hetc, "run", plan, "--prompt-ids", long_prompt, "--max-new", "4"], ["max-seq"])

    too_many = []
    for i in range(MAX_BATCH + 1):
        too_many += ["--prompt-ids", f"{i + 1},{i + 2}"]
    attempt("more prompts than --max-batch", [hetc, "run", plan] + too_many + ["--max-new", "4"],
            ["max-batch"])

    truncated_plan = os.path.join(work, "cut.hplan")
    truncate_copy(plan, truncated_plan)
    attempt("truncated plan", [hetc, "run", truncated_plan, "--prompt-ids", "5,17,42", "--max-new", "4"],
            ["truncated", "plan"])

    flipped_plan = os.path.join(work, "flipped.hplan")
    where = flip_weight_byte(plan, flipped_plan)
    print(f"     (flipped the byte at offset {where} of {flipped_plan})", flush=True)
    attempt("flipped weight byte", [hetc, "run", flipped_plan, "--prompt-ids", "5,17,42", "--max-new", "4"],
            ["checksum"])

    bad_onnx_dir = os.path.join(work, "cut_model")
    os.makedirs(bad_onnx_dir, exist_ok=True)
    truncated_onnx = os.path.join(bad_onnx_dir, "model.onnx")
    truncate_copy(onnx_path, truncated_onnx)
    attempt("truncated ONNX file",
            [hetc, "compile", truncated_onnx, "--target", "host", "--max-batch", MAX_BATCH,
             "--max-seq", MAX_SEQ, "-o", os.path.join(work, "from_truncated.hplan")], ["onnx"])

    attempt("unknown target",
            [hetc, "compile", onnx_path, "--target", "nosuch", "--max-batch", MAX_BATCH,
             "--max-seq", MAX_SEQ, "-o", os.path.join(work, "nosuch.hplan")], ["target"])

    attempt("prompt id >= vocab",
            [hetc, "run", plan, "--prompt-ids", f"5,{TINY_VOCAB},7", "--max-new", "4"], ["vocab"])

    too_big = [hetc, "compile", onnx_path, "--target", "host", "--max-batch", "64",
               "--max-seq", "100000000", "-o", os.path.join(work, "too_big.hplan")]
    attempt("plan larger than the available memory", too_big, ["available"])
    proc = run(too_big, "hetc compile of a plan too large", timeout=120, expect_success=False)
    if proc.returncode != 1 or "largest --max-seq" not in proc.stderr:
        print(f"FAIL plan larger than the available memory: exit {proc.returncode}, expected 1 "
              f"and 'largest --max-seq':\n{indent(proc.stderr)}", flush=True)
        failures.append("plan larger than the available memory (message)")
    if os.path.exists(os.path.join(work, "too_big.hplan")):
        print("FAIL plan larger than the available memory: a plan file was written", flush=True)
        failures.append("plan larger than the available memory (file)")

    # The compiler checks memory only for --target host; a plan compiled for a larger machine is
    # checked again by the runtime of the box it runs on (64 x 1e8 positions x 256 B: 1.5 TiB).
    foreign = os.path.join(work, "for_a_larger_machine.hplan")
    run([hetc, "compile", onnx_path, "--target", "spr-cpu", "--max-batch", "64", "--max-seq",
         "100000000", "-o", foreign], "hetc compile for spr-cpu of a plan too large for this host")
    attempt("plan larger than the available memory, at run time",
            [hetc, "run", foreign, "--prompt-ids", "5,17,42", "--max-new", "4"], ["available"])

    # Opsets before 11 are refused; at 11 and 12 a Softmax flattens its input at its axis, which
    # hetc reads only over the last axis.
    import onnx
    old_dir = os.path.join(work, "opset11")
    old_onnx = export("tiny", old_dir, opset=11)
    model = onnx.load(old_onnx)
    model.opset_import[0].version = 10
    opset10 = os.path.join(old_dir, "opset10.onnx")
    onnx.save(model, opset10)
    attempt("opset 10", [hetc, "compile", opset10, "--target", "host", "-o",
                         os.path.join(work, "opset10.hplan")], ["opset 10", "11 to 21"])
    model = onnx.load(old_onnx)
    softmax = next(n for n in model.graph.node if n.op_type == "Softmax")
    for attr in softmax.attribute:
        if attr.name == "axis":
            attr.i = 1
    flattened = os.path.join(old_dir, "softmax_axis1.onnx")
    onnx.save(model, flattened)
    attempt("opset-11 Softmax over axis 1 of [batch, heads, queries, keys]",
            [hetc, "compile", flattened, "--target", "host", "-o",
             os.path.join(work, "softmax_axis1.hplan")], ["Softmax", "axis 1", "last axis"])

    if failures:
        raise CheckFailed(f"{len(failures)} of 11 bad inputs not refused properly: {', '.join(failures)}")
    print("PASS: all 11 bad inputs refused with a clear message and a non-zero exit", flush=True)

    auto_plan = os.path.join(work, "auto.hplan")
    proc = run([hetc, "compile", onnx_path, "--target", "host", "--max-batch", MAX_BATCH,
                "--max-seq", "auto", "-o", auto_plan], "hetc compile --max-seq auto")
    if "--max-seq auto:" not in proc.stderr:
        raise CheckFailed(f"--max-seq auto did not print the chosen value:\n{indent(proc.stderr)}")
    report = json.loads(run([hetc, "inspect", auto_plan, "--json"], "hetc inspect --json").stdout)
    max_seq = report["kv_cache"]["max_seq"]
    memory = report["memory"]
    if max_seq <= 0 or report["bounds"]["max_seq"] != max_seq:
        raise CheckFailed(f"--max-seq auto: max_seq {max_seq}, bounds {report['bounds']}")
    # A BF16 cache takes memory in whole blocks of 16 positions: the largest max_seq that fits is
    # a whole number of them.
    if report["kv_cache"]["dtype"] == "BF16" and max_seq % 16 != 0:
        raise CheckFailed(f"--max-seq auto: max_seq {max_seq} is not a whole number of the BF16 "
                          "cache's 16-position blocks")
    if memory["total_bytes"] != (memory["weight_bytes"] + memory["kv_arena_bytes"]
                                 + memory["activation_arena_bytes"]) or memory["weight_bytes"] <= 0:
        raise CheckFailed(f"inspect memory section: {memory}")
    print(f"ok   --max-seq auto: max_seq {max_seq}, memory {memory}", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hetc", required=True, help="path to the hetc binary")
    p.add_argument("--workdir", required=True)
    a = p.parse_args(argv)
    return main_wrapper(lambda: check(a))


if __name__ == "__main__":
    sys.exit(main())
