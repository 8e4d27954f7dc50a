// The compile driver refuses bad options before reading the model, and a file that is not ONNX
// (this one) with one message; every refusal exits non-zero.
// RUN: not hetc compile %s --target nosuch -o %t.hplan 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not hetc compile %s --max-batch 0 -o %t.hplan 2>&1 | FileCheck %s --check-prefix=BATCH
// RUN: not hetc compile %s --max-seq 0 -o %t.hplan 2>&1 | FileCheck %s --check-prefix=SEQ
// RUN: not hetc compile %s --max-step-tokens 0 -o %t.hplan 2>&1 | FileCheck %s --check-prefix=STEP
// RUN: not hetc compile %s --max-batch 8 --max-step-tokens 4 -o %t.hplan 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STEP-BATCH
// RUN: not hetc compile %s --target spr-h100 --max-seq auto -o %t.hplan 2>&1 \
// RUN:   | FileCheck %s --check-prefix=AUTO-TARGET
// RUN: not hetc compile %s -o %t.hplan 2>&1 | FileCheck %s --check-prefix=NOT-ONNX
// RUN: not ls %t.hplan

// TARGET: hetc: error: unknown target 'nosuch' (known targets: host, gnr-a100, gnr-cpu, gnr-h100, spr-a100, spr-cpu, spr-h100; or a path to a .json target file)
// AUTO-TARGET: hetc: error: --max-seq auto sizes the plan for this host's memory; give --max-seq for target 'spr-h100'
// BATCH: hetc: error: --max-batch must be at least 1, got 0
// SEQ: hetc: error: --max-seq must be at least 1, got 0
// STEP: hetc: error: --max-step-tokens must be at least 1, got 0
// STEP-BATCH: hetc: error: --max-step-tokens (4) must be at least --max-batch (8): a decode step of every sequence needs one token each
// NOT-ONNX: hetc: error: '{{.*}}compile_invalid.mlir' is not a valid ONNX model
