// Import errors, through `hetc compile`, on files made here byte by byte (ModelProto wire
// format): one message naming the file, node or op, and a non-zero exit; and nodes out of
// topological order, sorted.
// RUN: not hetc compile %t.missing.onnx -o %t.hplan 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: printf '' > %t.empty.onnx
// RUN: not hetc compile %t.empty.onnx -o %t.hplan 2>&1 | FileCheck %s --check-prefix=EMPTY
// A graph field whose length runs past the end of the file.
// RUN: printf '\x08\x08\x3a\x40\x0a' > %t.cut.onnx
// RUN: not hetc compile %t.cut.onnx -o %t.hplan 2>&1 | FileCheck %s --check-prefix=CUT
// ir_version 8, an empty graph, opset 10.
// RUN: printf '\x08\x08\x3a\x00\x42\x02\x10\x0a' > %t.opset10.onnx
// RUN: not hetc compile %t.opset10.onnx -o %t.hplan 2>&1 | FileCheck %s --check-prefix=OPSET
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
// Nodes 'a' (Neg of u, writing t) and 'b' (Neg of t, writing u) read each other; 'c' reads t.
// RUN: printf '\x08\x08\x3a\x49\x0a\x0e\x0a\x01\x74\x12\x01\x79\x1a\x01\x63\x22\x03\x4e\x65\x67\x0a\x0e\x0a\x01\x75\x12\x01\x74\x1a\x01\x61\x22\x03\x4e\x65\x67\x0a\x0e\x0a\x01\x74\x12\x01\x75\x1a\x01\x62\x22\x03\x4e\x65\x67\x12\x01\x67\x5a\x09\x0a\x01\x78\x12\x04\x0a\x02\x08\x01\x62\x09\x0a\x01\x79\x12\x04\x0a\x02\x08\x01\x42\x04\x0a\x00\x10\x11' > %t.cycle.onnx
// RUN: not hetc compile %t.cycle.onnx -o %t.hplan 2>&1 | FileCheck %s --check-prefix=CYCLE
// Nodes 'a' (Neg) and 'b' (Abs) both write y.
// RUN: printf '\x08\x08\x3a\x39\x0a\x0e\x0a\x01\x78\x12\x01\x79\x1a\x01\x61\x22\x03\x4e\x65\x67\x0a\x0e\x0a\x01\x78\x12\x01\x79\x1a\x01\x62\x22\x03\x41\x62\x73\x12\x01\x67\x5a\x09\x0a\x01\x78\x12\x04\x0a\x02\x08\x01\x62\x09\x0a\x01\x79\x12\x04\x0a\x02\x08\x01\x42\x04\x0a\x00\x10\x11' > %t.twice.onnx
// RUN: not hetc compile %t.twice.onnx -o %t.hplan 2>&1 | FileCheck %s --check-prefix=TWICE
// Node 'a' writes x, the graph's input.
// RUN: printf '\x08\x08\x3a\x39\x0a\x0e\x0a\x01\x78\x12\x01\x79\x1a\x01\x62\x22\x03\x4e\x65\x67\x0a\x0e\x0a\x01\x79\x12\x01\x78\x1a\x01\x61\x22\x03\x4e\x65\x67\x12\x01\x67\x5a\x09\x0a\x01\x78\x12\x04\x0a\x02\x08\x01\x62\x09\x0a\x01\x79\x12\x04\x0a\x02\x08\x01\x42\x04\x0a\x00\x10\x11' > %t.shadow.onnx
// RUN: not hetc compile %t.shadow.onnx -o %t.hplan 2>&1 | FileCheck %s --check-prefix=SHADOW
// RUN: not ls %t.hplan
// Node 'second' (Neg of t, writing y) listed before 'first' (Neg of x, writing t): imported in
// dataflow order; the graph then stops at raising.
// RUN: printf '\x08\x08\x12\x00\x3a\x42\x0a\x13\x0a\x01\x74\x12\x01\x79\x1a\x06\x73\x65\x63\x6f\x6e\x64\x22\x03\x4e\x65\x67\x0a\x12\x0a\x01\x78\x12\x01\x74\x1a\x05\x66\x69\x72\x73\x74\x22\x03\x4e\x65\x67\x12\x01\x67\x5a\x09\x0a\x01\x78\x12\x04\x0a\x02\x08\x01\x62\x09\x0a\x01\x79\x12\x04\x0a\x02\x08\x01\x42\x04\x0a\x00\x10\x11' > %t.order.onnx
// RUN: not hetc compile %t.order.onnx -o %t.hplan --verbose 2>&1 | FileCheck %s --check-prefix=ORDER

// ONNX Runtime's RotaryEmbedding (com.microsoft) with 2 of its 4 inputs: its documented arity.
// RUN: printf '\x08\x08\x3a\x7a\x0a\x2e\x0a\x01\x78\x0a\x01\x70\x12\x01\x79\x1a\x03\x72\x6f\x74\x22\x0f\x52\x6f\x74\x61\x72\x79\x45\x6d\x62\x65\x64\x64\x69\x6e\x67\x3a\x0d\x63\x6f\x6d\x2e\x6d\x69\x63\x72\x6f\x73\x6f\x66\x74\x12\x01\x67\x5a\x17\x0a\x01\x78\x12\x12\x0a\x10\x08\x01\x12\x0c\x0a\x02\x08\x01\x0a\x02\x08\x01\x0a\x02\x08\x04\x5a\x13\x0a\x01\x70\x12\x0e\x0a\x0c\x08\x07\x12\x08\x0a\x02\x08\x01\x0a\x02\x08\x01\x62\x17\x0a\x01\x79\x12\x12\x0a\x10\x08\x01\x12\x0c\x0a\x02\x08\x01\x0a\x02\x08\x01\x0a\x02\x08\x04\x42\x04\x0a\x00\x10\x11\x42\x11\x0a\x0d\x63\x6f\x6d\x2e\x6d\x69\x63\x72\x6f\x73\x6f\x66\x74\x10\x01' > %t.rotary.onnx
// RUN: not hetc compile %t.rotary.onnx -o %t.hplan 2>&1 | FileCheck %s --check-prefix=CONTRIB-ARITY

// MISSING: error: cannot open '{{.*}}missing.onnx': No such file or directory
// EMPTY: error: '{{.*}}empty.onnx' is not a valid ONNX model (no IR version)
// CUT: error: '{{.*}}cut.onnx' is not a valid ONNX model (the protobuf does not parse: the file is truncated or corrupted)
// OPSET: error: '{{.*}}opset10.onnx' uses ONNX opset 10; hetc supports opsets 11 to 21
// NO-OUTPUTS: error: '{{.*}}nooutputs.onnx': the graph has no outputs
// UNKNOWN-OP: error: node 'my_lstm' has op type 'LSTM', which is not supported
// UNDEFINED: error: node 'add0' (Add) reads 'nope', which no graph input, initializer or node defines
// CYCLE: error: the graph has a cycle: 'b' (Neg) -> 'a' (Neg) -> 'b', each node reading an output of the one before it
// TWICE: error: value 'y' is written by node 'a' and by node 'b'
// SHADOW: error: node 'a' writes 'x', which is also a graph input or initializer
// CONTRIB-ARITY: error: node 'rot' (RotaryEmbedding) has 2 inputs and 1 outputs; ONNX Runtime's takes 4 to 4 inputs and 1 to 1 outputs
// ARITY: error: node 'add0' (Add) is malformed: {{.*}}input size 1 not in range [min=2, max=2]
// ORDER: IR after import
// ORDER: hetc.onnx.node "Neg"(%arg0) {node_name = "first"}
// ORDER-NEXT: hetc.onnx.node "Neg"(%0) {node_name = "second"}
// ORDER: error: node 'second' (Neg) is not part of a computation hetc recognises
