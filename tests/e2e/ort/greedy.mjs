#!/usr/bin/node
// Greedy decoding of an ONNX decoder-with-past in ONNX Runtime (CPU, onnxruntime-node): the
// reference that needs no Python and no code of this repository.
//
//   node tests/e2e/ort/greedy.mjs --model DIR/model.onnx --prompt-ids 5,17,42 --prompt-ids 1,2 \
//        --max-new 16 --out ort.json [--mode single|batch] [--threads 1] [--opt-level all]
//
// The inputs are discovered from the session's metadata (names, element types, shapes):
//   input_ids                       int64/int32 [batch, sequence]
//   attention_mask (if present)     int64/int32/float/bool [batch, total_sequence], 0 on padding
//   position_ids (if present)       int64/int32 [batch, sequence]; Hugging Face's convention,
//                                   cumsum(attention_mask) - 1 (1 on padding)
//   past key/values                 float32/float16 rank-4 inputs whose name has "past"
//                                   (past_key_values.N.key, past.N.value, past_key.N, ...): the one
//                                   symbolic axis besides the batch is the sequence; they start
//                                   empty and are then fed the matching "present" output; or
//                                   rank 5 [2, batch, heads, past, head_dim], key and value
//                                   stacked (GPT-2's past_N from ONNX Runtime's exporter)
//   seqlens_k (if present)          int32 [batch]: attended length - 1 (GroupQueryAttention)
//   total_sequence_length (if any)  int32 scalar: the longest attended length of the batch
//   use_cache_branch (if present)   bool [1]: Optimum's merged decoder, false on the first step
//                                   (no past yet) and true after, as Optimum's ORTModelForCausalLM
// Any other input is refused with its name, type and shape.
//
// --mode single (default) runs each prompt alone (batch 1, no padding); --mode batch runs all
// prompts as one batch, left-padded with attention_mask 0. GroupQueryAttention takes its
// sequences right-aligned by seqlens_k, not left-padded, so a ragged batch is refused for models
// that use it (found by name in the file) or that take seqlens_k.
//
// Writes JSON: {source, model, mode, prompts, max_new, vocab, tokens: [[ids] per prompt],
// logits: [[[vocab float32] per step] per prompt]}; row t of a prompt is the logits its token t
// was picked from (t = 0: the last prompt position); NaN is written as null. tests/e2e/exports/
// compare.py compares two such files.

import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { UsageError, eachFlag, promptIds } from './args.mjs';

const require = createRequire(import.meta.url);

function parseArgs(argv) {
  const a = { prompts: [], maxNew: 16, mode: 'single', threads: 1, optLevel: 'all', padId: 0 };
  eachFlag(argv, (flag, value) => {
    switch (flag) {
      case '--model': a.model = value(); break;
      case '--prompt-ids': a.prompts.push(promptIds(value())); break;
      case '--max-new': a.maxNew = Number(value()); break;
      case '--out': a.out = value(); break;
      case '--mode': a.mode = value(); break;
      case '--threads': a.threads = Number(value()); break;
      case '--opt-level': a.optLevel = value(); break;
      case '--pad-id': a.padId = Number(value()); break;
      case '-h': case '--help':
        process.stdout.write(fs.readFileSync(new URL(import.meta.url)).toString()
          .split('\n').filter((l) => l.startsWith('//')).map((l) => l.slice(3)).join('\n') + '\n');
        process.exit(0);
        break;
      default: throw new UsageError(`unknown argument ${flag}`);
    }
  });
  if (!a.model) throw new UsageError('--model is required');
  if (!a.out) throw new UsageError('--out is required');
  if (a.prompts.length === 0) throw new UsageError('at least one --prompt-ids is required');
  if (!Number.isInteger(a.maxNew) || a.maxNew < 1) throw new UsageError('--max-new must be a positive integer');
  if (!['single', 'batch'].includes(a.mode)) throw new UsageError('--mode is single or batch');
  if (!['disabled', 'basic', 'extended', 'all'].includes(a.optLevel)) {
    throw new UsageError('--opt-level is disabled, basic, extended or all');
  }
  return a;
}

// ---------------------------------------------------------------------------------------------
// Tensors

function halfToFloat(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

function toFloat32(tensor) {
  switch (tensor.type) {
    case 'float32': return tensor.data;
    case 'float16': {
      const src = tensor.data;
      if (typeof Float16Array !== 'undefined' && src instanceof Float16Array) return Float32Array.from(src);
      const out = new Float32Array(src.length);
      for (let i = 0; i < src.length; i++) out[i] = halfToFloat(src[i]);
      return out;
    }
    default: throw new Error(`logits of type ${tensor.type} are not supported (float32 or float16)`);
  }
}

function intTensor(ort, type, values, dims, what) {
  switch (type) {
    case 'int64': return new ort.Tensor('int64', BigInt64Array.from(values, (v) => BigInt(v)), dims);
    case 'int32': return new ort.Tensor('int32', Int32Array.from(values), dims);
    case 'float32': return new ort.Tensor('float32', Float32Array.from(values), dims);
    case 'bool': return new ort.Tensor('bool', Uint8Array.from(values, (v) => (v ? 1 : 0)), dims);
    default: throw new Error(`${what}: element type ${type} is not supported (int64, int32, float32, bool)`);
  }
}

function emptyTensor(ort, type, dims) {
  switch (type) {
    case 'float32': return new ort.Tensor('float32', new Float32Array(0), dims);
    case 'float16': return new ort.Tensor('float16', new Uint16Array(0), dims);
    default: throw new Error(`past of type ${type} is not supported (float32 or float16)`);
  }
}

// ---------------------------------------------------------------------------------------------
// The model's interface

const isDynamic = (d) => typeof d !== 'number' || d < 0;
const describeInput = (m) => `"${m.name}" (${m.isTensor ? `${m.type} [${m.shape.map(String).join(', ')}]` : 'not a tensor'})`;

function presentNameFor(pastName, outputNames) {
  const candidates = [
    pastName.replace('past_key_values', 'present'),
    pastName.replace(/^past/, 'present'),
    pastName.replace('past', 'present'),
  ];
  return candidates.find((c) => c !== pastName && outputNames.includes(c));
}

function describeModel(session, modelPath) {
  const inputs = session.inputMetadata;
  const outputNames = session.outputNames;
  const spec = { past: [], other: {} };
  const refuse = (m, why) => {
    throw new Error(`${modelPath}: model input ${describeInput(m)} cannot be filled: ${why}`);
  };
  for (const m of inputs) {
    if (!m.isTensor) refuse(m, 'not a tensor');
    const name = m.name;
    if (name === 'input_ids' || name === 'attention_mask' || name === 'position_ids' ||
        name === 'seqlens_k' || name === 'total_sequence_length' || name === 'use_cache_branch') {
      spec.other[name] = m;
      continue;
    }
    if (/past/i.test(name)) {
      if (m.type !== 'float32' && m.type !== 'float16') refuse(m, 'past key/values must be float32 or float16');
      // GPT-2's past_N stacks key and value: [2, batch, heads, past, head_dim].
      const stacked = m.shape.length === 5 && m.shape[0] === 2;
      if (m.shape.length !== 4 && !stacked) {
        refuse(m, 'past key/values must be rank 4 (or rank 5 [2, batch, heads, past, head_dim])');
      }
      const batchAxis = stacked ? 1 : 0;
      const seqAxes = [];
      for (let ax = batchAxis + 1; ax < m.shape.length; ax++) if (isDynamic(m.shape[ax])) seqAxes.push(ax);
      if (seqAxes.length !== 1) {
        refuse(m, seqAxes.length === 0
          ? 'no symbolic sequence axis (a past/present buffer of fixed length is not supported)'
          : 'more than one symbolic axis besides the batch: cannot tell the sequence axis');
      }
      const present = presentNameFor(name, outputNames);
      if (!present) refuse(m, `no matching present output among [${outputNames.join(', ')}]`);
      spec.past.push({ name, type: m.type, shape: m.shape, batchAxis, seqAxis: seqAxes[0], present });
      continue;
    }
    refuse(m, 'this script fills input_ids, attention_mask, position_ids, seqlens_k, ' +
      'total_sequence_length, use_cache_branch and past key/values only');
  }
  if (!spec.other.input_ids) throw new Error(`${modelPath}: the model has no input_ids input`);
  const logits = outputNames.includes('logits') ? 'logits' : outputNames.find((n) => /logits/i.test(n));
  if (!logits) throw new Error(`${modelPath}: no logits output among [${outputNames.join(', ')}]`);
  spec.logits = logits;
  return spec;
}

// ---------------------------------------------------------------------------------------------
// Decoding

async function decode(ort, session, spec, prompts, maxNew, padId) {
  const B = prompts.length;
  const longest = Math.max(...prompts.map((p) => p.length));
  // Left-padded prompt and mask.
  let stepIds = [];
  const mask = [];
  for (const p of prompts) {
    const pad = longest - p.length;
    stepIds.push(...Array(pad).fill(padId), ...p);
    mask.push([...Array(pad).fill(0), ...Array(p.length).fill(1)]);
  }
  let seq = longest;
  let pastLen = 0;
  const past = {};
  for (const p of spec.past) {
    const dims = p.shape.map((d, ax) => (ax === p.batchAxis ? B : ax === p.seqAxis ? 0 : d));
    past[p.name] = emptyTensor(ort, p.type, dims);
  }
  const tokens = prompts.map(() => []);
  const rows = prompts.map(() => []);
  let vocab = 0;
  for (let step = 0; step < maxNew; step++) {
    const total = pastLen + seq;
    const feeds = { ...past };
    const o = spec.other;
    feeds.input_ids = intTensor(ort, o.input_ids.type, stepIds, [B, seq], 'input_ids');
    if (o.attention_mask) {
      feeds.attention_mask = intTensor(ort, o.attention_mask.type, mask.flat(), [B, total], 'attention_mask');
    }
    if (o.position_ids) {
      const pos = [];
      for (const row of mask) {
        let count = 0;
        const all = row.map((v) => { count += v; return v ? count - 1 : 1; });
        pos.push(...all.slice(total - seq));
      }
      feeds.position_ids = intTensor(ort, o.position_ids.type, pos, [B, seq], 'position_ids');
    }
    if (o.seqlens_k) {
      const lens = mask.map((row) => row.reduce((s, v) => s + v, 0) - 1);
      feeds.seqlens_k = intTensor(ort, o.seqlens_k.type, lens, [B], 'seqlens_k');
    }
    if (o.total_sequence_length) {
      const dims = o.total_sequence_length.shape.length === 0 ? [] : [1];
      feeds.total_sequence_length = intTensor(ort, o.total_sequence_length.type, [total], dims,
        'total_sequence_length');
    }
    if (o.use_cache_branch) {
      feeds.use_cache_branch = new ort.Tensor('bool', Uint8Array.from([pastLen > 0 ? 1 : 0]), [1]);
    }
    const out = await session.run(feeds);
    const logits = out[spec.logits];
    const values = toFloat32(logits);
    vocab = logits.dims[logits.dims.length - 1];
    const rowsPerBatch = logits.dims.length === 3 ? logits.dims[1] : 1;
    const next = [];
    for (let b = 0; b < B; b++) {
      const start = (b * rowsPerBatch + rowsPerBatch - 1) * vocab;
      const row = values.subarray(start, start + vocab);
      let best = 0;
      for (let v = 1; v < vocab; v++) if (row[v] > row[best]) best = v;
      tokens[b].push(best);
      rows[b].push(Array.from(row));
      next.push(best);
    }
    for (const p of spec.past) past[p.name] = out[p.present];
    pastLen = total;
    seq = 1;
    stepIds = next;
    for (const row of mask) row.push(1);
  }
  return { tokens, rows, vocab };
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    throw new Error(`cannot load onnxruntime-node (run "npm install --ignore-scripts" in ` +
      `${path.dirname(new URL(import.meta.url).pathname)}): ${e.message}`);
  }
  if (!fs.existsSync(a.model)) throw new Error(`no such model file: ${a.model}`);
  const session = await ort.InferenceSession.create(a.model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: a.threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: a.optLevel,
    logSeverityLevel: 3,
  });
  const spec = describeModel(session, a.model);
  const logitsMeta = session.outputMetadata.find((m) => m.name === spec.logits);
  const declaredVocab = logitsMeta?.isTensor ? logitsMeta.shape[logitsMeta.shape.length - 1] : undefined;
  if (typeof declaredVocab === 'number' && declaredVocab > 0) {
    const bad = a.prompts.flat().filter((t) => t >= declaredVocab);
    if (bad.length) throw new Error(`prompt ids ${bad.join(', ')} are outside the vocabulary (${declaredVocab})`);
  }

  const ragged = new Set(a.prompts.map((p) => p.length)).size > 1;
  if (a.mode === 'batch' && ragged) {
    const usesGqa = fs.readFileSync(a.model).includes('GroupQueryAttention');
    if (usesGqa || spec.other.seqlens_k) {
      throw new Error(`${a.model}: GroupQueryAttention takes sequences right-aligned by seqlens_k, not ` +
        'left-padded: a ragged batch cannot run in --mode batch; use --mode single');
    }
    if (!spec.other.attention_mask) {
      throw new Error(`${a.model}: the model has no attention_mask input, so a ragged batch cannot be ` +
        'padded; use --mode single');
    }
  }

  let result;
  if (a.mode === 'batch') {
    result = await decode(ort, session, spec, a.prompts, a.maxNew, a.padId);
  } else {
    result = { tokens: [], rows: [], vocab: 0 };
    for (const p of a.prompts) {
      const r = await decode(ort, session, spec, [p], a.maxNew, a.padId);
      result.tokens.push(r.tokens[0]);
      result.rows.push(r.rows[0]);
      result.vocab = r.vocab;
    }
  }
  const doc = {
    source: `onnxruntime-node ${ort.env.versions?.node ?? ''} (greedy.mjs, opt-level ${a.optLevel})`.trim(),
    model: a.model,
    mode: a.mode,
    prompts: a.prompts,
    max_new: a.maxNew,
    vocab: result.vocab,
    tokens: result.tokens,
    logits: result.rows,
  };
  fs.mkdirSync(path.dirname(path.resolve(a.out)), { recursive: true });
  fs.writeFileSync(a.out, JSON.stringify(doc));
  for (const t of result.tokens) process.stdout.write(`${t.join(' ')}\n`);
  process.stdout.write(`wrote ${a.out}\n`);
}

main().catch((e) => {
  process.stderr.write(`greedy.mjs: ${e instanceof UsageError ? 'usage: ' : ''}${e.message}\n`);
  process.exit(e instanceof UsageError ? 2 : 1);
});
