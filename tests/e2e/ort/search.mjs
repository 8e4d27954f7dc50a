#!/usr/bin/node
// ONNX Runtime's own generation operators (com.microsoft GreedySearch, BeamSearch with one beam)
// run as the file defines them, on the CPU (onnxruntime-node): the token ids its search picks.
//
//   node tests/e2e/ort/search.mjs --model FILE.onnx --prompt-ids 5,17,42 --prompt-ids 1,2 \
//        --max-new 16 --out ort.json
//
// Each prompt runs alone (batch 1). The inputs are the operators' documented ones, by name:
// input_ids (int32 [batch, sequence]), max_length, min_length (int32 [1]), num_beams and
// num_return_sequences (int32 [1], both 1), length_penalty and repetition_penalty (float [1],
// both 1: no penalty). Any other input is refused with its name.
//
// Writes JSON {source, model, prompts, max_new, sequences: [[ids after the prompt] per prompt]}:
// the new ids the search returned, up to max_new of them; the search stops at its
// eos_token_id and pads after it, which is left in (the caller compares up to it).

import fs from 'node:fs';
import { createRequire } from 'node:module';
import { UsageError, eachFlag, promptIds } from './args.mjs';

const require = createRequire(import.meta.url);

function parseArgs(argv) {
  const a = { prompts: [], maxNew: 16 };
  eachFlag(argv, (flag, value) => {
    switch (flag) {
      case '--model': a.model = value(); break;
      case '--prompt-ids': a.prompts.push(promptIds(value())); break;
      case '--max-new': a.maxNew = Number(value()); break;
      case '--out': a.out = value(); break;
      default: throw new UsageError(`unknown argument ${flag}`);
    }
  });
  if (!a.model || !a.out || a.prompts.length === 0) {
    throw new UsageError('--model, --out and at least one --prompt-ids are required');
  }
  if (!Number.isInteger(a.maxNew) || a.maxNew < 1) throw new UsageError('--max-new must be a positive integer');
  return a;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    throw new Error(`onnxruntime-node is not installed next to this script (npm ci in tests/e2e/ort): ${e.message}`);
  }
  const session = await ort.InferenceSession.create(a.model, { intraOpNumThreads: 1 });
  const sequences = [];
  for (const prompt of a.prompts) {
    const feeds = {};
    const int32 = (values, dims) => new ort.Tensor('int32', Int32Array.from(values), dims);
    const float = (v) => new ort.Tensor('float32', Float32Array.from([v]), [1]);
    for (const name of session.inputNames) {
      switch (name) {
        case 'input_ids': feeds[name] = int32(prompt, [1, prompt.length]); break;
        case 'max_length': feeds[name] = int32([prompt.length + a.maxNew], [1]); break;
        case 'min_length': feeds[name] = int32([1], [1]); break;
        case 'num_beams': case 'num_return_sequences': feeds[name] = int32([1], [1]); break;
        case 'length_penalty': case 'repetition_penalty': feeds[name] = float(1); break;
        default: throw new UsageError(`input '${name}' is not one of the search operators' inputs this script feeds`);
      }
    }
    const out = await session.run(feeds);
    const ids = Array.from(out.sequences.data, Number);
    // [batch, (num_return_sequences,) max_length]: the one sequence, after its prompt.
    sequences.push(ids.slice(prompt.length, prompt.length + a.maxNew));
  }
  fs.writeFileSync(a.out, JSON.stringify({
    source: 'onnxruntime-node search operator', model: a.model, prompts: a.prompts,
    max_new: a.maxNew, sequences,
  }));
}

main().catch((e) => {
  process.stderr.write(`search.mjs: ${e.message}\n`);
  process.exit(e instanceof UsageError ? 2 : 1);
});
