// Import errors, through `hetc compile`, on files made here byte by byte (ModelProto wire
// format): one message naming the file, node or op, and a non-zero exit.
// RUN: not hetc compile %t.missing.onnx -o %t.hplan 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: printf '' > %t.empty.onnx
// RUN: not hetc compile %t.empty.onnx -o %t.hplan 2>&1 | FileCheck %s --check-prefix=EMPTY
// A graph field whose length runs past the end of the file.
// RUN: printf '\x08\x08\x3a\x40\x0a' > %t.cut.onnx
// RUN: not hetc compile %t.cut.onnx -o %t.hplan 2>&1 | FileCheck %s --check-prefix=CUT
// ir_version 8, an empty graph, opset 11.
// RUN: printf '\x08\x08\x3a\x00\x42\x02\x10\x0b' > %t.opset11.onnx
// RUN: not hetc compile %t.opset11.onnx -o %t.hplan 2>&1 | FileCheck %s --check-prefix=OPSET
// ir_version 8, an empty graph, opset 17.
// RUN: printf '\x08\x08\x3a\x00\x42\x02\x10\x11' > %t.nooutputs.onnx
// RUN: not hetc compile %t.nooutputs.onnx -o %t.hplan 2>&1 | FileCheck %s --check-prefix=NO-OUTPUTS
// One node 'my_lstm' of type LSTM writing the output y.
// RUN: printf '\x08\x08\x3a\x19\x0a\x12\x12\x01y\x1a\x07my_lstm\x22\x04LSTM\x62\x03\x0a\x01y\x42\x02\x10\x11' > %t.lstm.onnx
// RUN: not hetc compile %t.lstm.onnx -o %t.hplan 2>&1 | FileCheck %s --check-prefix=UNKNOWN-OP
// One node 'add0' (Add) reading 'nope', which nothing defines.
// RUN: printf '\x08\x08\x3a\x1b\x0a\x14\x0a\x04nope\x12\x01y\x1a\x04add0\x22\x03Add\x62\x03\x0a\x01y\x42\x02\x10\x11' > %t.undefined.onnx
// RUN: not hetc compile %t.undefined.onnx -o %t.hplan 2>&1 | FileCheck %s --check-prefix=UNDEFINED
// One node 'add0' (Add) with a single input: the operator's schema wants two.
// RUN: printf '\x08\x08\x3a\x1d\x0a\x11\x0a\x01x\x12\x01y\x1a\x04add0\x22\x03Add\x5a\x03\x0a\x01x\x62\x03\x0a\x01y\x42\x02\x10\x11' > %t.arity.onnx
// RUN: not hetc compile %t.arity.onnx -o %t.hplan 2>&1 | FileCheck %s --check-prefix=ARITY
// RUN: not ls %t.hplan

// MISSING: error: cannot open '{{.*}}missing.onnx': No such file or directory
// EMPTY: error: '{{.*}}empty.onnx' is not a valid ONNX model (no IR version)
// CUT: error: '{{.*}}cut.onnx' is not a valid ONNX model (the protobuf does not parse: the file is truncated or corrupted)
// OPSET: error: '{{.*}}opset11.onnx' uses ONNX opset 11; hetc supports opsets 13 to 21
// NO-OUTPUTS: error: '{{.*}}nooutputs.onnx': the graph has no outputs
// UNKNOWN-OP: error: node 'my_lstm' has op type 'LSTM', which is not supported
// UNDEFINED: error: node 'add0' (Add) reads 'nope', which no graph input, initializer or earlier node defines
// ARITY: error: node 'add0' (Add) is malformed: {{.*}}input size 1 not in range [min=2, max=2]
