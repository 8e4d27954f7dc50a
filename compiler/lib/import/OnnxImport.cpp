// ONNX import: a protobuf ModelProto (plus its external data files) into func.func @main at the
// hetc dialect's ONNX level. Weight bytes are never copied after parsing: a hetc.weight entry
// points into the parsed protobuf, an mmapped external-data file, or (for the rare typed-field
// tensors) one buffer materialised here.
#include "hetc/compiler/OnnxImport.h"

#include "hetc/Dialect/HetcDialect.h"
#include "import/OnnxGraph.h"

#include "runtime/format/WeightLayout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <iterator>
#include <map>
#include <poll.h>
#include <queue>
#include <set>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace mlir;

namespace hetc::compiler {
namespace {

// Opsets whose operator semantics the raising passes are written against. Before 13, Squeeze,
// Unsqueeze, Split and the reductions take their axes as attributes (read where axes are read,
// OnnxGraph.h's axesOf), and Softmax, LogSoftmax and Hardmax flatten their input to 2-D at
// `axis` (default 1): the same as 13's semantics over the last axis, which is what the importer
// makes of them (Importer::importNode), refusing any other axis.
constexpr int64_t kMinOpset = 11;
constexpr int64_t kMaxOpset = 21;
// Float initializers up to this many elements become hetc.constant (epsilons, scales); larger
// ones are model parameters and become hetc.weight, so even a 1-D norm weight of a toy model is
// a weight for the planner.
constexpr int64_t kMaxConstantFloatElements = 8;
// TensorProto data types newer than the ONNX library hetc builds with (1.12), by their numbers in
// onnx.proto: 4-bit integers (ONNX 1.16), packed two to a byte, the first in the low nibble.
constexpr int32_t kDataTypeUint4 = 21;
constexpr int32_t kDataTypeInt4 = 22;
bool isFourBit(int32_t dataType) { return dataType == kDataTypeUint4 || dataType == kDataTypeInt4; }

// The blocks along K an Int4Blocks weight may have: a group of the 4-bit layout, or a multiple of
// its largest group (several groups sharing a scale and zero point, which is exact).
bool int4BlockStorable(uint64_t block) {
  return LinearInt4N16K8::validGroup(block) || (block != 0 && block % 128 == 0);
}
constexpr const char *kInt4BlocksStorable =
    "hetc's 4-bit layout takes groups of 16, 32, 64 or 128 k, or multiples of 128";
// The block of a 4-bit weight with one scale per output column over all `k`.
uint64_t int4BlockCovering(uint64_t k) {
  for (uint64_t group = 16; group <= 128; group *= 2)
    if (group >= k && LinearInt4N16K8::validGroup(group))
      return group;
  return (k + 127) / 128 * 128;
}

// The ONNX operators (default domain) the importer accepts. Whether a node is understood is the
// raising passes' business; this list only rejects operators no Llama-family export contains.
const llvm::StringSet<> &knownOps() {
  static const llvm::StringSet<> ops = {"Abs",
                                        "If",
                                        "Loop",
                                        "SplitToSequence",
                                        "SequenceEmpty",
                                        "SequenceConstruct",
                                        "SequenceInsert",
                                        "SequenceAt",
                                        "SequenceErase",
                                        "SequenceLength",
                                        "ConcatFromSequence",
                                        "Add",
                                        "And",
                                        "ArgMax",
                                        "Cast",
                                        "CastLike",
                                        "Ceil",
                                        "Clip",
                                        "Concat",
                                        "Constant",
                                        "ConstantOfShape",
                                        "Cos",
                                        "CumSum",
                                        "DequantizeLinear",
                                        "Div",
                                        "Dropout",
                                        "Einsum",
                                        "Equal",
                                        "Erf",
                                        "Exp",
                                        "Expand",
                                        "Flatten",
                                        "Floor",
                                        "Gather",
                                        "GatherElements",
                                        "GatherND",
                                        "Gelu",
                                        "Gemm",
                                        "Greater",
                                        "GreaterOrEqual",
                                        "Identity",
                                        "IsInf",
                                        "IsNaN",
                                        "LayerNormalization",
                                        "Less",
                                        "LessOrEqual",
                                        "Log",
                                        "MatMul",
                                        "Max",
                                        "Min",
                                        "Mod",
                                        "Mul",
                                        "Neg",
                                        "Not",
                                        "Or",
                                        "Pad",
                                        "Pow",
                                        "Range",
                                        "Reciprocal",
                                        "ReduceMax",
                                        "ReduceMean",
                                        "ReduceMin",
                                        "ReduceProd",
                                        "ReduceSum",
                                        "Relu",
                                        "Reshape",
                                        "ScatterElements",
                                        "ScatterND",
                                        "Shape",
                                        "Sigmoid",
                                        "Sign",
                                        "Sin",
                                        "Size",
                                        "Slice",
                                        "Softmax",
                                        "Split",
                                        "Sqrt",
                                        "Squeeze",
                                        "Sub",
                                        "Tanh",
                                        "Tile",
                                        "TopK",
                                        "Transpose",
                                        "Trilu",
                                        "Unsqueeze",
                                        "Where",
                                        "Xor"};
  return ops;
}

// A read-only mapping of a whole file.
class MappedFile {
public:
  static std::shared_ptr<MappedFile> open(const std::string &path, std::string &error) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      error = "cannot open '" + path + "': " + std::strerror(errno);
      return nullptr;
    }
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      error = "cannot read '" + path + "': not a regular file";
      ::close(fd);
      return nullptr;
    }
    auto file = std::shared_ptr<MappedFile>(new MappedFile());
    file->size_ = static_cast<uint64_t>(st.st_size);
    if (file->size_ > 0) {
      void *p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        error = "cannot map '" + path + "': " + std::strerror(errno);
        ::close(fd);
        return nullptr;
      }
      file->data_ = static_cast<const char *>(p);
    }
    ::close(fd);
    return file;
  }
  ~MappedFile() {
    if (data_)
      ::munmap(const_cast<char *>(data_), size_);
  }
  const char *data() const { return data_; }
  uint64_t size() const { return size_; }

private:
  MappedFile() = default;
  const char *data_ = nullptr;
  uint64_t size_ = 0;
};

struct ElementInfo {
  Type type;
  uint64_t bytes = 0; // 0 for bool, whose raw form is one byte but whose MLIR form is i1
  bool isFloat = false;
};

std::optional<ElementInfo> elementInfo(MLIRContext &ctx, int32_t dataType) {
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
    return ElementInfo{Float32Type::get(&ctx), 4, true};
  case onnx::TensorProto::DOUBLE:
    return ElementInfo{Float64Type::get(&ctx), 8, true};
  case onnx::TensorProto::FLOAT16:
    return ElementInfo{Float16Type::get(&ctx), 2, true};
  case onnx::TensorProto::BFLOAT16:
    return ElementInfo{BFloat16Type::get(&ctx), 2, true};
  case onnx::TensorProto::INT64:
    return ElementInfo{IntegerType::get(&ctx, 64), 8, false};
  case onnx::TensorProto::INT32:
    return ElementInfo{IntegerType::get(&ctx, 32), 4, false};
  case onnx::TensorProto::INT16:
    return ElementInfo{IntegerType::get(&ctx, 16), 2, false};
  case onnx::TensorProto::INT8:
    return ElementInfo{IntegerType::get(&ctx, 8), 1, false};
  case onnx::TensorProto::UINT8:
    return ElementInfo{IntegerType::get(&ctx, 8, IntegerType::Unsigned), 1, false};
  case onnx::TensorProto::BOOL:
    return ElementInfo{IntegerType::get(&ctx, 1), 1, false};
  default:
    return std::nullopt;
  }
}

std::string dataTypeName(int32_t dataType) {
  if (onnx::TensorProto_DataType_IsValid(dataType))
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(dataType));
  static const char *const newer[] = {"FLOAT8E4M3FN",   "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
                                      "FLOAT8E5M2FNUZ", "UINT4",          "INT4",
                                      "FLOAT4E2M1"};
  if (dataType >= 17 && dataType < 17 + static_cast<int32_t>(std::size(newer)))
    return newer[dataType - 17];
  return "data type " + std::to_string(dataType);
}

// A graph input or output as a message shows it: name [dims] element type.
std::string signatureText(const onnx::ValueInfoProto &value) {
  std::string text = value.name();
  if (!value.type().has_tensor_type())
    return text + " (not a tensor)";
  const onnx::TypeProto_Tensor &tensor = value.type().tensor_type();
  text += " [";
  for (int d = 0; tensor.has_shape() && d < tensor.shape().dim_size(); ++d) {
    const onnx::TensorShapeProto_Dimension &dim = tensor.shape().dim(d);
    text += (d ? ", " : "") +
            (dim.has_dim_value() ? std::to_string(dim.dim_value())
                                 : dim.has_dim_param() ? dim.dim_param() : std::string("?"));
  }
  return text + "] " + dataTypeName(tensor.elem_type());
}

int rankOf(const onnx::ValueInfoProto &value) {
  const auto &type = value.type();
  return type.has_tensor_type() && type.tensor_type().has_shape()
             ? type.tensor_type().shape().dim_size()
             : -1;
}

bool isFloatType(int32_t t) {
  return t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::FLOAT16 ||
         t == onnx::TensorProto::BFLOAT16 || t == onnx::TensorProto::DOUBLE;
}

bool isIntegerType(int32_t t) {
  return t == onnx::TensorProto::INT64 || t == onnx::TensorProto::INT32;
}

// ONNX Runtime contrib operators hetc raises (raise/RaiseContribOps.cpp; MultiHeadAttention, whose
// mask needs the attention's probe, in raise/RaiseAttention.cpp; FastGelu and Gelu, activations,
// in raise/RaiseActivation.cpp; MatMulNBits, a linear, rewritten here by importMatMulNBits), with
// the input and
// output counts of ONNX Runtime's contrib operator documentation. ONNX Runtime registers
// SimplifiedLayerNormalization in the default domain, the others in com.microsoft.
struct ContribOpArity {
  int minInputs, maxInputs, maxOutputs;
};
const ContribOpArity *contribOp(const onnx::NodeProto &node) {
  static const std::map<std::string, ContribOpArity> ops = {
      {"SimplifiedLayerNormalization", {2, 2, 2}},
      {"SkipSimplifiedLayerNormalization", {3, 4, 4}},
      {"SkipLayerNormalization", {3, 5, 4}},
      {"FastGelu", {1, 2, 1}},
      {"Gelu", {1, 1, 1}},
      {"RotaryEmbedding", {4, 4, 1}},
      {"GroupQueryAttention", {7, 12, 4}},
      {"MultiHeadAttention", {1, 10, 4}},
      {"Attention", {1, 7, 3}},
      {"EmbedLayerNormalization", {7, 9, 3}},
      {"MatMulNBits", {3, 6, 1}},
  };
  auto it = ops.find(node.op_type());
  if (it == ops.end())
    return nullptr;
  const bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
  if (node.domain() == "com.microsoft" ||
      (defaultDomain && node.op_type() == "SimplifiedLayerNormalization"))
    return &it->second;
  return nullptr;
}

// A node as messages name it: its name, or its op type and index when it has none.
std::string nodeLabel(const onnx::NodeProto &node, int index) {
  return node.name().empty() ? node.op_type() + "#" + std::to_string(index) : node.name();
}

// The refusal of a node whose operator hetc does not read.
std::string unsupportedOp(const onnx::NodeProto &node, const std::string &name) {
  const bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
  return "node '" + name + "' has op type '" +
         (defaultDomain ? node.op_type() : node.domain() + "::" + node.op_type()) +
         "', which is not supported";
}

// The body of an ONNX Loop node, or null for any other node (or a Loop without one).
const onnx::GraphProto *loopBody(const onnx::NodeProto &node) {
  if (node.op_type() != "Loop" || !(node.domain().empty() || node.domain() == "ai.onnx"))
    return nullptr;
  for (const auto &attr : node.attribute())
    if (attr.name() == "body" && attr.has_g())
      return &attr.g();
  return nullptr;
}

// The names a graph defines: its inputs, initializers and node outputs.
std::vector<std::string> definedNames(const onnx::GraphProto &graph) {
  std::vector<std::string> names;
  for (const auto &input : graph.input())
    names.push_back(input.name());
  for (const auto &t : graph.initializer())
    names.push_back(t.name());
  for (const auto &n : graph.node())
    for (const std::string &output : n.output())
      names.push_back(output);
  return names;
}

// The names a subgraph reads from the scopes around it: what its nodes (and their own
// subgraphs) and outputs read that its inputs, initializers and nodes do not define.
std::vector<std::string> subgraphReads(const onnx::GraphProto &graph) {
  const std::vector<std::string> defined = definedNames(graph);
  const std::set<std::string> inner(defined.begin(), defined.end());
  std::vector<std::string> reads;
  std::set<std::string> seen;
  auto read = [&](const std::string &name) {
    if (!name.empty() && !inner.count(name) && seen.insert(name).second)
      reads.push_back(name);
  };
  for (const auto &n : graph.node()) {
    for (const std::string &input : n.input())
      read(input);
    for (const auto &attr : n.attribute()) {
      if (attr.has_g())
        for (const std::string &name : subgraphReads(attr.g()))
          read(name);
      for (const auto &g : attr.graphs())
        for (const std::string &name : subgraphReads(g))
          read(name);
    }
  }
  for (const auto &output : graph.output())
    read(output.name());
  return reads;
}

// The names a Loop's body reads from around the loop. They are inputs of the Loop node for
// ordering and checking, though the node does not list them.
std::vector<std::string> outerReads(const onnx::NodeProto &node) {
  const onnx::GraphProto *body = loopBody(node);
  return body ? subgraphReads(*body) : std::vector<std::string>{};
}

// ONNX's operators whose outputs are sequences (hetc.onnx_sequence until hetc-fold-shapes
// replaces each by its elements).
bool makesSequence(const std::string &opType) {
  return opType == "SplitToSequence" || opType == "SequenceEmpty" ||
         opType == "SequenceConstruct" || opType == "SequenceInsert" || opType == "SequenceErase";
}

class Importer {
public:
  Importer(const std::string &path, MLIRContext &ctx, WeightStore &weights, std::string &error)
      : path_(path), ctx_(ctx), weights_(weights), error_(error), builder_(&ctx) {}

  OwningOpRef<ModuleOp> run();

private:
  bool fail(const std::string &message) {
    if (error_.empty())
      error_ = message;
    return false;
  }
  bool parse();
  bool checkOpsets();
  Value stackHalves(Location loc, const std::string &name, Value key, Value value,
                    RankedTensorType stacked);
  Value takeHalf(Location loc, const std::string &name, Value stacked, int64_t half);
  bool checkDecoderSignature();
  // Where a mixture of experts routes tokens: ONNX Runtime's MoE ops, or a TopK over a router's
  // scores (a projection by a weight, through Softmax or Cast), keeping fewer experts than it
  // scores. Nullopt for a dense model.
  std::optional<std::string> mixtureOfExperts() const;
  bool flattenIfs();
  bool liftSearchDecoder();
  bool readDynamicQuantization();
  bool sortNodes();
  bool validateGraph();
  void inferShapes();
  Type valueType(const std::string &name);
  Type typeFromProto(const onnx::TypeProto &type);
  bool tensorBytes(const onnx::TensorProto &t, const std::string &what, const char *&data,
                   uint64_t &bytes, std::shared_ptr<void> &owner);
  Value importTensor(const onnx::TensorProto &t, const std::string &name, bool isInitializer);
  // The elements of a small tensor (scales, zero points) as floats: float32, float16 or bfloat16,
  // and with `integers` int8 and uint8 too.
  bool tensorValues(const onnx::TensorProto &t, const std::string &what, bool integers,
                    std::vector<float> &out);
  bool importNode(const onnx::NodeProto &node, int index);
  // The values a node reads, `none` for an absent optional input.
  bool nodeOperands(const onnx::NodeProto &node, const std::string &name,
                    SmallVector<Value> &operands);
  bool importLoop(const onnx::NodeProto &node, const std::string &name);
  // One node of the graph or of a Loop's body against its schema; `defined` holds the values
  // the node may read and receives its outputs.
  bool validateNode(const onnx::NodeProto &node, const std::string &name,
                    llvm::StringSet<> &defined);
  bool importMatMulNBits(const onnx::NodeProto &node, const std::string &name);
  bool importDequantizeLinear(const onnx::NodeProto &node, const std::string &name);
  Value transposedInt4Weight(Location loc, const std::string &name,
                             hetc::compiler::StoredWeight weight);
  // The initializer `node` reads as its input `input` when the pre-scan claimed it for a quantized
  // weight (quantizedInitializers_); null otherwise.
  const onnx::TensorProto *claimedInitializer(const onnx::NodeProto &node, int input) const;
  // The initializers a MatMulNBits reads as its quantized weight (B, scales, zero points), or a
  // DequantizeLinear of a 2-D 8- or 4-bit initializer (x, scale, zero point): kept out of the IR,
  // read by importMatMulNBits into one Int4Blocks weight, by importDequantizeLinear into one.
  std::map<std::string, const onnx::TensorProto *> quantizedInitializers_;
  std::optional<NamedAttribute> convertAttribute(const onnx::AttributeProto &attr,
                                                 const std::string &nodeName);
  std::shared_ptr<MappedFile> externalFile(const std::string &location, const std::string &tensor);

  std::string path_;
  MLIRContext &ctx_;
  WeightStore &weights_;
  std::string &error_;
  OpBuilder builder_;
  std::shared_ptr<onnx::ModelProto> model_;
  std::map<std::string, onnx::TypeProto> types_;
  llvm::StringMap<Value> values_;
  std::map<std::string, std::shared_ptr<MappedFile>> externalFiles_;
  Value none_;
  int64_t opset_ = 0;
  // Each node's index in the file, by its index after sorting: what names an unnamed node.
  std::vector<int> fileIndex_;
  // What the importer decided that the graph does not say (the branch of an If it took), for
  // `hetc compile --explain`: the module's kImportNotes.
  std::vector<std::string> importNotes_;
  // The outputs of the DequantizeLinears readDynamicQuantization writes: checked like opset 21's
  // (their axis attribute is newer than opsets 11 and 12's schema), read by importDequantizeLinear.
  std::set<std::string> importerDequantize_;
  // Every value name of the graph (inputs, initializers, node outputs), which a Loop's body may
  // not define again.
  std::set<std::string> graphNames_;
};

bool Importer::parse() {
  std::string openError;
  std::shared_ptr<MappedFile> file = MappedFile::open(path_, openError);
  if (!file)
    return fail(openError);
  if (file->size() > static_cast<uint64_t>(INT_MAX))
    return fail(
        "'" + path_ + "' is " + std::to_string(file->size()) +
        " bytes; an ONNX protobuf must be under 2 GiB (store the weights as external data)");
  model_ = std::make_shared<onnx::ModelProto>();
  google::protobuf::io::ArrayInputStream array(file->data(), static_cast<int>(file->size()));
  google::protobuf::io::CodedInputStream coded(&array);
  coded.SetTotalBytesLimit(INT_MAX);
  if (!model_->ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
    return fail("'" + path_ +
                "' is not a valid ONNX model (the protobuf does not parse: the file "
                "is truncated or corrupted)");
  if (model_->ir_version() <= 0 || !model_->has_graph())
    return fail("'" + path_ + "' is not a valid ONNX model (" +
                (model_->ir_version() <= 0 ? "no IR version" : "no graph") + ")");
  return true;
}

// A KV cache stacked in one value per layer, [2, batch, heads, positions, head_dim], key then
// value (ONNX Runtime's com.microsoft Attention: GPT-2's past_N and present_N).
bool isStackedKv(const onnx::ValueInfoProto &v) {
  if (!v.type().has_tensor_type() || !isFloatType(v.type().tensor_type().elem_type()) ||
      rankOf(v) != 5)
    return false;
  const auto &first = v.type().tensor_type().shape().dim(0);
  const std::string name = llvm::StringRef(v.name()).lower();
  return first.has_dim_value() && first.dim_value() == 2 &&
         (name.find("past") != std::string::npos || name.find("present") != std::string::npos);
}

// A KV cache input: [batch, kv_heads, past, head_dim] in a float type, or a key and a value
// stacked (isStackedKv).
bool isCacheInput(const onnx::ValueInfoProto &v) {
  return (v.type().has_tensor_type() && isFloatType(v.type().tensor_type().elem_type()) &&
          rankOf(v) == 4) ||
         isStackedKv(v);
}

// A model that takes token ids ([batch, sequence] integers) is a language model; hetc compiles
// the decoders among them that keep a KV cache: past key/value inputs [batch, kv_heads, past,
// head_dim] and a logits output [batch, sequence, vocab]. Any other such model (an encoder, a
// decoder exported without its cache, a state-space model) is refused here, by what its inputs
// and outputs say it is, before any of its nodes could fail for a reason that hides this one.
// A graph without token ids is left to the later checks.
std::optional<std::string> Importer::mixtureOfExperts() const {
  const onnx::GraphProto &g = model_->graph();
  std::map<std::string, const onnx::TensorProto *> initializers;
  for (const auto &t : g.initializer())
    initializers[t.name()] = &t;
  std::map<std::string, int> producers;
  for (int i = 0; i < g.node_size(); ++i)
    for (const std::string &output : g.node(i).output())
      producers[output] = i;
  auto constantInt = [&](const std::string &name) -> std::optional<int64_t> {
    const onnx::TensorProto *t = nullptr;
    if (auto it = initializers.find(name); it != initializers.end())
      t = it->second;
    else if (auto p = producers.find(name); p != producers.end() &&
                                            g.node(p->second).op_type() == "Constant" &&
                                            g.node(p->second).attribute_size() == 1 &&
                                            g.node(p->second).attribute(0).has_t())
      t = &g.node(p->second).attribute(0).t();
    if (!t || t->data_type() != onnx::TensorProto::INT64)
      return std::nullopt;
    if (t->int64_data_size() == 1)
      return t->int64_data(0);
    if (t->raw_data().size() == sizeof(int64_t)) {
      int64_t v;
      std::memcpy(&v, t->raw_data().data(), sizeof v);
      return v;
    }
    return std::nullopt;
  };
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto &node = g.node(i);
    if (node.domain() == "com.microsoft" &&
        (node.op_type() == "MoE" || node.op_type() == "QMoE" || node.op_type() == "SparseMoE"))
      return "node '" + nodeLabel(node, i) + "' is ONNX Runtime's com.microsoft::" +
             node.op_type();
    if (node.op_type() != "TopK" || node.input_size() < 2 || !(node.domain().empty() ||
                                                                 node.domain() == "ai.onnx"))
      continue;
    // The scores: a MatMul or Gemm by a 2-D weight, through what keeps their order.
    std::string scores = node.input(0);
    const onnx::NodeProto *router = nullptr;
    for (int hops = 0; hops < 6 && !router; ++hops) {
      auto p = producers.find(scores);
      if (p == producers.end())
        break;
      const onnx::NodeProto &def = g.node(p->second);
      if (def.op_type() == "MatMul" || def.op_type() == "Gemm") {
        router = &def;
        break;
      }
      if (def.op_type() != "Softmax" && def.op_type() != "Cast" && def.op_type() != "Identity" &&
          def.op_type() != "Sigmoid")
        break;
      scores = def.input(0);
    }
    if (!router || router->input_size() < 2)
      continue;
    auto weight = initializers.find(router->input(1));
    if (weight == initializers.end() || weight->second->dims_size() != 2)
      continue;
    bool transB = false;
    for (const auto &attr : router->attribute())
      transB |= attr.name() == "transB" && attr.i() != 0;
    const int64_t experts = weight->second->dims(transB ? 0 : 1);
    std::optional<int64_t> k = constantInt(node.input(1));
    if (!k || *k < 1 || *k >= experts)
      continue;
    return "node '" + nodeLabel(node, i) + "' (TopK) keeps " + std::to_string(*k) + " of " +
           std::to_string(experts) + " experts scored by '" + nodeLabel(*router, producers[scores]) +
           "' (" + router->op_type() + ")";
  }
  return std::nullopt;
}

// Up to three values as "name [dims] TYPE", then how many there are in all.
std::string listedValues(const std::vector<const onnx::ValueInfoProto *> &values,
                         size_t shown = 3) {
  std::string text;
  for (size_t i = 0; i < values.size() && i < shown; ++i)
    text += (i ? ", " : "") + signatureText(*values[i]);
  if (values.size() > shown)
    text += ", ... (" + std::to_string(values.size()) + " in all)";
  return text;
}

bool Importer::checkDecoderSignature() {
  const onnx::GraphProto &g = model_->graph();
  llvm::StringSet<> initializers;
  for (const auto &t : g.initializer())
    initializers.insert(t.name());
  auto elem = [](const onnx::ValueInfoProto &v) {
    return v.type().has_tensor_type() ? v.type().tensor_type().elem_type() : 0;
  };
  auto named = [](const onnx::ValueInfoProto &v, std::initializer_list<const char *> parts) {
    std::string name = llvm::StringRef(v.name()).lower();
    return llvm::any_of(parts, [&](const char *p) { return name.find(p) != std::string::npos; });
  };
  // What the inputs say, by name and form: token ids; the KV cache; recurrent or convolution
  // state (LFM2, Mamba, Qwen3.5's linear attention); embeddings made by another model (the text
  // decoder of a multimodal model); an encoder's output or cross-attention cache (the decoder of
  // an encoder-decoder model); a paged cache over packed tokens.
  std::vector<const onnx::ValueInfoProto *> inputs, stateInputs, embedsInputs, encoderInputs,
      pagedInputs, squareMaskInputs;
  bool tokenIds = false, tokenTypes = false;
  int pastInputs = 0;
  for (const auto &input : g.input()) {
    if (initializers.contains(input.name()))
      continue;
    inputs.push_back(&input);
    tokenIds |= isIntegerType(elem(input)) && rankOf(input) == 2 && named(input, {"ids"}) &&
                !named(input, {"position", "type"});
    tokenTypes |= named(input, {"token_type"});
    if (named(input, {"encoder", "cross"})) {
      encoderInputs.push_back(&input);
      continue;
    }
    if (named(input, {"block_table", "slot_mapping", "cumulative_sequence", "cu_seqlens"})) {
      pagedInputs.push_back(&input);
      continue;
    }
    if (isFloatType(elem(input)) && rankOf(input) == 3 && named(input, {"embeds"})) {
      embedsInputs.push_back(&input);
      continue;
    }
    if (isFloatType(elem(input)) && (rankOf(input) == 3 || rankOf(input) == 4) &&
        named(input, {"state", "conv", "ssm"}) && !named(input, {"hidden_state"})) {
      stateInputs.push_back(&input);
      continue;
    }
    if (rankOf(input) == 4 && named(input, {"mask"})) {
      squareMaskInputs.push_back(&input);
      continue;
    }
    pastInputs += isCacheInput(input) ? (isStackedKv(input) ? 2 : 1) : 0;
  }
  bool logits = false, hidden = false;
  std::vector<const onnx::ValueInfoProto *> constantOutputs, embedsOutputs, stateOutputs;
  for (const auto &output : g.output()) {
    logits |= isFloatType(elem(output)) && rankOf(output) == 3 && named(output, {"logits"});
    if (isFloatType(elem(output)) && rankOf(output) == 3 && !named(output, {"logits"}))
      stateOutputs.push_back(&output); // a hidden state, where there are no logits
    hidden |= named(output, {"hidden_state", "pooler"});
    if (initializers.contains(output.name()))
      constantOutputs.push_back(&output);
    if (isFloatType(elem(output)) && rankOf(output) == 3 && named(output, {"embeds"}))
      embedsOutputs.push_back(&output);
  }
  const bool states = !stateInputs.empty();
  const std::string hybrid = "a hybrid of attention and convolution or state-space layers (state "
                             "inputs beside its KV cache: " + listedValues(stateInputs) + ")";

  // Forms that are no decoder hetc runs whatever else they hold, each said, in one line.
  std::vector<std::string> traits;
  if (!constantOutputs.empty())
    traits.push_back("a test stub: its outputs " + listedValues(constantOutputs) +
                     " are constants stored in the file, computed from no input");
  if (!embedsOutputs.empty() && !logits)
    traits.push_back("the embedding model of a multimodal model: it writes " +
                     listedValues(embedsOutputs) + " for a text decoder to read, and no logits");
  if (!embedsInputs.empty())
    traits.push_back("the text decoder of a multimodal model: it takes " +
                     listedValues(embedsInputs) + " from a separate embedding model" +
                     (tokenIds ? " beside its token ids" : " instead of token ids"));
  if (!encoderInputs.empty())
    traits.push_back("the decoder of an encoder-decoder model (encoder outputs or cross-attention "
                     "inputs: " + listedValues(encoderInputs) + ")");
  if (!pagedInputs.empty())
    traits.push_back("a decoder over a paged KV cache with its tokens packed (" +
                     listedValues(pagedInputs) + ")");
  if (!traits.empty()) {
    if (states)
      traits.push_back(pastInputs >= 2 ? hybrid
                                       : "recurrent (state inputs: " + listedValues(stateInputs) +
                                             ")");
    std::string text = "'" + path_ + "' is not a decoder hetc runs: it looks like ";
    for (size_t i = 0; i < traits.size(); ++i)
      text += (i == 0 ? "" : i + 1 == traits.size() ? ", and " : ", ") + traits[i];
    return fail(text + "; hetc runs decoders that take token ids, keep a KV cache in each "
                       "layer's attention and write logits");
  }
  if (!tokenIds)
    return true;
  // A KV cache beside convolution or recurrent state (LFM2, Jamba, Zamba): some layers are not
  // attention, and hetc runs decoders whose every layer is.
  if (pastInputs >= 2 && logits && states)
    return fail("'" + path_ + "' is not a decoder hetc runs: it looks like " + hybrid +
                "; hetc runs decoders whose every layer is attention");
  if (pastInputs >= 2 && logits) {
    // Megatron's GPT-2 (ONNX Runtime's test export) takes [batch, 1, max, max] from the caller.
    if (!squareMaskInputs.empty())
      return fail("'" + path_ + "' is not a decoder hetc runs: it takes its attention mask as " +
                  listedValues(squareMaskInputs) + ", a mask over query and key positions that " +
                  "the caller builds each step; hetc builds the causal mask itself and reads " +
                  "only a [batch, total] padding mask");
    if (std::optional<std::string> router = mixtureOfExperts())
      return fail("'" + path_ + "' is not a decoder hetc runs: it looks like a mixture of experts (" +
                  *router + "); hetc runs decoders whose feed-forwards are dense");
    return true;
  }
  std::string looks = states        ? "a state-space model (recurrent state inputs, no KV cache)"
                      : tokenTypes || (hidden && !logits)
                          ? "an encoder (hidden states out, no KV cache)"
                      : logits && pastInputs == 0
                          ? "a decoder exported without its KV cache (export it with past "
                            "key/values, e.g. Optimum's text-generation-with-past)"
                      : !logits && pastInputs >= 2 && !stateOutputs.empty()
                          ? "a decoder without its language-model head (it writes " +
                                listedValues(stateOutputs) +
                                ", a hidden state, and no logits: export the model for causal "
                                "LM, e.g. GPT2LMHeadModel)"
                          : "no decoder hetc knows";
  std::vector<std::string> missing;
  if (pastInputs < 2)
    missing.push_back("past key/value inputs [batch, kv_heads, past, head_dim]");
  if (!logits)
    missing.push_back("a logits output [batch, sequence, vocab]");
  // The signature, each list cut at six values (a 32-layer cache would fill a screen).
  std::vector<const onnx::ValueInfoProto *> outputs;
  for (const auto &output : g.output())
    outputs.push_back(&output);
  std::string text = "'" + path_ + "' is not a decoder LLM with a KV cache: it looks like " +
                     looks + "; inputs: " + listedValues(inputs, 6) +
                     "; outputs: " + listedValues(outputs, 6);
  text += "; missing: " + missing[0] + (missing.size() > 1 ? " and " + missing[1] : "");
  return fail(text);
}

// ONNX Runtime's generation operators (BeamSearch, GreedySearch, Sampling, as its
// convert_generation tool writes them) hold the decoder as a graph attribute, with the weights it
// shares with the other subgraphs in the outer graph's initializers. hetc runs its own search
// (greedy or sampled, per request) over the decoder, so that decoder becomes the model's graph:
// `init_decoder` where the file has one (the graph for a prompt of any length; `decoder` serves
// one new token a step and may fix the sequence at 1), else `decoder`. The search's own settings
// are not read (--explain says so); an encoder-decoder's search is refused.
bool Importer::liftSearchDecoder() {
  onnx::GraphProto &g = *model_->mutable_graph();
  if (g.node_size() != 1)
    return true;
  const onnx::NodeProto &search = g.node(0);
  const std::string op = search.op_type();
  if (search.domain() != "com.microsoft" ||
      (op != "BeamSearch" && op != "GreedySearch" && op != "Sampling"))
    return true;
  const onnx::GraphProto *decoder = nullptr, *initDecoder = nullptr;
  int64_t modelType = 0;
  for (const auto &attr : search.attribute()) {
    if (attr.name() == "model_type" && attr.type() == onnx::AttributeProto::INT)
      modelType = attr.i();
    if (attr.type() == onnx::AttributeProto::GRAPH && attr.name() == "decoder")
      decoder = &attr.g();
    if (attr.type() == onnx::AttributeProto::GRAPH && attr.name() == "init_decoder")
      initDecoder = &attr.g();
  }
  const std::string what = "'" + path_ + "' is ONNX Runtime's " + op + " (its search over a model";
  if (modelType != 0)
    return fail(what + " of type " + std::to_string(modelType) +
                ", an encoder-decoder such as T5 or Whisper): hetc runs decoder-only models");
  if (!decoder && !initDecoder)
    return fail(what + ") without a decoder graph");
  const bool init = initDecoder != nullptr;
  onnx::GraphProto lifted = init ? *initDecoder : *decoder;
  // The outer graph's initializers the decoder reads (in any nested graph too) and does not
  // define itself.
  std::set<std::string> read, defined;
  std::function<void(const onnx::GraphProto &)> collect = [&](const onnx::GraphProto &graph) {
    for (const auto &node : graph.node()) {
      read.insert(node.input().begin(), node.input().end());
      for (const auto &attr : node.attribute()) {
        if (attr.has_g())
          collect(attr.g());
        for (const auto &sub : attr.graphs())
          collect(sub);
      }
    }
  };
  collect(lifted);
  for (const auto &input : lifted.input())
    defined.insert(input.name());
  for (const auto &t : lifted.initializer())
    defined.insert(t.name());
  for (auto &t : *g.mutable_initializer())
    if (read.count(t.name()) && !defined.count(t.name()))
      lifted.add_initializer()->Swap(&t);
  importNotes_.push_back("the file is ONNX Runtime's " + op + " around a decoder: hetc compiles " +
                         "its '" + (init ? "init_decoder" : "decoder") + "' graph and runs its " +
                         "own search; the file's search settings (end of sequence, beams, " +
                         "lengths, penalties) are not read");
  g.Swap(&lifted);
  return true;
}

bool Importer::checkOpsets() {
  bool found = false;
  for (const auto &opset : model_->opset_import()) {
    if (opset.domain().empty() || opset.domain() == "ai.onnx") {
      found = true;
      opset_ = opset.version();
    }
  }
  if (!found)
    return fail("'" + path_ + "' does not import the default ONNX operator set");
  if (opset_ < kMinOpset || opset_ > kMaxOpset)
    return fail("'" + path_ + "' uses ONNX opset " + std::to_string(opset_) +
                "; hetc supports opsets " + std::to_string(kMinOpset) + " to " +
                std::to_string(kMaxOpset));
  return true;
}

// torch.onnx writes `squeeze(d)` of a dimension it cannot see as If(Shape(x)[d] == 1, Squeeze,
// Identity). Each If of the graph becomes a choice between values: its branches' nodes join the
// graph (a branch reads the values around it, so its nodes fit in the sorted order like any
// other), and the If node keeps (cond, then outputs, else outputs) as its inputs. The fold-shapes
// pass picks the branch where the condition is known; otherwise raising refuses the If, naming it.
// A branch's own Ifs join the graph with it and are flattened in turn.
//
// One If is decided here: Optimum's merged decoder, If(use_cache_branch, decoder with past,
// decoder without), over a boolean graph input. When exactly one branch reads the KV cache
// inputs, that branch alone joins the graph: hetc runs every step with its cache (empty on the
// first), where the decoder without past computes the same as the one with an empty past. The
// condition input, no longer read, leaves the signature; `--explain` says what was taken.
bool Importer::flattenIfs() {
  onnx::GraphProto &g = *model_->mutable_graph();
  // The KV cache inputs (float, rank 4 and named past or cache, or a key and a value stacked),
  // and the inputs that may choose a branch by them: one boolean.
  llvm::StringSet<> initializerNames, cacheInputs, cacheFlags;
  for (const auto &t : g.initializer())
    initializerNames.insert(t.name());
  for (const auto &input : g.input()) {
    if (initializerNames.contains(input.name()) || !input.type().has_tensor_type())
      continue;
    const std::string lower = llvm::StringRef(input.name()).lower();
    if (isStackedKv(input) ||
        (isCacheInput(input) && (lower.find("past") != std::string::npos ||
                                 lower.find("cache") != std::string::npos)))
      cacheInputs.insert(input.name());
    const auto &tensor = input.type().tensor_type();
    const bool one = tensor.has_shape() &&
                     llvm::all_of(tensor.shape().dim(), [](const auto &d) {
                       return d.has_dim_value() && d.dim_value() == 1;
                     });
    if (tensor.elem_type() == onnx::TensorProto::BOOL && one)
      cacheFlags.insert(input.name());
  }
  struct DecidedIf {
    std::string name, cond;
    int taken;
  };
  std::vector<DecidedIf> decided;
  for (int i = 0; i < g.node_size(); ++i) {
    onnx::NodeProto &node = *g.mutable_node(i);
    if (node.op_type() != "If" || !(node.domain().empty() || node.domain() == "ai.onnx"))
      continue;
    const std::string name = nodeLabel(node, i);
    const onnx::GraphProto *branches[2] = {nullptr, nullptr};
    for (const auto &attr : node.attribute()) {
      if (attr.name() == "then_branch" && attr.has_g())
        branches[0] = &attr.g();
      else if (attr.name() == "else_branch" && attr.has_g())
        branches[1] = &attr.g();
    }
    if (!branches[0] || !branches[1] || node.input_size() != 1)
      return fail("node '" + name + "' (If) is malformed: it needs a condition and both branches");
    std::vector<std::string> inputs{node.input(0)};
    for (const onnx::GraphProto *branch : branches) {
      if (branch->input_size() != 0 || branch->output_size() != node.output_size())
        return fail("node '" + name + "' (If) is malformed: a branch takes inputs or has " +
                    std::to_string(branch->output_size()) + " outputs for the If's " +
                    std::to_string(node.output_size()));
      for (const auto &output : branch->output())
        inputs.push_back(output.name());
    }
    // A branch's nodes, initializers and value types join the graph.
    auto lift = [&](const onnx::GraphProto &branch) {
      for (const auto &inner : branch.node())
        *g.add_node() = inner;
      for (const auto &t : branch.initializer())
        *g.add_initializer() = t;
      for (const auto &vi : branch.value_info())
        *g.add_value_info() = vi;
    };
    if (cacheFlags.contains(node.input(0))) {
      bool readsCache[2] = {false, false};
      for (int b = 0; b < 2; ++b)
        for (const std::string &read : subgraphReads(*branches[b]))
          readsCache[b] |= cacheInputs.contains(read);
      if (readsCache[0] != readsCache[1]) {
        const int taken = readsCache[0] ? 0 : 1;
        const onnx::GraphProto &branch = *branches[taken];
        decided.push_back({name, node.input(0), taken});
        lift(branch);
        for (int j = 0; j < node.output_size(); ++j)
          if (!node.output(j).empty() && branch.output(j).name() != node.output(j)) {
            onnx::NodeProto *copy = g.add_node();
            copy->set_op_type("Identity");
            copy->set_name(name + "/" + node.output(j));
            copy->add_input(branch.output(j).name());
            copy->add_output(node.output(j));
          }
        // The If goes only now: the branch lifted above lives in it.
        g.mutable_node()->DeleteSubrange(i, 1);
        --i;
        continue;
      }
    }
    lift(*branches[0]);
    lift(*branches[1]);
    onnx::NodeProto &flattened = *g.mutable_node(i);
    flattened.clear_attribute();
    flattened.clear_input();
    for (const std::string &input : inputs)
      flattened.add_input(input);
  }
  if (decided.empty())
    return true;
  // A decided condition leaves the graph's inputs when nothing else reads it.
  llvm::StringSet<> read;
  for (const auto &node : g.node()) {
    for (const std::string &input : node.input())
      read.insert(input);
    for (const std::string &name : outerReads(node))
      read.insert(name);
  }
  for (const auto &output : g.output())
    read.insert(output.name());
  for (const DecidedIf &d : decided) {
    const bool dropped = !read.contains(d.cond);
    importNotes_.push_back(
        "If '" + d.name + "' over the boolean input '" + d.cond + "': its " +
        (d.taken == 0 ? "then" : "else") +
        " branch, the one that reads the KV cache, is taken (every step runs with the cache, "
        "empty on the first; the other branch computes the same without one)" +
        (dropped ? ", and '" + d.cond + "' is not an input of the plan"
                 : "; '" + d.cond + "' is still read elsewhere"));
  }
  for (int k = g.input_size() - 1; k >= 0; --k)
    if (!read.contains(g.input(k).name()) &&
        llvm::any_of(decided, [&](const DecidedIf &d) { return d.cond == g.input(k).name(); }))
      g.mutable_input()->DeleteSubrange(k, 1);
  return true;
}

// ONNX Runtime's dynamic quantization of a linear (quantize_dynamic's MatMulInteger form, as
// transformers.js's quantized models hold it):
//   (xq, xs, xzp) = DynamicQuantizeLinear(x)
//   y = Mul(Cast(MatMulInteger(xq, Q, xzp, zp), float), Mul(xs, scale))
// is x @ ((Q - zp) * scale), up to x rounded to 8 bits at run time, which ONNX Runtime does with
// one scale for the whole tensor (every row of the step). hetc reads it as
// MatMul(x, DequantizeLinear(Q, scale, zp, axis 1)): the weight is imported as a QDQ weight is
// (kept in int8 when symmetric), and the activations are hetc's own rows, not rounded per
// tensor. A MatMulInteger in any other company is refused, saying what it lacks.
bool Importer::readDynamicQuantization() {
  onnx::GraphProto &g = *model_->mutable_graph();
  const bool any = std::any_of(g.node().begin(), g.node().end(), [](const auto &n) {
    return n.op_type() == "MatMulInteger" && (n.domain().empty() || n.domain() == "ai.onnx");
  });
  if (!any)
    return true;
  std::map<std::string, const onnx::TensorProto *> initializers;
  for (const auto &t : g.initializer())
    initializers[t.name()] = &t;
  std::set<std::string> names; // every value name, for the ones made here
  for (const auto &t : g.initializer())
    names.insert(t.name());
  for (const auto &input : g.input())
    names.insert(input.name());
  std::map<std::string, int> producer;
  std::map<std::string, std::vector<int>> readers;
  for (int i = 0; i < g.node_size(); ++i) {
    for (const std::string &output : g.node(i).output())
      if (!output.empty()) {
        producer[output] = i;
        names.insert(output);
      }
    for (const std::string &input : g.node(i).input())
      if (!input.empty())
        readers[input].push_back(i);
    for (const std::string &name : outerReads(g.node(i)))
      readers[name].push_back(i);
  }
  for (const auto &output : g.output())
    readers[output.name()].push_back(-1); // read by the graph itself
  auto unique = [&](const std::string &base) {
    std::string name = base;
    for (int k = 1; names.count(name); ++k)
      name = base + "_" + std::to_string(k);
    names.insert(name);
    return name;
  };
  // The node writing `value`, when it has `type` and the arity given.
  auto node = [&](const std::string &value, const char *type, int inputs,
                  int outputs) -> const onnx::NodeProto * {
    auto it = producer.find(value);
    if (it == producer.end())
      return nullptr;
    const onnx::NodeProto &n = g.node(it->second);
    return n.op_type() == type && n.input_size() == inputs && n.output_size() == outputs ? &n
                                                                                        : nullptr;
  };
  // The one node reading `value`, when it has `type`, 1 output and `inputs` inputs.
  auto onlyReader = [&](const std::string &value, const char *type, int inputs) -> int {
    auto it = readers.find(value);
    if (it == readers.end() || it->second.size() != 1 || it->second[0] < 0)
      return -1;
    const onnx::NodeProto &n = g.node(it->second[0]);
    return n.op_type() == type && n.input_size() == inputs && n.output_size() == 1
               ? it->second[0]
               : -1;
  };
  auto elements = [](const onnx::TensorProto &t) {
    int64_t n = 1;
    for (int64_t d : t.dims())
      n *= d;
    return n;
  };

  std::set<int> removed;
  std::vector<onnx::NodeProto> added;
  // One DequantizeLinear per weight, however many MatMulIntegers read it.
  std::map<std::string, std::pair<std::string, std::string>> dequantized; // Q -> (scale, output)
  int rewritten = 0;
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto &mm = g.node(i);
    if (mm.op_type() != "MatMulInteger" || !(mm.domain().empty() || mm.domain() == "ai.onnx"))
      continue;
    const std::string name = nodeLabel(mm, i);
    auto refuse = [&](const std::string &why) {
      return fail("node '" + name + "' (MatMulInteger) is not ONNX Runtime's dynamic "
                  "quantization of a linear: " + why + "; hetc reads MatMulInteger(x quantized "
                  "by DynamicQuantizeLinear, an 8-bit weight initializer, x's zero point, the "
                  "weight's), cast to float and multiplied by x's scale times the weight's");
    };
    if (mm.input_size() < 3 || mm.input_size() > 4 || mm.output_size() != 1)
      return refuse("it has " + std::to_string(mm.input_size()) + " inputs and " +
                    std::to_string(mm.output_size()) + " outputs");
    const onnx::NodeProto *quantize = node(mm.input(0), "DynamicQuantizeLinear", 1, 3);
    if (!quantize || quantize->output(0) != mm.input(0) || quantize->output(2) != mm.input(2))
      return refuse("its input is not a DynamicQuantizeLinear's with that node's zero point");
    auto weight = initializers.find(mm.input(1));
    if (weight == initializers.end() || weight->second->dims_size() != 2 ||
        (weight->second->data_type() != onnx::TensorProto::INT8 &&
         weight->second->data_type() != onnx::TensorProto::UINT8))
      return refuse("its weight '" + mm.input(1) + "' is not a 2-D int8 or uint8 initializer");
    const int64_t columns = weight->second->dims(1);
    const std::string zeroPoint = mm.input_size() > 3 ? mm.input(3) : std::string();
    const onnx::TensorProto *zp = nullptr;
    if (!zeroPoint.empty()) {
      auto it = initializers.find(zeroPoint);
      if (it == initializers.end() || it->second->data_type() != weight->second->data_type() ||
          it->second->dims_size() > 1 ||
          (elements(*it->second) != 1 && elements(*it->second) != columns))
        return refuse("its weight's zero point '" + zeroPoint + "' is not an initializer of the "
                      "weight's type with one value or one per output column");
      zp = it->second;
    }
    const int cast = onlyReader(mm.output(0), "Cast", 1);
    if (cast < 0 || std::none_of(g.node(cast).attribute().begin(), g.node(cast).attribute().end(),
                                 [](const auto &a) {
                                   return a.name() == "to" && a.i() == onnx::TensorProto::FLOAT;
                                 }))
      return refuse("its result is not read by one Cast to float alone");
    const int scaled = onlyReader(g.node(cast).output(0), "Mul", 2);
    if (scaled < 0)
      return refuse("the cast is not read by one Mul alone");
    const onnx::NodeProto &mul = g.node(scaled);
    const std::string scalesValue =
        mul.input(0) == g.node(cast).output(0) ? mul.input(1) : mul.input(0);
    const onnx::NodeProto *scales = node(scalesValue, "Mul", 2, 1);
    if (!scales)
      return refuse("the cast is not multiplied by x's scale times the weight's");
    const std::string weightScale = scales->input(0) == quantize->output(1) ? scales->input(1)
                                    : scales->input(1) == quantize->output(1) ? scales->input(0)
                                                                               : std::string();
    auto scale = initializers.find(weightScale);
    if (weightScale.empty() || scale == initializers.end() ||
        scale->second->data_type() != onnx::TensorProto::FLOAT ||
        scale->second->dims_size() > 1 ||
        (elements(*scale->second) != 1 && elements(*scale->second) != columns))
      return refuse("the cast is not multiplied by x's scale times a float initializer of the "
                    "weight's scales, one or one per output column");

    // MatMul(x, DequantizeLinear(Q, scale, zp)), writing the Mul's output. A scale and zero
    // point of different lengths (one of them a single value) are both made per column.
    std::string dequantizedWeight;
    const std::string key = mm.input(1);
    if (auto it = dequantized.find(key); it != dequantized.end()) {
      if (it->second.first != weightScale + "|" + zeroPoint)
        return refuse("its weight '" + key + "' is read by another MatMulInteger with other "
                      "scales or zero points");
      dequantizedWeight = it->second.second;
    } else {
      const bool perColumn =
          elements(*scale->second) == columns && columns > 1 ? true
          : zp && elements(*zp) == columns && columns > 1     ? true
                                                              : false;
      std::string scaleName = weightScale, zeroName = zeroPoint;
      auto widen = [&](const onnx::TensorProto &t, const std::string &base) {
        onnx::TensorProto *wide = g.add_initializer();
        wide->set_name(unique(base + "_per_column"));
        wide->set_data_type(t.data_type());
        wide->add_dims(columns);
        const size_t width = t.data_type() == onnx::TensorProto::FLOAT ? 4 : 1;
        std::string one;
        if (t.has_raw_data())
          one = t.raw_data().substr(0, width);
        else if (t.data_type() == onnx::TensorProto::FLOAT && t.float_data_size() > 0) {
          const float value = t.float_data(0);
          one.assign(reinterpret_cast<const char *>(&value), 4);
        }
        else if (t.int32_data_size() > 0)
          one.assign(1, static_cast<char>(t.int32_data(0)));
        if (one.size() != width)
          return std::string();
        std::string bytes;
        for (int64_t c = 0; c < columns; ++c)
          bytes += one;
        wide->set_raw_data(bytes);
        return wide->name();
      };
      if (perColumn && elements(*scale->second) == 1)
        scaleName = widen(*scale->second, weightScale);
      if (perColumn && zp && elements(*zp) == 1)
        zeroName = widen(*zp, zeroPoint);
      if (scaleName.empty() || (zp && zeroName.empty()))
        return refuse("its weight's scale or zero point is stored in a form hetc does not read");
      onnx::NodeProto dequantize;
      dequantize.set_op_type("DequantizeLinear");
      dequantize.set_name(name + "/DequantizeLinear");
      dequantize.add_input(key);
      dequantize.add_input(scaleName);
      if (zp)
        dequantize.add_input(zeroName);
      dequantizedWeight = unique(key + "/dequantized");
      dequantize.add_output(dequantizedWeight);
      if (perColumn) {
        onnx::AttributeProto *axis = dequantize.add_attribute();
        axis->set_name("axis");
        axis->set_type(onnx::AttributeProto::INT);
        axis->set_i(1);
      }
      importerDequantize_.insert(dequantizedWeight);
      dequantized[key] = {weightScale + "|" + zeroPoint, dequantizedWeight};
      added.push_back(std::move(dequantize));
    }
    onnx::NodeProto matmul;
    matmul.set_op_type("MatMul");
    matmul.set_name(name);
    matmul.add_input(quantize->input(0));
    matmul.add_input(dequantizedWeight);
    matmul.add_output(mul.output(0));
    added.push_back(std::move(matmul));
    removed.insert({i, cast, scaled});
    ++rewritten;
  }
  // The scale products and the DynamicQuantizeLinears go once nothing else reads them.
  auto unread = [&](const onnx::NodeProto &n) {
    for (const std::string &output : n.output())
      if (auto it = readers.find(output); it != readers.end())
        for (int reader : it->second)
          if (!removed.count(reader))
            return false;
    return true;
  };
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < g.node_size(); ++i) {
      const std::string &type = g.node(i).op_type();
      if (!removed.count(i) && (type == (pass == 0 ? "Mul" : "DynamicQuantizeLinear")) &&
          unread(g.node(i)) &&
          std::any_of(g.node(i).output().begin(), g.node(i).output().end(),
                      [&](const std::string &o) { return readers.count(o) > 0; }))
        removed.insert(i);
    }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  kept.Reserve(g.node_size() - static_cast<int>(removed.size()) + static_cast<int>(added.size()));
  for (int i = 0; i < g.node_size(); ++i)
    if (!removed.count(i))
      *kept.Add() = std::move(*g.mutable_node(i));
  for (onnx::NodeProto &n : added)
    *kept.Add() = std::move(n);
  g.mutable_node()->Swap(&kept);
  importNotes_.push_back(std::to_string(rewritten) + " MatMulInteger nodes of ONNX Runtime's "
                         "dynamic quantization read as MatMuls of their dequantized weights: the "
                         "activations are not rounded to 8 bits per tensor as ONNX Runtime rounds "
                         "them");
  return true;
}

// ONNX asks for nodes in topological order, and exporters that rewrite graphs (ONNX Runtime
// GenAI's builder among them) do not always keep it: the nodes are sorted, each keeping its place
// among the nodes whose inputs are ready, so a sorted graph is left as it is. A value written
// twice or a cycle is refused, naming the nodes.
bool Importer::sortNodes() {
  onnx::GraphProto &g = *model_->mutable_graph();
  const int n = g.node_size();
  llvm::StringSet<> outside; // graph inputs and initializers
  for (const auto &input : g.input())
    outside.insert(input.name());
  for (const auto &t : g.initializer())
    outside.insert(t.name());
  llvm::StringMap<int> producer;
  for (int i = 0; i < n; ++i)
    for (const std::string &output : g.node(i).output()) {
      if (output.empty())
        continue;
      if (outside.contains(output))
        return fail("node '" + nodeLabel(g.node(i), i) + "' writes '" + output +
                    "', which is also a graph input or initializer");
      auto [it, inserted] = producer.try_emplace(output, i);
      if (!inserted)
        return fail("value '" + output + "' is written by node '" +
                    nodeLabel(g.node(it->second), it->second) + "' and by node '" +
                    nodeLabel(g.node(i), i) + "'");
    }

  // Kahn's algorithm, lowest index first. An input nothing writes is left for validateGraph.
  std::vector<int> waiting(n, 0);
  std::vector<SmallVector<int, 2>> readers(n);
  std::vector<std::vector<std::string>> inputs(n);
  for (int i = 0; i < n; ++i) {
    inputs[i].assign(g.node(i).input().begin(), g.node(i).input().end());
    for (std::string &read : outerReads(g.node(i)))
      inputs[i].push_back(std::move(read));
  }
  for (int i = 0; i < n; ++i)
    for (const std::string &input : inputs[i])
      if (auto it = producer.find(input); !input.empty() && it != producer.end()) {
        ++waiting[i];
        readers[it->second].push_back(i);
      }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i)
    if (waiting[i] == 0)
      ready.push(i);
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int reader : readers[i])
      if (--waiting[reader] == 0)
        ready.push(reader);
  }

  if (static_cast<int>(order.size()) < n) {
    // Every node left waits for another node left: walking to such a producer repeats a node.
    int at =
        static_cast<int>(std::find_if(waiting.begin(), waiting.end(), [](int w) { return w > 0; }) -
                         waiting.begin());
    std::vector<int> walk, seenAt(n, -1);
    while (seenAt[at] < 0) {
      seenAt[at] = static_cast<int>(walk.size());
      walk.push_back(at);
      for (const std::string &input : inputs[at])
        if (auto it = producer.find(input);
            !input.empty() && it != producer.end() && waiting[it->second] > 0) {
          at = it->second;
          break;
        }
    }
    // walk[seenAt[at]..] reads backwards along the cycle; say it in dataflow order.
    std::string cycle;
    for (size_t k = walk.size(); k-- > static_cast<size_t>(seenAt[at]);)
      cycle +=
          "'" + nodeLabel(g.node(walk[k]), walk[k]) + "' (" + g.node(walk[k]).op_type() + ") -> ";
    return fail("the graph has a cycle: " + cycle + "'" +
                nodeLabel(g.node(walk.back()), walk.back()) +
                "', each node reading an output of the one before it");
  }

  fileIndex_ = order;
  if (std::is_sorted(order.begin(), order.end()))
    return true;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> sorted;
  sorted.Reserve(n);
  for (int i : order)
    *sorted.Add() = std::move(*g.mutable_node(i));
  g.mutable_node()->Swap(&sorted);
  return true;
}

// The checks that make the graph safe to hand to ONNX shape inference (which does not expect a
// dangling reference or an unknown operator): every node is known and reads defined values.
bool Importer::validateGraph() {
  const onnx::GraphProto &g = model_->graph();
  if (g.output_size() == 0)
    return fail("'" + path_ + "': the graph has no outputs");
  llvm::StringSet<> defined;
  for (const auto &input : g.input())
    defined.insert(input.name());
  for (const auto &t : g.initializer())
    defined.insert(t.name());
  graphNames_.clear();
  for (const auto &name : defined.keys())
    graphNames_.insert(name.str());
  for (const auto &node : g.node())
    for (const std::string &output : node.output())
      graphNames_.insert(output);
  for (int i = 0; i < g.node_size(); ++i)
    if (!validateNode(g.node(i), nodeLabel(g.node(i), fileIndex_[i]), defined))
      return false;
  for (const auto &output : g.output())
    if (!defined.contains(output.name()))
      return fail("graph output '" + output.name() +
                  "' is not defined by any node, input or initializer");
  return true;
}

bool Importer::validateNode(const onnx::NodeProto &node, const std::string &name,
                            llvm::StringSet<> &defined) {
  bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
  const ContribOpArity *contrib = contribOp(node);
  if (!contrib && (!defaultDomain || !knownOps().contains(node.op_type())))
    return fail(unsupportedOp(node, name));
  for (const std::string &input : node.input())
    if (!input.empty() && !defined.contains(input))
      return fail("node '" + name + "' (" + node.op_type() + ") reads '" + input +
                  "', which no graph input, initializer or node defines");
  if (contrib) {
    // ONNX has no schema for these: their documented arity, and the raising checks the rest.
    if (node.input_size() < contrib->minInputs || node.input_size() > contrib->maxInputs ||
        node.output_size() < 1 || node.output_size() > contrib->maxOutputs)
      return fail("node '" + name + "' (" + node.op_type() + ") has " +
                  std::to_string(node.input_size()) + " inputs and " +
                  std::to_string(node.output_size()) + " outputs; ONNX Runtime's takes " +
                  std::to_string(contrib->minInputs) + " to " +
                  std::to_string(contrib->maxInputs) + " inputs and 1 to " +
                  std::to_string(contrib->maxOutputs) + " outputs");
    for (const std::string &output : node.output())
      if (!output.empty())
        defined.insert(output);
    return true;
  }
  // DequantizeLinear's opset-21 and later attributes (block_size, output_dtype) are newer than
  // the schemas hetc checks against: its arity and attributes are checked here instead, its
  // operands by importDequantizeLinear.
  if (node.op_type() == "DequantizeLinear" &&
      ((node.output_size() == 1 && importerDequantize_.count(node.output(0))) ||
       std::any_of(node.attribute().begin(), node.attribute().end(), [](const auto &attr) {
         return attr.name() == "block_size" || attr.name() == "output_dtype";
       }))) {
    if (node.input_size() < 2 || node.input_size() > 3 || node.output_size() != 1)
      return fail("node '" + name + "' (DequantizeLinear) has " +
                  std::to_string(node.input_size()) + " inputs and " +
                  std::to_string(node.output_size()) +
                  " outputs; it takes 2 or 3 inputs and 1 output");
    for (const auto &attr : node.attribute())
      if ((attr.name() != "axis" && attr.name() != "block_size" &&
           attr.name() != "output_dtype") ||
          attr.type() != onnx::AttributeProto::INT)
        return fail("node '" + name + "' (DequantizeLinear) is malformed: attribute '" +
                    attr.name() + "' is not an integer axis, block_size or output_dtype");
    defined.insert(node.output(0));
    return true;
  }
  // Arity, attribute names and types against the operator's schema at the model's opset.
  if (node.op_type() == "If" && defaultDomain) {
    // flattenIfs made it a choice between values: (cond, then outputs, else outputs).
    if (node.input_size() != 1 + 2 * node.output_size())
      return fail("node '" + name + "' (If) is malformed: its branches do not have one output "
                  "for each of its outputs");
    for (const std::string &output : node.output())
      if (!output.empty())
        defined.insert(output);
    return true;
  }
  const onnx::OpSchema *schema =
      onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(opset_), "");
  // ONNX Runtime registers its own LayerNormalization in the default domain from version 1 (its
  // transformer optimizer writes it into opset 11 to 16 models); ONNX's, at 17, has the same
  // inputs, outputs and attributes.
  if (!schema && node.op_type() == "LayerNormalization" && opset_ < 17)
    schema = onnx::OpSchemaRegistry::Schema(node.op_type(), 17, "");
  if (!schema)
    return fail("node '" + name + "' has op type '" + node.op_type() +
                "', which does not exist in ONNX opset " + std::to_string(opset_));
  try {
    schema->Verify(node);
  } catch (const std::exception &e) {
    return fail("node '" + name + "' (" + node.op_type() + ") is malformed: " + e.what());
  }
  if (const onnx::GraphProto *body = loopBody(node)) {
    // Inputs M, cond, carried...; the body's inputs iteration, cond, carried...; its outputs
    // cond, carried..., scans...; the node's outputs carried..., scans...
    const int carried = node.input_size() - 2;
    if (carried < 0 || body->input_size() != carried + 2 || body->output_size() < carried + 1 ||
        node.output_size() != body->output_size() - 1)
      return fail("node '" + name + "' (Loop) is malformed: its body takes " +
                  std::to_string(body->input_size()) + " inputs and gives " +
                  std::to_string(body->output_size()) + " outputs for the node's " +
                  std::to_string(node.input_size()) + " inputs and " +
                  std::to_string(node.output_size()) + " outputs");
    for (const std::string &read : outerReads(node))
      if (!defined.contains(read))
        return fail("node '" + name + "' (Loop) reads '" + read +
                    "' in its body, which no graph input, initializer or node defines");
    // The body's names are its own: one already defined around it, or twice in it, would make
    // one of the two unreadable.
    llvm::StringSet<> inner = defined;
    auto define = [&](const std::string &value) {
      if (value.empty() || (!graphNames_.count(value) && inner.insert(value).second))
        return true;
      return fail("node '" + name + "' (Loop) defines '" + value +
                  "' in its body, which is already defined around it or in it");
    };
    for (const auto &input : body->input())
      if (!define(input.name()))
        return false;
    for (const auto &t : body->initializer())
      if (!define(t.name()))
        return false;
    for (int j = 0; j < body->node_size(); ++j) {
      const onnx::NodeProto &innerNode = body->node(j);
      const std::string innerName = nodeLabel(innerNode, j);
      for (const std::string &output : innerNode.output())
        if (!define(output))
          return false;
      for (const auto &attr : innerNode.attribute())
        if (attr.has_g() || attr.graphs_size() > 0)
          return fail("node '" + name + "' (Loop) holds node '" + innerName + "' (" +
                      innerNode.op_type() + ") with a subgraph of its own in its body, which "
                      "is not supported");
      // Its outputs are defined above; validateNode defines them again, harmlessly.
      for (const std::string &output : innerNode.output())
        inner.erase(output);
      if (!validateNode(innerNode, innerName, inner))
        return false;
    }
  } else {
    for (const auto &attr : node.attribute())
      if (attr.has_g() || attr.graphs_size() > 0)
        return fail("node '" + name + "' has a subgraph attribute '" + attr.name() +
                    "', which is not supported");
  }
  for (const std::string &output : node.output())
    if (!output.empty())
      defined.insert(output);
  return true;
}

// Runs ONNX shape inference in a child process and returns the value types it found. libonnx
// 1.12 can crash or allocate without bound on a malformed graph, so it never runs in the
// compiler's own process: the child has a memory limit and a deadline, and its failure only
// costs type precision (raising then reports what it could not match), never the import.
std::optional<onnx::GraphProto> inferValueInfoIsolated(const onnx::ModelProto &model) {
  constexpr uint64_t kMemoryBudget = 2ull << 30;
  constexpr int kDeadlineSeconds = 300;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return std::nullopt;
  pid_t child = ::fork();
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return std::nullopt;
  }
  if (child == 0) {
    ::close(fds[0]);
    struct rlimit limit;
    if (::getrlimit(RLIMIT_DATA, &limit) == 0) {
      // The budget comes on top of what the process already holds.
      long pages = 0;
      if (FILE *statm = std::fopen("/proc/self/statm", "r")) {
        long size = 0, resident = 0, shared = 0, text = 0, lib = 0;
        if (std::fscanf(statm, "%ld %ld %ld %ld %ld %ld", &size, &resident, &shared, &text, &lib,
                        &pages) != 6)
          pages = 0;
        std::fclose(statm);
      }
      rlim_t want = static_cast<rlim_t>(pages) * ::sysconf(_SC_PAGESIZE) + kMemoryBudget;
      if (limit.rlim_max == RLIM_INFINITY || want < limit.rlim_max)
        limit.rlim_cur = want;
      ::setrlimit(RLIMIT_DATA, &limit);
    }
    std::string bytes;
    try {
      onnx::ModelProto copy;
      // A flattened If (flattenIfs) has no branches left for ONNX's If inference to read.
      for (const auto &node : model.graph().node())
        if (node.op_type() != "If")
          *copy.mutable_graph()->add_node() = node;
      copy.mutable_graph()->mutable_input()->CopyFrom(model.graph().input());
      copy.mutable_graph()->mutable_output()->CopyFrom(model.graph().output());
      copy.mutable_opset_import()->CopyFrom(model.opset_import());
      // A domain the nodes use but the model does not import (ONNX Runtime runs com.microsoft
      // ops without it): imported here, or ONNX's inference gives up on every node after the
      // first of that domain, not only on those it has no schema for.
      std::set<std::string> domains;
      for (const auto &opset : model.opset_import())
        domains.insert(opset.domain().empty() ? "ai.onnx" : opset.domain());
      for (const auto &node : model.graph().node())
        if (!node.domain().empty() && domains.insert(node.domain()).second) {
          onnx::OperatorSetIdProto *opset = copy.add_opset_import();
          opset->set_domain(node.domain());
          opset->set_version(1);
        }
      copy.set_ir_version(model.ir_version());
      // Initializers as types only: shape inference needs their shapes, not their bytes, except
      // for the small integer ones that are shapes themselves.
      for (const auto &t : model.graph().initializer()) {
        bool small = t.data_location() != onnx::TensorProto::EXTERNAL &&
                     (t.data_type() == onnx::TensorProto::INT64 ||
                      t.data_type() == onnx::TensorProto::INT32) &&
                     t.ByteSizeLong() <= 4096;
        if (small) {
          copy.mutable_graph()->add_initializer()->CopyFrom(t);
          continue;
        }
        onnx::ValueInfoProto *vi = copy.mutable_graph()->add_input();
        vi->set_name(t.name());
        auto *tensor = vi->mutable_type()->mutable_tensor_type();
        tensor->set_elem_type(t.data_type());
        for (int64_t d : t.dims())
          tensor->mutable_shape()->add_dim()->set_dim_value(d);
      }
      onnx::ShapeInferenceOptions options{/*check_type=*/false, /*error_mode=*/0,
                                          /*enable_data_propagation=*/false};
      onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(), options);
      onnx::GraphProto result;
      result.mutable_value_info()->CopyFrom(copy.graph().value_info());
      // A Loop body's values join the graph's. Names a body shares with the graph are refused
      // (validateNode); two bodies sharing one keep the type read last, which only guides:
      // the unrolled bodies' shapes are evaluated again.
      for (const auto &node : copy.graph().node())
        if (const onnx::GraphProto *body = loopBody(node)) {
          for (const auto &vi : body->value_info())
            *result.add_value_info() = vi;
          for (const auto &vi : body->output())
            if (vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() != 0)
              *result.add_value_info() = vi;
        }
      bytes = result.SerializeAsString();
    } catch (...) {
      ::_exit(1);
    }
    const char *p = bytes.data();
    size_t left = bytes.size();
    while (left > 0) {
      ssize_t n = ::write(fds[1], p, left);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        ::_exit(1);
      p += n;
      left -= static_cast<size_t>(n);
    }
    ::_exit(0);
  }

  ::close(fds[1]);
  std::string bytes;
  bool timedOut = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kDeadlineSeconds);
  char buffer[1 << 16];
  while (true) {
    auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (remaining.count() <= 0) {
      timedOut = true;
      break;
    }
    struct pollfd pfd = {fds[0], POLLIN, 0};
    int ready = ::poll(&pfd, 1, static_cast<int>(remaining.count()));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0) {
      timedOut = ready == 0;
      break;
    }
    ssize_t n = ::read(fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    bytes.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timedOut)
    ::kill(child, SIGKILL);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (timedOut || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return std::nullopt;
  onnx::GraphProto result;
  if (!result.ParseFromString(bytes))
    return std::nullopt;
  return result;
}

void Importer::inferShapes() {
  // Without data propagation: FoldConstants recovers the static dimensions raising needs from
  // the shape arithmetic itself, the same way whether or not the exporter folded it.
  if (std::optional<onnx::GraphProto> inferred = inferValueInfoIsolated(*model_))
    for (const auto &vi : inferred->value_info())
      types_[vi.name()] = vi.type();
  const onnx::GraphProto &g = model_->graph();
  for (const auto &vi : g.value_info())
    types_[vi.name()] = vi.type();
  for (const auto &node : g.node())
    if (const onnx::GraphProto *body = loopBody(node)) {
      for (const auto &vi : body->value_info())
        types_[vi.name()] = vi.type();
      for (const auto &vi : body->output())
        if (vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() != 0)
          types_[vi.name()] = vi.type();
    }
  for (const auto &vi : g.input())
    types_[vi.name()] = vi.type();
  for (const auto &vi : g.output())
    if (vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() != 0)
      types_[vi.name()] = vi.type();
}

Type Importer::typeFromProto(const onnx::TypeProto &type) {
  if (!type.has_tensor_type())
    return {};
  const auto &tensor = type.tensor_type();
  std::optional<ElementInfo> elem = elementInfo(ctx_, tensor.elem_type());
  if (!elem)
    return {};
  if (!tensor.has_shape())
    return UnrankedTensorType::get(elem->type);
  SmallVector<int64_t> dims;
  for (const auto &d : tensor.shape().dim())
    dims.push_back(d.has_dim_value() && d.dim_value() >= 0 ? d.dim_value() : ShapedType::kDynamic);
  return RankedTensorType::get(dims, elem->type);
}

Type Importer::valueType(const std::string &name) {
  auto it = types_.find(name);
  if (it != types_.end())
    if (Type t = typeFromProto(it->second))
      return t;
  // Shape inference knew nothing: an unranked float tensor keeps the graph importable.
  return UnrankedTensorType::get(Float32Type::get(&ctx_));
}

std::shared_ptr<MappedFile> Importer::externalFile(const std::string &location,
                                                   const std::string &tensor) {
  auto it = externalFiles_.find(location);
  if (it != externalFiles_.end())
    return it->second;
  llvm::SmallString<256> file(llvm::sys::path::parent_path(path_));
  // External data lives beside the model; a path leaving that directory is refused.
  if (location.empty() || llvm::sys::path::is_absolute(location) ||
      llvm::is_contained(
          llvm::make_range(llvm::sys::path::begin(location), llvm::sys::path::end(location)),
          "..")) {
    fail("tensor '" + tensor + "' names external data file '" + location +
         "', which is not a relative path inside the model's directory");
    return nullptr;
  }
  llvm::sys::path::append(file, location);
  std::string openError;
  std::shared_ptr<MappedFile> mapped = MappedFile::open(std::string(file), openError);
  if (!mapped) {
    fail("tensor '" + tensor + "' has its data in an external file: " + openError);
    return nullptr;
  }
  weights_.keepAlive(mapped);
  weights_.addFileMapping(mapped->data(), mapped->size());
  externalFiles_[location] = mapped;
  return mapped;
}

// Finds the bytes of a tensor without copying them when they are raw (inline or external).
bool Importer::tensorBytes(const onnx::TensorProto &t, const std::string &what, const char *&data,
                           uint64_t &bytes, std::shared_ptr<void> &owner) {
  const bool fourBit = isFourBit(t.data_type());
  std::optional<ElementInfo> elem = elementInfo(ctx_, t.data_type());
  if (!elem && !fourBit)
    return fail(what + " has element type " + dataTypeName(t.data_type()) +
                ", which hetc does not support");
  uint64_t count = 1;
  for (int64_t d : t.dims()) {
    if (d < 0)
      return fail(what + " has a negative dimension");
    if (d != 0 && count > UINT64_MAX / 16 / static_cast<uint64_t>(d))
      return fail(what + " has more elements than fit in memory");
    count *= static_cast<uint64_t>(d);
  }
  const uint64_t expected = fourBit ? (count + 1) / 2 : count * elem->bytes;

  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    uint64_t offset = 0, length = expected;
    bool hasLength = false;
    for (const auto &entry : t.external_data()) {
      const std::string &key = entry.key();
      if (key == "location") {
        location = entry.value();
      } else if (key == "offset" || key == "length") {
        char *end = nullptr;
        errno = 0;
        unsigned long long v = std::strtoull(entry.value().c_str(), &end, 10);
        if (errno != 0 || end == entry.value().c_str() || *end != '\0' || entry.value()[0] == '-')
          return fail(what + " has an invalid external data " + key + " '" + entry.value() + "'");
        (key == "offset" ? offset : length) = v;
        hasLength |= key == "length";
      }
    }
    if (hasLength && length != expected)
      return fail(what + " has " + std::to_string(length) + " bytes of external data in '" +
                  location + "', but its shape and type need " + std::to_string(expected));
    std::shared_ptr<MappedFile> file = externalFile(location, t.name());
    if (!file)
      return false;
    if (offset > file->size() || expected > file->size() - offset)
      return fail(what + ": external data at offset " + std::to_string(offset) + " with size " +
                  std::to_string(expected) + " is out of bounds of '" + location + "' (" +
                  std::to_string(file->size()) + " bytes)");
    data = file->data() + offset;
    bytes = expected;
    return true;
  }

  if (t.has_raw_data()) {
    if (t.raw_data().size() != expected)
      return fail(what + " has " + std::to_string(t.raw_data().size()) +
                  " bytes of data, but its shape and type need " + std::to_string(expected));
    data = t.raw_data().data();
    bytes = expected;
    return true;
  }

  // Typed fields: materialise little-endian bytes once.
  auto buffer = std::make_shared<std::vector<char>>(expected);
  if (fourBit) {
    // int32_data holds the packed bytes, one to an entry.
    if (static_cast<uint64_t>(t.int32_data_size()) != expected)
      return fail(what + " has " + std::to_string(t.int32_data_size()) +
                  " packed values, but its shape needs " + std::to_string(expected));
    for (uint64_t i = 0; i < expected; ++i)
      (*buffer)[i] = static_cast<char>(static_cast<uint8_t>(t.int32_data(static_cast<int>(i))));
    data = buffer->data();
    bytes = expected;
    owner = buffer;
    return true;
  }
  auto fill = [&](auto values, auto convert) -> bool {
    if (static_cast<uint64_t>(values.size()) != count)
      return fail(what + " has " + std::to_string(values.size()) + " values, but its shape needs " +
                  std::to_string(count));
    char *out = buffer->data();
    for (auto v : values) {
      auto converted = convert(v);
      std::memcpy(out, &converted, elem->bytes);
      out += elem->bytes;
    }
    return true;
  };
  bool ok = true;
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    ok = fill(t.float_data(), [](float v) { return v; });
    break;
  case onnx::TensorProto::DOUBLE:
    ok = fill(t.double_data(), [](double v) { return v; });
    break;
  case onnx::TensorProto::INT64:
    ok = fill(t.int64_data(), [](int64_t v) { return v; });
    break;
  case onnx::TensorProto::INT32:
    ok = fill(t.int32_data(), [](int32_t v) { return v; });
    break;
  case onnx::TensorProto::INT16:
    ok = fill(t.int32_data(), [](int32_t v) { return static_cast<int16_t>(v); });
    break;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    ok = fill(t.int32_data(), [](int32_t v) { return static_cast<uint16_t>(v); });
    break;
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::BOOL:
    ok = fill(t.int32_data(), [](int32_t v) { return static_cast<uint8_t>(v); });
    break;
  default:
    return fail(what + " has element type " + dataTypeName(t.data_type()) +
                ", which hetc does not support");
  }
  if (!ok)
    return false;
  data = buffer->data();
  bytes = expected;
  owner = buffer;
  return true;
}

Value Importer::importTensor(const onnx::TensorProto &t, const std::string &name,
                             bool isInitializer) {
  std::string what = (isInitializer ? "initializer '" : "constant '") + name + "'";
  const char *data = nullptr;
  uint64_t bytes = 0;
  std::shared_ptr<void> owner;
  if (!tensorBytes(t, what, data, bytes, owner))
    return {};
  // 4-bit tensors are read only as the weights of a DequantizeLinear (importDequantizeLinear).
  std::optional<ElementInfo> info = elementInfo(ctx_, t.data_type());
  if (!info) {
    fail(what + " has element type " + dataTypeName(t.data_type()) +
         ", which hetc reads only as a 2-D weight dequantized by one DequantizeLinear");
    return {};
  }
  const ElementInfo elem = *info;
  SmallVector<int64_t> dims(t.dims().begin(), t.dims().end());
  auto type = RankedTensorType::get(dims, elem.type);
  int64_t count = type.getNumElements();
  Location loc = NameLoc::get(builder_.getStringAttr(name));

  bool asConstant = !isInitializer || !elem.isFloat || count <= kMaxConstantFloatElements;
  if (asConstant) {
    DenseElementsAttr attr;
    if (elem.type.isInteger(1)) {
      SmallVector<bool> values;
      for (int64_t i = 0; i < count; ++i)
        values.push_back(data[i] != 0);
      attr = DenseElementsAttr::get(type, values);
    } else {
      bool detectedSplat = false;
      ArrayRef<char> raw(data, bytes);
      if (!DenseElementsAttr::isValidRawBuffer(type, raw, detectedSplat)) {
        fail(what + " has data that does not match its type");
        return {};
      }
      attr = DenseElementsAttr::getFromRawBuffer(type, raw);
    }
    return builder_.create<hetc::ConstantOp>(loc, attr.getType(), attr);
  }

  hetc::compiler::StoredWeight weight;
  weight.name = name;
  weight.elementType = elem.type.isF32()    ? WeightElementType::F32
                       : elem.type.isF16()  ? WeightElementType::F16
                       : elem.type.isBF16() ? WeightElementType::BF16
                                            : WeightElementType::F32;
  if (elem.type.isF64()) {
    fail(what + " is a DOUBLE weight; hetc supports FLOAT, FLOAT16 and BFLOAT16 weights");
    return {};
  }
  weight.shape.assign(dims.begin(), dims.end());
  weight.data = data;
  weight.bytes = bytes;
  weights_.keepAlive(owner);
  weights_.add(std::move(weight));
  return builder_.create<hetc::WeightOp>(loc, type, name);
}

std::optional<NamedAttribute> Importer::convertAttribute(const onnx::AttributeProto &attr,
                                                         const std::string &nodeName) {
  Attribute value;
  switch (attr.type()) {
  case onnx::AttributeProto::INT:
    value = builder_.getI64IntegerAttr(attr.i());
    break;
  case onnx::AttributeProto::FLOAT:
    value = builder_.getF32FloatAttr(attr.f());
    break;
  case onnx::AttributeProto::STRING:
    value = builder_.getStringAttr(attr.s());
    break;
  case onnx::AttributeProto::INTS: {
    SmallVector<Attribute> items;
    for (int64_t v : attr.ints())
      items.push_back(builder_.getI64IntegerAttr(v));
    value = builder_.getArrayAttr(items);
    break;
  }
  case onnx::AttributeProto::FLOATS: {
    SmallVector<Attribute> items;
    for (float v : attr.floats())
      items.push_back(builder_.getF32FloatAttr(v));
    value = builder_.getArrayAttr(items);
    break;
  }
  case onnx::AttributeProto::STRINGS: {
    SmallVector<Attribute> items;
    for (const std::string &v : attr.strings())
      items.push_back(builder_.getStringAttr(v));
    value = builder_.getArrayAttr(items);
    break;
  }
  case onnx::AttributeProto::TENSOR: {
    OpBuilder::InsertionGuard guard(builder_);
    Value v = importTensor(attr.t(), nodeName + "." + attr.name(), /*isInitializer=*/false);
    if (!v)
      return std::nullopt;
    auto constant = v.getDefiningOp<hetc::ConstantOp>();
    value = constant.getValue();
    constant.erase();
    break;
  }
  default:
    fail("node '" + nodeName + "' has attribute '" + attr.name() +
         "' of a kind hetc does not support (graphs, sparse tensors and types are not)");
    return std::nullopt;
  }
  return NamedAttribute(builder_.getStringAttr(attr.name()), value);
}

bool Importer::importNode(const onnx::NodeProto &node, int index) {
  const std::string name = nodeLabel(node, index);
  Location loc = NameLoc::get(builder_.getStringAttr(name));
  bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
  if (!contribOp(node) && (!defaultDomain || !knownOps().contains(node.op_type())))
    return fail(unsupportedOp(node, name));

  if (node.op_type() == "MatMulNBits")
    return importMatMulNBits(node, name);
  if (node.op_type() == "DequantizeLinear" && quantizedInitializers_.count(node.input(0)))
    return importDequantizeLinear(node, name);

  if (node.op_type() == "Constant") {
    if (node.output_size() != 1 || node.attribute_size() != 1)
      return fail("node '" + name + "' (Constant) must have one output and one attribute");
    const onnx::AttributeProto &attr = node.attribute(0);
    Value v;
    if (attr.name() == "value" && attr.type() == onnx::AttributeProto::TENSOR) {
      v = importTensor(attr.t(), node.output(0), /*isInitializer=*/false);
    } else if (attr.name() == "value_float" || attr.name() == "value_int" ||
               attr.name() == "value_floats" || attr.name() == "value_ints") {
      bool isFloat = attr.name().rfind("value_float", 0) == 0;
      bool isList = attr.name().back() == 's';
      Type elem = isFloat ? Type(builder_.getF32Type()) : Type(builder_.getI64Type());
      SmallVector<int64_t> shape;
      if (isList)
        shape.push_back(isFloat ? attr.floats_size() : attr.ints_size());
      auto type = RankedTensorType::get(shape, elem);
      DenseElementsAttr value;
      if (isFloat) {
        SmallVector<float> fs = isList
                                    ? SmallVector<float>(attr.floats().begin(), attr.floats().end())
                                    : SmallVector<float>{attr.f()};
        value = DenseElementsAttr::get(type, ArrayRef<float>(fs));
      } else {
        SmallVector<int64_t> is = isList
                                      ? SmallVector<int64_t>(attr.ints().begin(), attr.ints().end())
                                      : SmallVector<int64_t>{attr.i()};
        value = DenseElementsAttr::get(type, ArrayRef<int64_t>(is));
      }
      v = builder_.create<hetc::ConstantOp>(loc, value.getType(), value);
    } else {
      return fail("node '" + name + "' (Constant) uses attribute '" + attr.name() +
                  "', which is not supported");
    }
    if (!v)
      return false;
    values_[node.output(0)] = v;
    return true;
  }

  if (loopBody(node))
    return importLoop(node, name);
  SmallVector<Value> operands;
  if (!nodeOperands(node, name, operands))
    return false;
  SmallVector<Type> resultTypes;
  const bool sequences =
      defaultDomain && (makesSequence(node.op_type()) ||
                        (node.op_type() == "Identity" && !operands.empty() &&
                         isa<hetc::OnnxSequenceType>(operands[0].getType())));
  for (const std::string &output : node.output())
    resultTypes.push_back(sequences ? Type(hetc::OnnxSequenceType::get(&ctx_))
                                    : valueType(output));
  SmallVector<NamedAttribute> attrs;
  for (const auto &attr : node.attribute()) {
    std::optional<NamedAttribute> converted = convertAttribute(attr, name);
    if (!converted)
      return false;
    attrs.push_back(*converted);
  }
  if (opset_ < 13 && node.domain().empty() &&
      (node.op_type() == "Softmax" || node.op_type() == "LogSoftmax" ||
       node.op_type() == "Hardmax")) {
    // Before opset 13 these flatten their input to [prod(dims before axis), prod(the rest)]
    // (axis 1 by default); over the last axis that is opset 13's softmax over it, which the
    // rest of hetc reads, so the node says axis -1. Any other axis is refused.
    int64_t axis = 1;
    for (const auto &attr : node.attribute())
      if (attr.name() == "axis")
        axis = attr.i();
    auto type = dyn_cast<RankedTensorType>(operands[0].getType());
    const int64_t rank = type ? type.getRank() : -1;
    llvm::erase_if(attrs, [](NamedAttribute a) { return a.getName() == "axis"; });
    if (rank < 1) {
      // The rank is known once shapes are evaluated: hetc-fold-shapes decides then.
      attrs.push_back(builder_.getNamedAttr("axis", builder_.getI64IntegerAttr(axis)));
      attrs.push_back(builder_.getNamedAttr(hetc::kFlattensBefore13, builder_.getI64IntegerAttr(opset_)));
    } else if ((axis < 0 ? axis + rank : axis) == rank - 1) {
      attrs.push_back(builder_.getNamedAttr("axis", builder_.getI64IntegerAttr(-1)));
    } else {
      return fail(hetc::softmaxBefore13Refusal(name, node.op_type(), opset_, axis, rank));
    }
  }
  DictionaryAttr onnxAttrs = attrs.empty() ? DictionaryAttr() : builder_.getDictionaryAttr(attrs);
  auto op = builder_.create<hetc::OnnxNodeOp>(loc, resultTypes, node.op_type(), name, onnxAttrs,
                                              operands);
  for (auto [i, output] : llvm::enumerate(node.output()))
    if (!output.empty())
      values_[output] = op->getResult(i);
  return true;
}

bool Importer::nodeOperands(const onnx::NodeProto &node, const std::string &name,
                            SmallVector<Value> &operands) {
  for (const std::string &input : node.input()) {
    if (input.empty()) {
      if (!none_)
        none_ = builder_.create<hetc::OnnxNoneOp>(builder_.getUnknownLoc(), builder_.getNoneType());
      operands.push_back(none_);
      continue;
    }
    auto it = values_.find(input);
    if (it == values_.end())
      return fail("node '" + name + "' (" + node.op_type() + ") reads '" + input +
                  "', which no graph input, initializer or node defines");
    operands.push_back(it->second);
  }
  return true;
}

// A Loop becomes hetc.onnx.loop with its body as a region: block arguments for the body's
// inputs, the body's nodes imported as the graph's are, and hetc.onnx.yield of its outputs.
// Carried values keep their element type but not their shape, which may change from one
// iteration to the next; hetc-fold-shapes unrolls the loop and the shapes come back.
bool Importer::importLoop(const onnx::NodeProto &node, const std::string &name) {
  const onnx::GraphProto &body = *loopBody(node);
  Location loc = NameLoc::get(builder_.getStringAttr(name));
  SmallVector<Value> operands;
  if (!nodeOperands(node, name, operands))
    return false;
  auto unranked = [](Type t) -> Type {
    if (auto shaped = dyn_cast<ShapedType>(t))
      return UnrankedTensorType::get(shaped.getElementType());
    return t; // a sequence
  };
  const int carried = node.input_size() - 2;
  auto region = std::make_unique<Region>();
  Block *block = new Block();
  region->push_back(block);
  SmallVector<Type> argTypes{RankedTensorType::get({}, builder_.getI64Type()),
                             RankedTensorType::get({}, builder_.getI1Type())};
  for (int i = 0; i < carried; ++i)
    argTypes.push_back(unranked(operands[2 + i].getType()));
  for (auto [i, input] : llvm::enumerate(body.input()))
    values_[input.name()] = block->addArgument(argTypes[i], loc);

  // The body's values are its own: its none, and its names forgotten after it.
  const OpBuilder::InsertPoint outer = builder_.saveInsertionPoint();
  Value outerNone = none_;
  none_ = nullptr;
  builder_.setInsertionPointToEnd(block);
  bool ok = true;
  for (const auto &t : body.initializer()) {
    Value v = importTensor(t, t.name(), /*isInitializer=*/false);
    if (!v) {
      ok = false;
      break;
    }
    values_[t.name()] = v;
  }
  for (int j = 0; ok && j < body.node_size(); ++j)
    ok = importNode(body.node(j), j);
  SmallVector<Value> yielded;
  for (int j = 0; ok && j < body.output_size(); ++j) {
    auto it = values_.find(body.output(j).name());
    if (it == values_.end())
      ok = fail("node '" + name + "' (Loop): its body's output '" + body.output(j).name() +
                "' is not defined by any node or input of the body");
    else
      yielded.push_back(it->second);
  }
  if (ok)
    builder_.create<hetc::OnnxYieldOp>(loc, yielded);
  builder_.restoreInsertionPoint(outer);
  none_ = outerNone;
  for (const std::string &name : definedNames(body))
    values_.erase(name);
  if (!ok)
    return false;

  SmallVector<Type> resultTypes(argTypes.begin() + 2, argTypes.end());
  for (size_t j = 1 + carried; j < yielded.size(); ++j)
    resultTypes.push_back(unranked(yielded[j].getType()));
  auto loop = builder_.create<hetc::OnnxLoopOp>(loc, resultTypes, name, operands);
  loop.getBody().takeBody(*region);
  for (auto [i, output] : llvm::enumerate(node.output()))
    if (!output.empty())
      values_[output] = loop->getResult(i);
  return true;
}

bool Importer::tensorValues(const onnx::TensorProto &t, const std::string &what, bool integers,
                            std::vector<float> &out) {
  const char *data = nullptr;
  uint64_t bytes = 0;
  std::shared_ptr<void> owner;
  if (!tensorBytes(t, what, data, bytes, owner))
    return false;
  out.clear();
  if (integers &&
      (t.data_type() == onnx::TensorProto::INT8 || t.data_type() == onnx::TensorProto::UINT8)) {
    for (uint64_t i = 0; i < bytes; ++i)
      out.push_back(t.data_type() == onnx::TensorProto::INT8
                        ? static_cast<float>(reinterpret_cast<const int8_t *>(data)[i])
                        : static_cast<float>(reinterpret_cast<const uint8_t *>(data)[i]));
    return true;
  }
  hetc::compiler::StoredWeight view;
  view.elementType = t.data_type() == onnx::TensorProto::FLOAT      ? WeightElementType::F32
                     : t.data_type() == onnx::TensorProto::FLOAT16  ? WeightElementType::F16
                     : t.data_type() == onnx::TensorProto::BFLOAT16 ? WeightElementType::BF16
                                                                    : WeightElementType::I64;
  if (view.elementType == WeightElementType::I64)
    return fail(what + " must be float, float16 or bfloat16");
  view.data = data;
  view.bytes = bytes;
  out = view.toFloats();
  return true;
}

// ONNX Runtime's MatMulNBits (com.microsoft): Y = A x dequantize(B)^T (+ bias), B [N, K] in 4-bit
// blocks along K with a scale per block and an optional zero point (8 without). It becomes the
// float graph the raising recognises, MatMul(A, Transpose(W)) (+ Add(bias)), over one stored
// weight W [N, K] that keeps B's bytes, scales and zero points (WeightElementType::Int4Blocks):
// the plan stores it in 4 bits whatever --weights says.
bool Importer::importMatMulNBits(const onnx::NodeProto &node, const std::string &name) {
  const std::string what = "node '" + name + "' (MatMulNBits)";
  std::map<std::string, int64_t> ints;
  for (const auto &attr : node.attribute())
    if (attr.type() == onnx::AttributeProto::INT)
      ints[attr.name()] = attr.i();
  for (const char *key : {"K", "N", "block_size"})
    if (!ints.count(key) || ints[key] <= 0)
      return fail(what + " has no positive attribute " + key);
  const int64_t bits = ints.count("bits") ? ints["bits"] : 4;
  if (bits != 4)
    return fail(what + " has bits = " + std::to_string(bits) + "; hetc imports 4-bit weights");
  const uint64_t k = ints["K"], n = ints["N"], blockSize = ints["block_size"];
  if (!int4BlockStorable(blockSize))
    return fail(what + " has block_size " + std::to_string(blockSize) + "; " + kInt4BlocksStorable);
  if (node.input_size() > 4 && !node.input(4).empty())
    return fail(what + " has g_idx (act-order); hetc imports blocks in K's order only");
  const uint64_t blocks = (k + blockSize - 1) / blockSize;

  auto elements = [](const onnx::TensorProto &t) {
    uint64_t count = 1;
    for (int64_t d : t.dims())
      count *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
    return count;
  };
  const onnx::TensorProto *b = claimedInitializer(node, 1);
  const onnx::TensorProto *scalesProto = claimedInitializer(node, 2);
  if (!b || !scalesProto)
    return fail(what + ": B and scales must be initializers");
  if (b->data_type() != onnx::TensorProto::UINT8 || b->dims_size() != 3 ||
      static_cast<uint64_t>(b->dims(0)) != n || static_cast<uint64_t>(b->dims(1)) != blocks ||
      static_cast<uint64_t>(b->dims(2)) != blockSize / 2)
    return fail(what + ": B must be uint8 [N, ceil(K / block_size), block_size / 2] = [" +
                std::to_string(n) + ", " + std::to_string(blocks) + ", " +
                std::to_string(blockSize / 2) + "]");
  const char *bData = nullptr;
  uint64_t bBytes = 0;
  std::shared_ptr<void> bOwner;
  if (!tensorBytes(*b, what + " B", bData, bBytes, bOwner))
    return false;
  weights_.keepAlive(bOwner);

  // Scales and float zero points: float32, float16 or bfloat16, [N * blocks] in any shape.
  auto floats = [&](const onnx::TensorProto &t, const std::string &role,
                    std::vector<float> &out) -> bool {
    if (elements(t) != n * blocks)
      return fail(what + ": " + role + " has " + std::to_string(elements(t)) +
                  " elements; N x blocks is " + std::to_string(n * blocks));
    return tensorValues(t, what + " " + role, false, out);
  };
  auto int4 = std::make_shared<hetc::compiler::Int4Blocks>();
  int4->blockSize = blockSize;
  int4->blocks = blocks;
  if (!floats(*scalesProto, "scales", int4->scales))
    return false;
  int4->zeroPoints.assign(n * blocks, 8);
  if (node.input_size() > 3 && !node.input(3).empty()) {
    const onnx::TensorProto *zp = claimedInitializer(node, 3);
    if (!zp)
      return fail(what + ": zero_points must be an initializer");
    if (zp->data_type() == onnx::TensorProto::UINT8) {
      // Packed two to a byte, each row's blocks from a new byte, the even block low.
      const uint64_t rowBytes = (blocks + 1) / 2;
      if (elements(*zp) != n * rowBytes)
        return fail(what + ": uint8 zero_points has " + std::to_string(elements(*zp)) +
                    " bytes; N x ceil(blocks / 2) is " + std::to_string(n * rowBytes));
      const char *data = nullptr;
      uint64_t bytes = 0;
      std::shared_ptr<void> owner;
      if (!tensorBytes(*zp, what + " zero_points", data, bytes, owner))
        return false;
      const auto *packed = reinterpret_cast<const uint8_t *>(data);
      for (uint64_t row = 0; row < n; ++row)
        for (uint64_t block = 0; block < blocks; ++block) {
          const uint8_t byte = packed[row * rowBytes + block / 2];
          int4->zeroPoints[row * blocks + block] = block % 2 == 0 ? byte & 0x0f : byte >> 4;
        }
    } else {
      std::vector<float> values;
      if (!floats(*zp, "zero_points", values))
        return false;
      for (size_t i = 0; i < values.size(); ++i) {
        if (!(values[i] >= 0.0f && values[i] <= 15.0f) || values[i] != std::floor(values[i]))
          return fail(what + ": zero point " + std::to_string(values[i]) + " of block " +
                      std::to_string(i) + " is not an integer in 0..15");
        int4->zeroPoints[i] = static_cast<uint8_t>(values[i]);
      }
    }
  }

  Location loc = NameLoc::get(builder_.getStringAttr(name));
  auto it = values_.find(node.input(0));
  if (it == values_.end())
    return fail(what + " reads '" + node.input(0) + "', which no graph input or node defines");
  Value a = it->second;

  // A's features must be K. A may be float16 (the builder's CUDA form, transformers.js's
  // q4f16 files): the weight is float32 to the IR, and every LLM op computes in float32
  // whatever its operands' element types.
  auto aType = dyn_cast<RankedTensorType>(a.getType());
  if (aType && !isa<FloatType>(aType.getElementType()))
    return fail(what + " reads activations that are not floats");
  if (aType && aType.getRank() >= 1 && !aType.isDynamicDim(aType.getRank() - 1) &&
      static_cast<uint64_t>(aType.getDimSize(aType.getRank() - 1)) != k)
    return fail(what + " has K = " + std::to_string(k) + " but its input A has " +
                std::to_string(aType.getDimSize(aType.getRank() - 1)) + " features");

  hetc::compiler::StoredWeight weight;
  // Named after B; B read again by another node with other scales gets its own entry.
  weight.name = weights_.find(node.input(1)) ? node.input(1) + "@" + name : node.input(1);
  weight.elementType = WeightElementType::Int4Blocks;
  weight.shape = {static_cast<int64_t>(n), static_cast<int64_t>(k)};
  weight.data = bData;
  weight.bytes = bBytes;
  weight.int4 = std::move(int4);
  Value wt = transposedInt4Weight(loc, name, std::move(weight));
  // Y's type: A's with its last dimension N.
  Type yType = valueType(node.output(0));
  if (auto ranked = dyn_cast<RankedTensorType>(a.getType()); ranked && ranked.getRank() >= 1) {
    SmallVector<int64_t> dims(ranked.getShape());
    dims.back() = static_cast<int64_t>(n);
    yType = RankedTensorType::get(dims, ranked.getElementType());
  }
  Value y = builder_
                .create<hetc::OnnxNodeOp>(loc, TypeRange{yType}, "MatMul", name + "/MatMul",
                                          DictionaryAttr(), ValueRange{a, wt})
                ->getResult(0);
  if (node.input_size() > 5 && !node.input(5).empty()) {
    auto bias = values_.find(node.input(5));
    if (bias == values_.end())
      return fail(what + " reads bias '" + node.input(5) + "', which nothing defines");
    y = builder_
            .create<hetc::OnnxNodeOp>(loc, TypeRange{yType}, "Add", name + "/Add", DictionaryAttr(),
                                      ValueRange{y, bias->second})
            ->getResult(0);
  }
  values_[node.output(0)] = y;
  return true;
}

// ONNX's DequantizeLinear of a 2-D weight initializer x [rows, cols] (int8 or uint8, and from
// opset 21 int4 or uint4): W = (x - zero_point) * scale, with one scale for all, a scale per index
// of `axis`, or (block_size B) a scale per B consecutive indices of `axis` and each index of the
// other. W is a MatMul's B [K, N] in every export hetc knows, so what the plan can keep in its
// precision is:
//  - 8 bits, per tensor or per axis, zero point 0 (int8) or 128 (uint8): an Int8Channels weight,
//    stored in int8 (LinearInt8N16K4) when a linear reads it along its output columns;
//  - 4 bits whose scale and zero point hold over runs of k (blocked along axis 0 by a block the
//    4-bit layout takes, per axis 1, or per tensor): an Int4Blocks weight [cols, rows] as
//    MatMulNBits' B, seen transposed, stored in 4 bits (LinearInt4N16K8) when a linear reads it.
// Anything else (other zero points, scales along K, blocks along N, a block the layout does not
// take) becomes a float weight of exactly the same values, which the plan stores as --weights
// says; `hetc inspect` shows which.
bool Importer::importDequantizeLinear(const onnx::NodeProto &node, const std::string &name) {
  const std::string what = "node '" + name + "' (DequantizeLinear)";
  const onnx::TensorProto *x = claimedInitializer(node, 0);
  const onnx::TensorProto *scaleProto = claimedInitializer(node, 1);
  if (!x || !scaleProto)
    return fail(what + ": its scale must be an initializer read by DequantizeLinears of weights "
                       "only");
  // A zero point named but not claimed (a Constant's, a graph input, read by other nodes too)
  // would otherwise be taken as absent.
  if (node.input_size() > 2 && !node.input(2).empty() && !claimedInitializer(node, 2))
    return fail(what + ": its zero point must be an initializer read by DequantizeLinears of "
                       "weights only");
  if (x->dims_size() != 2 ||
      (x->data_type() != onnx::TensorProto::INT8 && x->data_type() != onnx::TensorProto::UINT8 &&
       !isFourBit(x->data_type())))
    return fail(what + ": its input must be a 2-D int8, uint8, int4 or uint4 initializer");
  const int64_t rows = x->dims(0), cols = x->dims(1);
  if (rows <= 0 || cols <= 0)
    return fail(what + ": its input has an empty dimension");
  int64_t axis = 1, blockSize = 0;
  for (const auto &attr : node.attribute()) {
    if (attr.name() == "axis")
      axis = attr.i();
    else if (attr.name() == "block_size")
      blockSize = attr.i();
    else if (attr.name() == "output_dtype" && attr.i() != 0 && attr.i() != onnx::TensorProto::FLOAT)
      return fail(what + " dequantizes to " + dataTypeName(static_cast<int32_t>(attr.i())) +
                  "; hetc imports float32 weights");
  }
  if (axis < 0)
    axis += 2;
  if (axis != 0 && axis != 1)
    return fail(what + " has axis " + std::to_string(axis) + " for a 2-D input");
  if (blockSize < 0)
    return fail(what + " has a negative block_size " + std::to_string(blockSize));

  const int32_t type = x->data_type();
  const bool fourBit = isFourBit(type);
  const bool isUnsigned = type == onnx::TensorProto::UINT8 || type == kDataTypeUint4;
  // The integers of an x-typed tensor (x itself, or its zero point), by element index.
  auto integers = [&](const onnx::TensorProto &t, const std::string &role, const char *&data,
                      uint64_t &count, std::shared_ptr<void> &owner) {
    if (t.data_type() != type)
      return fail(what + ": its " + role + " is " + dataTypeName(t.data_type()) + ", its input " +
                  dataTypeName(type));
    uint64_t bytes = 0;
    if (!tensorBytes(t, what + " " + role, data, bytes, owner))
      return false;
    count = 1;
    for (int64_t d : t.dims())
      count *= static_cast<uint64_t>(d);
    return true;
  };
  auto integerAt = [&](const char *data, uint64_t at) -> int32_t {
    const auto *bytes = reinterpret_cast<const uint8_t *>(data);
    if (!fourBit)
      return isUnsigned ? bytes[at] : static_cast<int8_t>(bytes[at]);
    const int32_t nibble = (bytes[at / 2] >> (at % 2 ? 4 : 0)) & 0x0F;
    return isUnsigned ? nibble : (nibble ^ 8) - 8; // sign-extended
  };
  const char *data = nullptr;
  uint64_t count = 0;
  std::shared_ptr<void> owner;
  if (!integers(*x, "input", data, count, owner))
    return false;

  // The scales, and the index of element (i, j)'s.
  std::vector<float> scales;
  if (!tensorValues(*scaleProto, what + " scale", false, scales))
    return false;
  const int64_t along = axis == 0 ? rows : cols;
  const int64_t blocksAlong = blockSize ? (along - 1) / blockSize + 1 : 0;
  const bool perTensor = !blockSize && scales.size() == 1;
  if (blockSize) {
    const std::vector<int64_t> expected = axis == 0 ? std::vector<int64_t>{blocksAlong, cols}
                                                    : std::vector<int64_t>{rows, blocksAlong};
    if (std::vector<int64_t>(scaleProto->dims().begin(), scaleProto->dims().end()) != expected)
      return fail(what + " has block_size " + std::to_string(blockSize) + " along axis " +
                  std::to_string(axis) + ", so its scale must be [" + std::to_string(expected[0]) +
                  ", " + std::to_string(expected[1]) + "]");
  } else if (!perTensor && static_cast<int64_t>(scales.size()) != along) {
    return fail(what + " has " + std::to_string(scales.size()) + " scales; its input has " +
                std::to_string(along) + " along axis " + std::to_string(axis));
  }
  auto scaleIndex = [&](int64_t i, int64_t j) -> size_t {
    if (blockSize)
      return static_cast<size_t>(axis == 0 ? (i / blockSize) * cols + j
                                           : i * blocksAlong + j / blockSize);
    return perTensor ? 0 : static_cast<size_t>(axis == 0 ? i : j);
  };

  // The zero points, one per scale: 0 when absent (uint8's and uint4's too).
  std::vector<int32_t> zeroPoints(scales.size(), 0);
  if (const onnx::TensorProto *zp = claimedInitializer(node, 2)) {
    const char *zpData = nullptr;
    uint64_t zpCount = 0;
    std::shared_ptr<void> zpOwner;
    if (!integers(*zp, "zero point", zpData, zpCount, zpOwner))
      return false;
    if (zpCount != scales.size())
      return fail(what + " has " + std::to_string(zpCount) + " zero points for " +
                  std::to_string(scales.size()) + " scales");
    for (uint64_t i = 0; i < zpCount; ++i)
      zeroPoints[i] = integerAt(zpData, i);
  }

  hetc::compiler::StoredWeight weight;
  weight.name = node.input(0);
  weight.shape = {rows, cols};
  Location loc = NameLoc::get(builder_.getStringAttr(name));
  const auto f32Type = RankedTensorType::get({rows, cols}, builder_.getF32Type());

  if (fourBit && (blockSize ? axis == 0 && (blockSize >= rows ||
                                            int4BlockStorable(static_cast<uint64_t>(blockSize)))
                            : perTensor || axis == 1)) {
    // MatMulNBits' form of W^T: row j of [cols, rows] holds column j's k in blocks, u = x + 8
    // for int4 (with its zero points moved by 8 too), so that every u and zero point is 0..15.
    auto int4 = std::make_shared<hetc::compiler::Int4Blocks>();
    // One block over all of K (also a block_size past K) is a block just covering it.
    int4->blockSize = blockSize && blockSize < rows
                          ? static_cast<uint64_t>(blockSize)
                          : int4BlockCovering(static_cast<uint64_t>(rows));
    int4->blocks = (static_cast<uint64_t>(rows) + int4->blockSize - 1) / int4->blockSize;
    const int32_t shift = isUnsigned ? 0 : 8;
    const uint64_t blockBytes = int4->blockSize / 2;
    auto packed = std::make_shared<std::vector<uint8_t>>(static_cast<uint64_t>(cols) *
                                                         int4->blocks * blockBytes);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const uint64_t k = static_cast<uint64_t>(i) % int4->blockSize;
        const uint64_t at =
            (static_cast<uint64_t>(j) * int4->blocks + i / int4->blockSize) * blockBytes + k / 2;
        (*packed)[at] |= static_cast<uint8_t>(
            (integerAt(data, static_cast<uint64_t>(i * cols + j)) + shift) << (k % 2 ? 4 : 0));
      }
    for (int64_t j = 0; j < cols; ++j)
      for (uint64_t b = 0; b < int4->blocks; ++b) {
        const size_t at = scaleIndex(static_cast<int64_t>(b * int4->blockSize), j);
        int4->scales.push_back(scales[at]);
        int4->zeroPoints.push_back(static_cast<uint8_t>(zeroPoints[at] + shift));
      }
    weight.shape = {cols, rows};
    weight.elementType = WeightElementType::Int4Blocks;
    weight.data = packed->data();
    weight.bytes = packed->size();
    weight.int4 = std::move(int4);
    weights_.keepAlive(packed);
    values_[node.output(0)] = transposedInt4Weight(loc, name, std::move(weight));
    return true;
  }

  const bool int8ZeroPoints = std::all_of(zeroPoints.begin(), zeroPoints.end(),
                                          [&](int32_t z) { return z == (isUnsigned ? 128 : 0); });
  // uint8 without a zero point is around 0, not 128.
  if (!fourBit && !blockSize && int8ZeroPoints && (!isUnsigned || claimedInitializer(node, 2))) {
    auto int8 = std::make_shared<hetc::compiler::Int8Channels>();
    int8->axis = perTensor ? -1 : axis;
    int8->scales = std::move(scales);
    weight.elementType = WeightElementType::Int8Channels;
    weight.int8 = std::move(int8);
    if (!isUnsigned) {
      weight.data = data;
      weight.bytes = count;
      weights_.keepAlive(owner);
    } else {
      // uint8 around 128 is int8 around 0.
      auto shifted = std::make_shared<std::vector<int8_t>>(count);
      for (uint64_t i = 0; i < count; ++i)
        (*shifted)[i] = static_cast<int8_t>(integerAt(data, i) - 128);
      weight.data = shifted->data();
      weight.bytes = count;
      weights_.keepAlive(shifted);
    }
  } else {
    auto floats = std::make_shared<std::vector<float>>(count);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const uint64_t at = static_cast<uint64_t>(i * cols + j);
        const size_t s = scaleIndex(i, j);
        (*floats)[at] = static_cast<float>(integerAt(data, at) - zeroPoints[s]) * scales[s];
      }
    weight.elementType = WeightElementType::F32;
    weight.data = floats->data();
    weight.bytes = count * sizeof(float);
    weights_.keepAlive(floats);
  }
  weights_.add(std::move(weight));
  values_[node.output(0)] = builder_.create<hetc::WeightOp>(loc, f32Type, node.input(0));
  return true;
}

const onnx::TensorProto *Importer::claimedInitializer(const onnx::NodeProto &node,
                                                      int input) const {
  if (input >= node.input_size() || node.input(input).empty())
    return nullptr;
  auto it = quantizedInitializers_.find(node.input(input));
  return it == quantizedInitializers_.end() ? nullptr : it->second;
}

// Stores a 4-bit weight (Int4Blocks, [N, K]) and gives the IR's [K, N] float32 view of it:
// hetc.weight, then an ONNX Transpose, the form the raising reads as a linear's weight.
Value Importer::transposedInt4Weight(Location loc, const std::string &name,
                                     hetc::compiler::StoredWeight weight) {
  const int64_t n = weight.shape[0], k = weight.shape[1];
  const std::string storedName = weight.name;
  weights_.add(std::move(weight));
  Type f32 = builder_.getF32Type();
  Value w = builder_.create<hetc::WeightOp>(loc, RankedTensorType::get({n, k}, f32), storedName);
  NamedAttribute perm(
      builder_.getStringAttr("perm"),
      builder_.getArrayAttr({builder_.getI64IntegerAttr(1), builder_.getI64IntegerAttr(0)}));
  return builder_
      .create<hetc::OnnxNodeOp>(loc, TypeRange{RankedTensorType::get({k, n}, f32)}, "Transpose",
                                name + "/Transpose", builder_.getDictionaryAttr({perm}),
                                ValueRange{w})
      ->getResult(0);
}

// The stacked KV value `name` of its key and value halves: Concat(Unsqueeze(key, [0]),
// Unsqueeze(value, [0]), axis 0), as ONNX nodes the raising reads back (RaiseContribOps).
Value Importer::stackHalves(Location loc, const std::string &name, Value key, Value value,
                            RankedTensorType stacked) {
  SmallVector<int64_t> one(stacked.getShape());
  one[0] = 1;
  auto partType = RankedTensorType::get(one, stacked.getElementType());
  auto axes = builder_.getDictionaryAttr(
      builder_.getNamedAttr("axes", builder_.getArrayAttr({builder_.getI64IntegerAttr(0)})));
  SmallVector<Value> parts;
  for (auto [half, v] : llvm::enumerate(SmallVector<Value>{key, value}))
    parts.push_back(builder_
                        .create<hetc::OnnxNodeOp>(loc, TypeRange{partType}, "Unsqueeze",
                                                  name + (half ? "/stack_value" : "/stack_key"),
                                                  axes, ValueRange{v})
                        ->getResult(0));
  return builder_
      .create<hetc::OnnxNodeOp>(
          loc, TypeRange{stacked}, "Concat", name + "/stack",
          builder_.getDictionaryAttr(
              builder_.getNamedAttr("axis", builder_.getI64IntegerAttr(0))),
          parts)
      ->getResult(0);
}

// Half `half` (0: the key, 1: the value) of the stacked KV value `stacked`: Gather(stacked,
// half) on axis 0.
Value Importer::takeHalf(Location loc, const std::string &name, Value stacked, int64_t half) {
  auto indexType = RankedTensorType::get({}, builder_.getI64Type());
  Value index = builder_.create<hetc::ConstantOp>(
      loc, indexType, DenseElementsAttr::get(indexType, ArrayRef<int64_t>{half}));
  Type type = stacked.getType();
  if (auto ranked = dyn_cast<RankedTensorType>(type))
    type = RankedTensorType::get(ranked.getShape().drop_front(), ranked.getElementType());
  return builder_
      .create<hetc::OnnxNodeOp>(
          loc, TypeRange{type}, "Gather", name + (half ? "/value" : "/key"),
          builder_.getDictionaryAttr(
              builder_.getNamedAttr("axis", builder_.getI64IntegerAttr(0))),
          ValueRange{stacked, index})
      ->getResult(0);
}

OwningOpRef<ModuleOp> Importer::run() {
  // Ifs first: a merged decoder's nodes (and its mixture-of-experts router, if any) are inside
  // one.
  if (!parse() || !liftSearchDecoder() || !checkOpsets() || !flattenIfs() || !readDynamicQuantization() ||
      !checkDecoderSignature() || !sortNodes() ||
      !validateGraph())
    return nullptr;
  inferShapes();
  weights_.keepAlive(model_);
  const onnx::GraphProto &g = model_->graph();

  llvm::StringSet<> initializerNames;
  for (const auto &t : g.initializer())
    initializerNames.insert(t.name());

  Location fileLoc = FileLineColLoc::get(builder_.getStringAttr(path_), 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  SmallVector<SmallVector<std::string>> argDims; // each input's dim_params ("" where none)
  SmallVector<std::pair<std::string, RankedTensorType>> stackedInputs;
  for (const auto &input : g.input()) {
    if (initializerNames.contains(input.name()))
      continue; // an IR < 4 model lists initializers as inputs too
    Type t = typeFromProto(input.type());
    if (!t) {
      fail("graph input '" + input.name() + "' is not a tensor of a supported element type");
      return nullptr;
    }
    SmallVector<std::string> dims;
    if (input.type().tensor_type().has_shape())
      for (const auto &d : input.type().tensor_type().shape().dim())
        dims.push_back(d.has_dim_param() && !d.has_dim_value() ? d.dim_param() : std::string());
    if (isStackedKv(input)) {
      // Two arguments, the key and the value; their stack stands for the input in the graph.
      auto stacked = cast<RankedTensorType>(t);
      auto half = RankedTensorType::get(stacked.getShape().drop_front(), stacked.getElementType());
      for (const char *part : {".key", ".value"}) {
        argTypes.push_back(half);
        argNames.push_back(input.name() + part);
        argDims.push_back(SmallVector<std::string>(dims.begin() + 1, dims.end()));
      }
      stackedInputs.emplace_back(input.name(), stacked);
      continue;
    }
    argTypes.push_back(t);
    argNames.push_back(input.name());
    argDims.push_back(std::move(dims));
  }
  builder_.setInsertionPointToEnd(module->getBody());
  auto func =
      builder_.create<func::FuncOp>(fileLoc, "main", builder_.getFunctionType(argTypes, {}));
  Block *body = func.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    func.setArgAttr(i, "hetc.name", builder_.getStringAttr(name));
    // The symbolic dimensions by name: inputs sharing a dim_param share the dimension.
    if (llvm::any_of(argDims[i], [](const std::string &d) { return !d.empty(); })) {
      SmallVector<Attribute> dims;
      for (const std::string &d : argDims[i])
        dims.push_back(builder_.getStringAttr(d));
      func.setArgAttr(i, "hetc.dims", builder_.getArrayAttr(dims));
    }
    values_[name] = body->getArgument(i);
  }
  builder_.setInsertionPointToEnd(body);
  for (const auto &[name, type] : stackedInputs)
    values_[name] = stackHalves(fileLoc, name, values_[name + ".key"], values_[name + ".value"],
                                type);

  std::map<std::string, const onnx::TensorProto *> initializers;
  for (const auto &t : g.initializer())
    initializers[t.name()] = &t;
  std::map<std::string, int> readers;
  for (const auto &node : g.node()) {
    for (const std::string &input : node.input())
      ++readers[input];
    for (const std::string &read : outerReads(node))
      ++readers[read];
  }
  // A weight's DequantizeLinear: an 8- or 4-bit 2-D initializer x that nothing else reads. Its
  // scale and zero point are claimed with it when only such DequantizeLinears read them (tools that
  // share equal constants make one zero point serve many weights).
  std::map<std::string, int> weightDequantizeReads;
  for (const auto &node : g.node()) {
    if (node.domain() == "com.microsoft" && node.op_type() == "MatMulNBits")
      for (int i = 1; i <= 3 && i < node.input_size(); ++i)
        if (!node.input(i).empty())
          quantizedInitializers_[node.input(i)] = nullptr;
    const bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
    if (!defaultDomain || node.op_type() != "DequantizeLinear" || node.input_size() < 2)
      continue;
    auto x = initializers.find(node.input(0));
    if (x != initializers.end() && x->second->dims_size() == 2 && readers[node.input(0)] == 1 &&
        (x->second->data_type() == onnx::TensorProto::INT8 ||
         x->second->data_type() == onnx::TensorProto::UINT8 || isFourBit(x->second->data_type()))) {
      quantizedInitializers_[node.input(0)] = nullptr;
      for (int i = 1; i < 3 && i < node.input_size(); ++i)
        if (!node.input(i).empty())
          ++weightDequantizeReads[node.input(i)];
    }
  }
  for (const auto &[name, reads] : weightDequantizeReads)
    if (initializers.count(name) && readers[name] == reads)
      quantizedInitializers_[name] = nullptr;
  for (const auto &t : g.initializer()) {
    if (auto it = quantizedInitializers_.find(t.name()); it != quantizedInitializers_.end()) {
      it->second = &t;
      continue;
    }
    Value v = importTensor(t, t.name(), /*isInitializer=*/true);
    if (!v)
      return nullptr;
    values_[t.name()] = v;
  }
  for (int i = 0; i < g.node_size(); ++i)
    if (!importNode(g.node(i), fileIndex_[i]))
      return nullptr;

  SmallVector<Value> results;
  SmallVector<std::string> resultNames;
  llvm::SetVector<OnnxNodeOp> outputCasts;
  for (const auto &output : g.output()) {
    auto it = values_.find(output.name());
    if (it == values_.end()) {
      fail("graph output '" + output.name() + "' is not defined by any node, input or initializer");
      return nullptr;
    }
    if (isStackedKv(output)) {
      // Its key and its value, as two results.
      for (int64_t half = 0; half < 2; ++half) {
        results.push_back(takeHalf(fileLoc, output.name(), it->second, half));
        resultNames.push_back(output.name() + (half ? ".value" : ".key"));
      }
      continue;
    }
    // A Cast between float types that nothing but the outputs reads (onnxconverter-common's
    // keep_io_types: float32 outputs of a float16 graph) is left out: hetc writes float32
    // logits and keeps its own KV cache whatever the file's types, and the present values and
    // logits are then read as in a graph without it. (The Cast after a float input stays: the
    // raising looks through it, skipFloatCasts.)
    Value result = it->second;
    if (auto cast = result.getDefiningOp<OnnxNodeOp>(); cast && isFloatCast(cast) &&
                                                        result.use_empty()) {
      outputCasts.insert(cast);
      result = cast->getOperand(0);
    }
    results.push_back(result);
    resultNames.push_back(output.name());
  }
  builder_.create<func::ReturnOp>(fileLoc, results);
  for (OnnxNodeOp cast : outputCasts)
    cast->erase();
  if (!importNotes_.empty()) {
    SmallVector<Attribute> notes;
    for (const std::string &note : importNotes_)
      notes.push_back(builder_.getStringAttr(note));
    (*module)->setAttr(hetc::kImportNotes, builder_.getArrayAttr(notes));
  }
  func.setType(builder_.getFunctionType(argTypes, ValueRange(results).getTypes()));
  for (auto [i, name] : llvm::enumerate(resultNames))
    func.setResultAttr(i, "hetc.name", builder_.getStringAttr(name));
  return module;
}

} // namespace

OwningOpRef<ModuleOp> importOnnxModel(const std::string &path, MLIRContext &context,
                                      WeightStore &weights, std::string &error) {
  error.clear();
  context.loadDialect<hetc::HetcDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module;
  try {
    module = Importer(path, context, weights, error).run();
  } catch (const std::exception &e) {
    // libonnx and protobuf report some malformed inputs by throwing.
    error = "'" + path + "' is not a valid ONNX model: " + e.what();
    return nullptr;
  }
  if (!module && error.empty())
    error = "'" + path + "' could not be imported";
  return module;
}

} // namespace hetc::compiler
