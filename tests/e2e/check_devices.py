#!/usr/bin/python3
"""A plan compiled for a GPU target runs on this machine's CPU, says so, and matches the host plan.

    /usr/bin/python3 tests/e2e/check_devices.py --hetc BUILD/bin/hetc --preset tiny --workdir DIR

1. exports the preset (seed 0) and compiles it three times with float32 weights and the same
   bounds (--max-batch 4 --max-seq 128): for --target host, for --target spr-h100 (the cost model
   keeps both layers in GPU memory and gives the GPU most sublayers) and for --target spr-a100
   --no-resident (every layer streamed: at these sizes all of decode and this prefill stay on the
   CPU);
2. hetc inspect --json of each: the spr-h100 plan names its target and GPU, carries a prefill and a
   decode stage plan with groups covering every layer and a policy table over batches 1..4, and
   every op of a layer runs where its group's policy puts the first cost sublayer it computes
   (derived here from the policy, not taken from the plan), every op outside the layers (the
   embedding, the final norm, lm_head) on the CPU. So the spr-h100 plan differs from the host
   plan where it should: GPU ops in both stages, and some op placed differently in decode and in
   prefill (the two stages' policies differ); every weight a layer op reads is in the GPU tier
   and the others are not. The host plan and the streamed spr-a100 plan put no op and no weight on
   the GPU;
3. hetc run on the ragged batch, --logits-out: the spr-h100 run prints exactly one notice that it
   runs its GPU sublayers on the CPU (saying whether this host has a GPU: /dev/nvidia0) with the
   plan's counts of GPU sublayers (the same notice as hetc inspect --json), the others none; the
   generated ids are identical and the logits bit for bit equal to the host plan's (every op runs
   on the CPU whatever the plan says: this is the statement that the fallback computes the same);
4. hetc run --verbose and hetc bench --json report the devices: the plan's target, its GPU sublayer
   and op counts per stage as derived in 2, the policies the stage tables give the batch and
   length of the run, and where the ops ran (the CPU); the host and streamed plans' --verbose say
   every op is on the CPU;
5. --device: the spr-h100 plan run on the software device (--device sim: every op launched there,
   through one captured graph per row bucket) generates the host plan's ids with logits within
   1e-4 of the largest (the bits are the CPU's portable kernels', which this host replaces with
   AVX-512 ones on the CPU), prints no fallback notice, and is refused --session; --device cuda
   fails in one line, saying why (here: no GPU; on a GPU machine: the first kernel it lacks).
"""

import argparse
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_against_torch import parse_token_lines  # noqa: E402
from e2e_common import (PROMPTS, CheckFailed, check_hetc_binary, export, indent,  # noqa: E402
                        main_wrapper, prompt_arg, run)

MAX_NEW = 8
BOUNDS = ["--max-batch", "4", "--max-seq", "128", "--weights", "f32"]
NOTICE = "hetc: notice:"
SUBLAYERS = ["qkv", "qk", "sv", "out", "fc1", "fc2"]


def inspect_json(hetc, plan):
    proc = run([hetc, "inspect", "--json", plan], "hetc inspect --json")
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise CheckFailed(f"hetc inspect --json {plan} printed no JSON: {e}")


def check_device_plan(inspected, layers, max_batch):
    """The stage plans are complete and the ops follow them; returns per stage the GPU op count
    and, from the groups' policies alone, the GPU sublayers and all sublayers (a policy bit of 1
    is the CPU)."""
    stages = {s["stage"]: s for s in inspected["stages"]}
    if set(stages) != {"Prefill", "Decode"}:
        raise CheckFailed(f"expected a Prefill and a Decode stage plan, got {sorted(stages)}")
    counts = {}
    for name, stage in stages.items():
        covered = 0
        sublayers = gpu_sublayers = 0
        for group in stage["groups"]:
            if group["first_layer"] != covered:
                raise CheckFailed(f"{name} group {group['name']} starts at layer {group['first_layer']}")
            if len(group["policy"]) != len(SUBLAYERS) or set(group["policy"]) - {0, 1}:
                raise CheckFailed(f"{name} group {group['name']} has policy {group['policy']}")
            covered += group["layers"]
            sublayers += group["layers"] * len(SUBLAYERS)
            gpu_sublayers += group["layers"] * group["policy"].count(0)
        if covered != layers:
            raise CheckFailed(f"{name} groups cover {covered} of {layers} layers")
        for row in stage["policy_table"]:
            ranges = row["ranges"]
            if ranges[0]["first_batch"] != 1 or ranges[-1]["last_batch"] != max_batch:
                raise CheckFailed(f"{name} policy table row len {row['len']} does not cover batches "
                                  f"1..{max_batch}")
        if not stage["reason"].startswith(name.lower() + " on "):
            raise CheckFailed(f"{name} reason: {stage['reason']!r}")
        key = "device" if name == "Decode" else "prefill_device"
        gpu_ops = 0
        for op in inspected["ops"]:
            gpu_ops += op[key] == "GPU"
            if op["layer"] < 0:
                # The embedding, the final norm and lm_head: the cost model does not time them and
                # the compiler keeps them on the CPU (hetc-assign-devices).
                if op[key] != "CPU":
                    raise CheckFailed(f"op {op['index']} ({op['name']}) outside the layers runs on "
                                      f"the {op[key]} in {name}; expected the CPU")
                continue
            group = next(g for g in stage["groups"]
                         if g["first_layer"] <= op["layer"] < g["first_layer"] + g["layers"])
            first = op["cost_sublayers"].split("+")[0]
            expected = "CPU" if group["policy"][SUBLAYERS.index(first)] == 1 else "GPU"
            if op[key] != expected:
                raise CheckFailed(f"op {op['index']} ({op['name']}) runs on the {op[key]} in {name}, but "
                                  f"group {group['name']}'s policy {group['policy']} puts {first} on "
                                  f"the {expected}")
        counts[name] = {"gpu_ops": gpu_ops, "gpu_sublayers": gpu_sublayers, "sublayers": sublayers}
    return counts


def check_tiers(inspected, tag, layers_on_gpu):
    """Every weight a layer op reads is in the GPU tier when the plan keeps the layers in GPU
    memory and none otherwise; a weight only the embedding, final norm or lm_head read never is.
    Returns the number of GPU-tier weights."""
    tiers = {t["index"]: (t["name"], t["tier"]) for t in inspected["tensors"]}
    layer_weights = {w for op in inspected["ops"] if op["layer"] >= 0 for w in op["weights"]}
    if not layer_weights:
        raise CheckFailed(f"the {tag} plan's layer ops read no weights")
    for index, (name, tier) in sorted(tiers.items()):
        expected = "GPU" if layers_on_gpu and index in layer_weights else "not GPU"
        if (tier == "GPU") != (expected == "GPU"):
            reader = "a layer op" if index in layer_weights else "no layer op"
            raise CheckFailed(f"the {tag} plan keeps weight {index} ({name}, read by {reader}) in "
                              f"tier {tier}; expected {expected}")
    if inspected["kv_cache"]["tier"] == "GPU":
        raise CheckFailed(f"the {tag} plan puts the KV cache in GPU memory")
    return sum(tier == "GPU" for _, tier in tiers.values())


def gpu_phrases(counts, ops):
    """What the notice and run --verbose say of the plan's GPU sublayers and ops (Devices.cpp)."""
    d, p = counts["Decode"], counts["Prefill"]
    sublayers = (f"{d['gpu_sublayers']} of {d['sublayers']} decode and {p['gpu_sublayers']} of "
                 f"{p['sublayers']} prefill sublayers")
    return (f"plan assigns {sublayers} to the GPU",
            f"GPU for {sublayers} ({d['gpu_ops']} and {p['gpu_ops']} of {ops} ops)")


def check_verbose_policy(verbose, stages):
    """run --verbose's policy line names, per stage, the batch and length of the ragged batch (all
    prompts at once; prefill over the longest prompt, decode's last step over it and MAX_NEW - 1
    generated ids) and the policies the stage's table gives them."""
    line = next((text for text in verbose.splitlines() if text.startswith("hetc: policy: ")), None)
    if line is None:
        raise CheckFailed(f"hetc run --verbose prints no policy line:\n{indent(verbose)}")
    longest = max(len(p) for p in PROMPTS)
    for stage, length in [("Prefill", longest), ("Decode", longest + MAX_NEW - 1)]:
        found = re.search(rf"{stage.lower()} at B=(\d+), L=(\d+): ([^;]*)", line)
        if not found or (int(found.group(1)), int(found.group(2))) != (len(PROMPTS), length):
            raise CheckFailed(f"hetc run --verbose: expected the {stage.lower()} policy at "
                              f"B={len(PROMPTS)}, L={length}: {line}")
        expected = table_policies(stages[stage]["policy_table"], len(PROMPTS), length)
        if re.findall(r"\([01](?:,[01])*\)", found.group(3)) != expected:
            raise CheckFailed(f"hetc run --verbose gives {stage.lower()} at B={len(PROMPTS)}, "
                              f"L={length} policies {found.group(3)!r}; the table gives {expected}")


def run_plan(a, plan, tag, extra=()):
    logits = os.path.join(a.workdir, f"{tag}_logits.npy")
    if os.path.exists(logits):
        os.remove(logits)
    cmd = [a.hetc, "run", plan, "--max-new", str(MAX_NEW), "--logits-out", logits, *extra]
    for p in PROMPTS:
        cmd += ["--prompt-ids", prompt_arg(p)]
    proc = run(cmd, f"hetc run ({tag})", timeout=a.timeout)
    tokens = parse_token_lines(proc.stdout, f"hetc run ({tag})", len(PROMPTS), MAX_NEW)
    return tokens, np.load(logits), proc.stderr


def notices(stderr):
    return [line for line in stderr.splitlines() if line.startswith(NOTICE)]


def table_policies(table, batch, length):
    """The policies a stage's policy table (inspect --json) gives (batch, length), as text."""
    row = [r for r in table if r["len"] <= length][-1]
    found = [r for r in row["ranges"] if r["first_batch"] <= batch <= r["last_batch"]][0]
    return ["(" + ",".join(str(bit) for bit in p) + ")" for p in found["policies"]]


def check(a):
    check_hetc_binary(a.hetc)
    os.makedirs(a.workdir, exist_ok=True)
    onnx_path = export(a.preset, a.workdir, seed=0)
    plans = {}
    for tag, target in [("host", ["--target", "host"]), ("h100", ["--target", "spr-h100"]),
                        ("a100_streamed", ["--target", "spr-a100", "--no-resident"])]:
        plans[tag] = os.path.join(a.workdir, f"{tag}.hplan")
        run([a.hetc, "compile", onnx_path, *target, *BOUNDS, "-o", plans[tag]], f"hetc compile ({tag})")

    host = inspect_json(a.hetc, plans["host"])
    h100 = inspect_json(a.hetc, plans["h100"])
    streamed = inspect_json(a.hetc, plans["a100_streamed"])
    layers = h100["model"]["layers"]
    if h100["target"] != "spr-h100" or "H100" not in h100["target_gpu"]:
        raise CheckFailed(f"spr-h100 plan names target {h100['target']!r}, GPU {h100['target_gpu']!r}")
    if host["target"] != "host" or host["target_gpu"]:
        raise CheckFailed(f"host plan names target {host['target']!r}, GPU {host['target_gpu']!r}")
    h100_counts = check_device_plan(h100, layers, 4)
    h100_gpu = {stage: c["gpu_ops"] for stage, c in h100_counts.items()}
    h100_stages = {s["stage"]: s for s in h100["stages"]}
    print(f"spr-h100 plan: GPU ops {h100_gpu} of {len(h100['ops'])}, decode groups "
          f"{[(g['name'], g['policy']) for g in h100_stages['Decode']['groups']]}, prefill groups "
          f"{[(g['name'], g['policy']) for g in h100_stages['Prefill']['groups']]}")
    # What the cost model decides for spr-h100 at these sizes (as the docstring says; revisit
    # these two if it legitimately decides otherwise): GPU sublayers in both stages, and two
    # stage plans that differ (decode keeps qk and sv on the CPU, prefill does not), so that
    # each op's decode and prefill devices are both exercised.
    if h100_gpu["Decode"] == 0 or h100_gpu["Prefill"] == 0:
        raise CheckFailed(f"the spr-h100 plan gives the GPU no op in some stage: {h100_gpu}")
    if all(op["device"] == op["prefill_device"] for op in h100["ops"]):
        raise CheckFailed(f"every op of the spr-h100 plan runs on the same device in decode and in "
                          f"prefill (GPU ops {h100_gpu}): the two stage plans are not told apart")
    differing = {stage: sum(h[key] != o[key] for h, o in zip(h100["ops"], host["ops"]))
                 for stage, key in [("Decode", "device"), ("Prefill", "prefill_device")]}
    if len(h100["ops"]) != len(host["ops"]) or 0 in differing.values():
        raise CheckFailed(f"the spr-h100 and host plans' op devices do not differ in every stage: "
                          f"{differing} of {len(h100['ops'])} and {len(host['ops'])} ops")
    h100_weights_on_gpu = check_tiers(h100, "spr-h100", layers_on_gpu=True)
    print(f"spr-h100 plan: ops whose device differs from the host plan's {differing}; "
          f"{h100_weights_on_gpu} of {len(h100['tensors'])} weights in the GPU tier")
    for tag, inspected in [("host", host), ("streamed spr-a100", streamed)]:
        counts = check_device_plan(inspected, layers, 4)
        if any(c["gpu_ops"] or c["gpu_sublayers"] for c in counts.values()):
            raise CheckFailed(f"the {tag} plan puts ops on the GPU: {counts}")
        check_tiers(inspected, tag, layers_on_gpu=False)
        if inspected["host_gpu"].get("notice"):
            raise CheckFailed(f"hetc inspect --json gives the {tag} plan a notice: "
                              f"{inspected['host_gpu']['notice']}")
    notice_words, verbose_words = gpu_phrases(h100_counts, len(h100["ops"]))

    host_tokens, host_logits, host_err = run_plan(a, plans["host"], "host", ["--verbose"])
    h100_tokens, h100_logits, h100_err = run_plan(a, plans["h100"], "h100")
    streamed_tokens, streamed_logits, streamed_err = run_plan(a, plans["a100_streamed"], "a100_streamed",
                                                              ["--verbose"])
    if not np.all(np.isfinite(host_logits)) or not np.any(host_logits):
        raise CheckFailed("the host plan's logits are not finite or all zero")
    for tag, tokens, logits in [("spr-h100", h100_tokens, h100_logits),
                                ("spr-a100 streamed", streamed_tokens, streamed_logits)]:
        if tokens != host_tokens:
            raise CheckFailed(f"the {tag} plan generated {tokens}, the host plan {host_tokens}")
        if logits.shape != host_logits.shape or not np.array_equal(logits, host_logits):
            diff = np.max(np.abs(logits - host_logits)) if logits.shape == host_logits.shape else None
            raise CheckFailed(f"the {tag} plan's logits differ from the host plan's (max diff {diff})")
    print(f"tokens and {host_logits.size} logits identical to the host plan's for both GPU targets")

    found = notices(h100_err)
    if len(found) != 1:
        raise CheckFailed(f"hetc run of the spr-h100 plan printed {len(found)} notices:\n{indent(h100_err)}")
    notice = found[0]
    print(notice)
    # A device node alone (no driver library) is still no usable GPU; either way the notice names
    # what it found.
    has_node = os.path.exists("/dev/nvidia0")
    expected = ["to the GPU (target spr-h100", "this runtime does not split a plan between the CPU and the GPU",
                "running every op on the CPU",
                "/dev/nvidia0" if has_node else "this host has no GPU (no /dev/nvidia0"]
    if has_node and "no /dev/nvidia0" in notice:
        raise CheckFailed(f"this host has /dev/nvidia0 but the notice says it has none: {notice}")
    for words in expected + [notice_words]:
        if words not in notice:
            raise CheckFailed(f"the notice does not say {words!r}: {notice}")
    if notice != h100["host_gpu"].get("notice"):
        raise CheckFailed(f"hetc run's notice differs from hetc inspect --json's:\n    {notice}\n"
                          f"    {h100['host_gpu'].get('notice')}")
    for tag, target, stderr in [("host", "host (CPU only)", host_err),
                                ("spr-a100 streamed", "spr-a100 (", streamed_err)]:
        if notices(stderr):
            raise CheckFailed(f"hetc run of the {tag} plan printed a notice:\n{indent(stderr)}")
        if not any(line.startswith(f"hetc: devices: target {target}") and "): every op on the CPU;" in line
                   for line in stderr.splitlines()):
            raise CheckFailed(f"hetc run --verbose of the {tag} plan does not say every op is on the "
                              f"CPU:\n{indent(stderr)}")

    _, _, verbose = run_plan(a, plans["h100"], "h100_verbose", ["--verbose"])
    if "hetc: devices: target spr-h100" not in verbose or len(notices(verbose)) != 1:
        raise CheckFailed(f"hetc run --verbose does not report the devices once:\n{indent(verbose)}")
    for words in ["hetc: policy: prefill at B=", "; decode at B=", "run on the CPU here",
                  "hetc: memory: ", f"hetc: devices: target spr-h100 ({h100['target_gpu']}): {verbose_words}"]:
        if words not in verbose:
            raise CheckFailed(f"hetc run --verbose does not say {words!r}:\n{indent(verbose)}")
    check_verbose_policy(verbose, h100_stages)

    bench = run([a.hetc, "bench", plans["h100"], "--context", "8", "--gen", "2", "--no-paired",
                 "--probe-mib", "16", "--json"], "hetc bench --json", timeout=a.timeout)
    devices = json.loads(bench.stdout).get("devices", {})
    expected_devices = {
        "target": "spr-h100", "ran_on": "cpu", "ops": len(h100["ops"]),
        "gpu_ops_decode": h100_counts["Decode"]["gpu_ops"],
        "gpu_ops_prefill": h100_counts["Prefill"]["gpu_ops"],
        "gpu_sublayers_decode": h100_counts["Decode"]["gpu_sublayers"],
        "gpu_sublayers_prefill": h100_counts["Prefill"]["gpu_sublayers"],
        "sublayers": h100_counts["Decode"]["sublayers"]}
    wrong = {k: (devices.get(k), v) for k, v in expected_devices.items() if devices.get(k) != v}
    if wrong:
        raise CheckFailed(f"hetc bench --json reports devices {devices}; (reported, plan) differ "
                          f"for {wrong}")
    # bench's default point: one sequence, its last step attending context + gen positions.
    policy = json.loads(bench.stdout).get("policy", {})
    expected = table_policies(h100_stages["Decode"]["policy_table"], 1, 8 + 2)
    if policy.get("group_policies") != expected or policy.get("ran_on") != "cpu" or \
            (policy.get("batch"), policy.get("len")) != (1, 10):
        raise CheckFailed(f"hetc bench --json reports policy {policy}, the table gives {expected}")
    binding = json.loads(bench.stdout).get("memory_binding", {})
    arenas = {arena["arena"] for arena in binding.get("arenas", [])}
    if not {"KV cache", "activations", "weights"} <= arenas or not binding.get("nodes"):
        raise CheckFailed(f"hetc bench --json reports memory_binding {binding}")
    print(f"bench policy: {policy['description']}")
    print(f"bench memory: {binding['description']}")
    if len(notices(bench.stderr)) != 1:
        raise CheckFailed(f"hetc bench printed {len(notices(bench.stderr))} notices:\n{indent(bench.stderr)}")
    text = run([a.hetc, "inspect", plans["h100"]], "hetc inspect").stdout
    for words in ["devices: target 'spr-h100'", "policy table, Decode", "memory tiers: weights"]:
        if words not in text:
            raise CheckFailed(f"hetc inspect does not show {words!r}")
    check_device_option(a, plans["h100"], host_tokens, host_logits)
    print(f"OK: a plan for spr-h100 ({notice_words}; {verbose_words}) runs on this CPU, says so "
          "once, reports its devices, and matches the host plan; the host and streamed spr-a100 plans "
          "put nothing on the GPU; --device sim runs it on the software device with the same ids")


def check_device_option(a, plan, host_tokens, host_logits):
    sim_tokens, sim_logits, sim_err = run_plan(a, plan, "h100_sim", ["--device", "sim"])
    if sim_tokens != host_tokens:
        raise CheckFailed(f"--device sim generated {sim_tokens}, the host plan {host_tokens}")
    worst = float(np.max(np.abs(sim_logits - host_logits)))
    largest = float(np.max(np.abs(host_logits)))
    if not np.all(np.isfinite(sim_logits)) or worst > 1e-4 * largest:
        raise CheckFailed(f"--device sim's logits differ from the host plan's by {worst} "
                          f"(largest logit {largest})")
    if notices(sim_err):
        raise CheckFailed(f"hetc run --device sim printed a fallback notice:\n{indent(sim_err)}")
    print(f"--device sim: the host plan's ids, logits within {worst:.2e} (largest {largest:.2f})")
    session = os.path.join(a.workdir, "sim.session")
    refused = run([a.hetc, "run", plan, "--device", "sim", "--prompt-ids", "1,2,3",
                   "--session", session], "hetc run --device sim --session", expect_success=False)
    if refused.returncode == 0 or "--device cpu" not in refused.stderr or os.path.exists(session):
        raise CheckFailed(f"--device sim --session was not refused naming --device cpu "
                          f"(exit {refused.returncode}):\n{indent(refused.stderr)}")
    cuda = run([a.hetc, "run", plan, "--device", "cuda", "--prompt-ids", "1,2,3"],
               "hetc run --device cuda", expect_success=False)
    lines = cuda.stderr.strip().splitlines()
    if cuda.returncode == 0 or len(lines) != 1 or "--device cuda: " not in lines[0]:
        raise CheckFailed(f"--device cuda without a usable GPU and kernels did not fail in one line "
                          f"(exit {cuda.returncode}):\n{indent(cuda.stderr)}")
    print(f"--device cuda: {lines[0]}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hetc", required=True)
    p.add_argument("--preset", default="tiny")
    p.add_argument("--workdir", required=True)
    p.add_argument("--timeout", type=int, default=300)
    a = p.parse_args()
    return main_wrapper(lambda: check(a))


if __name__ == "__main__":
    sys.exit(main())
