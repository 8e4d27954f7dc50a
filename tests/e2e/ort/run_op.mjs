#!/usr/bin/node
// Runs small ONNX models in ONNX Runtime (CPU, onnxruntime-node), for check_interpreter.py.
//
//   node tests/e2e/ort/run_op.mjs IN.json OUT.json
//
// IN.json:  {"cases": [{"id": "...", "model": BASE64 of the .onnx bytes,
//                       "inputs": [{"name", "dtype", "dims", "data": BASE64 of the raw
//                                   little-endian elements}]}]}
// dtype is an onnxruntime-node tensor type: float32, float16, float64, int32, int64, bool (one
// byte per element).
// OUT.json: {"ID": {"ok": true, "outputs": [{"name", "dtype", "dims", "data"}]} or
//                  {"ok": false, "error": "..."}}, one entry per case, outputs in the model's
// output order. Graph optimizations are disabled, so each node runs on its own CPU kernel.

import fs from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const ort = require('onnxruntime-node');

const ARRAYS = {
  float32: Float32Array,
  float16: Uint16Array,
  float64: Float64Array,
  int32: Int32Array,
  int64: BigInt64Array,
  bool: Uint8Array,
};

function toTensor(input) {
  const TypedArray = ARRAYS[input.dtype];
  if (!TypedArray) throw new Error(`unsupported input type ${input.dtype}`);
  // A copy, so the buffer starts aligned for the element type.
  const bytes = new Uint8Array(Buffer.from(input.data, 'base64')).slice();
  return new ort.Tensor(input.dtype, new TypedArray(bytes.buffer), input.dims);
}

function fromTensor(name, t) {
  const d = t.data;
  const bytes = Buffer.from(d.buffer, d.byteOffset, d.byteLength);
  return { name, dtype: t.type, dims: Array.from(t.dims, Number), data: bytes.toString('base64') };
}

async function main() {
  const [inPath, outPath] = process.argv.slice(2);
  if (!inPath || !outPath) {
    console.error('usage: run_op.mjs IN.json OUT.json');
    process.exit(2);
  }
  const { cases } = JSON.parse(fs.readFileSync(inPath, 'utf8'));
  const results = {};
  for (const c of cases) {
    try {
      const session = await ort.InferenceSession.create(Buffer.from(c.model, 'base64'), {
        graphOptimizationLevel: 'disabled',
        intraOpNumThreads: 1,
        interOpNumThreads: 1,
        logSeverityLevel: 4,
      });
      const feeds = {};
      for (const input of c.inputs) feeds[input.name] = toTensor(input);
      const out = await session.run(feeds);
      results[c.id] = { ok: true, outputs: session.outputNames.map((n) => fromTensor(n, out[n])) };
      if (session.release) await session.release();
    } catch (e) {
      results[c.id] = { ok: false, error: String(e && e.message ? e.message : e) };
    }
  }
  fs.writeFileSync(outPath, JSON.stringify(results));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
