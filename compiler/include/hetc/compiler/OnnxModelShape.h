// A model's shape read from its ONNX export, for the cost model: no weights are kept.
#pragma once

#include "hetc/compiler/ModelShape.h"
#include "runtime/format/Status.h"

#include <string>

namespace hetc::compiler {

// Imports and raises `onnxPath` as `hetc compile` does, groups its sublayers, and reads the
// decoder's dimensions. The export says nothing of the context the model was trained for, so
// maxContext is `assumedContext`. Every failure is one message naming the file, node or op.
Result<ModelShape> readOnnxModelShape(const std::string &onnxPath, uint32_t assumedContext);

} // namespace hetc::compiler
