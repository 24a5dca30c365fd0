#!/usr/bin/env node
// ONNX's literal computation of a model, as ONNX Runtime's CPU engine runs it with its graph
// optimizations off: every node as written (a QDQ model's DequantizeLinear, f32 MatMul or Conv and
// QuantizeLinear node by node, no fused integer kernels). The reference that
// docs/low-precision.md measures hjit's and ONNX Runtime's int8 results against. Run by hand;
// never a build or test dependency.
//
// Usage: node ort_literal.js CASE_DIR OUT_DIR [level=disabled]
//   CASE_DIR: prepared as ../shared/peers/ort_time.js prepares it (model.onnx, ort/meta.json and the
//   inputs' raw buffers: run ort_time.js on it once). Writes OUT_DIR/<k>.bin, output k's raw bytes.
//   level: ONNX Runtime's graphOptimizationLevel ('all': the optimized engine's own result).
// Environment: ORT_NODE_DIR, the folder whose node_modules holds onnxruntime-node (default
//   ~/.cache/hjit-peers/ort, where ../shared/peers/ort_setup.sh installs it).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { createRequire } = require('module');

const [caseDir, outDir, level] = process.argv.slice(2);
if (!caseDir || !outDir) {
  console.error('usage: node ort_literal.js CASE_DIR OUT_DIR [level=disabled]');
  process.exit(2);
}
const ortDir = process.env.ORT_NODE_DIR || path.join(os.homedir(), '.cache', 'hjit-peers', 'ort');
const ort = createRequire(path.join(ortDir, 'package.json'))('onnxruntime-node');
const meta = JSON.parse(fs.readFileSync(path.join(caseDir, 'ort', 'meta.json'), 'utf8'));
const ARRAYS = { float32: Float32Array, float64: Float64Array, uint8: Uint8Array, int8: Int8Array, int32: Int32Array, int64: BigInt64Array };

(async () => {
  ort.env.logLevel = 'error';
  const session = await ort.InferenceSession.create(path.join(caseDir, 'model.onnx'), {
    executionProviders: ['cpu'], intraOpNumThreads: 2, graphOptimizationLevel: level || 'disabled', logSeverityLevel: 3,
  });
  const feeds = {};
  for (const inp of meta.inputs) {
    const b = fs.readFileSync(path.join(caseDir, 'ort', inp.file));
    const Array = ARRAYS[inp.dtype];
    if (!Array) throw new Error(`input ${inp.name}: dtype ${inp.dtype} not handled`);
    feeds[inp.name] = new ort.Tensor(inp.dtype, new Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength)), inp.shape);
  }
  const results = await session.run(feeds);
  fs.mkdirSync(outDir, { recursive: true });
  meta.outputs.forEach((o, k) => fs.writeFileSync(path.join(outDir, `${k}.bin`), Buffer.from(results[o.name].data.buffer)));
})().catch((e) => {
  console.error(e && e.message ? e.message : e);
  process.exit(1);
});
