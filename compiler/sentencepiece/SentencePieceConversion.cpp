#include "SentencePieceConversion.h"

#include <sentencepiece_processor.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hetc::spm {
namespace {

using json = nlohmann::ordered_json;

// ModelProto.SentencePiece.Type
enum PieceType { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };
// TrainerSpec.ModelType
enum ModelType { UnigramModel = 1, BpeModel = 2, WordModel = 3, CharModel = 4 };

struct Piece {
  std::string text;
  float score = 0;
  int type = Normal;
};

// What the conversion reads from a ModelProto, with SentencePiece's defaults.
struct ModelFields {
  std::vector<Piece> pieces;
  int modelType = UnigramModel;
  bool byteFallback = false;
  bool treatWhitespaceAsSuffix = false;
  std::string normalizerName;
  std::string charsmap;
  bool addDummyPrefix = true;
  bool removeExtraWhitespaces = true;
  bool escapeWhitespaces = true;
  std::string denormalizerCharsmap;
};

// The ModelProto is read here from its wire format, by SentencePiece's field numbers, rather than
// through a generated class: Debian ships no sentencepiece_model.pb.h, and libsentencepiece
// carries its own copy of protobuf (3.14) which aborts the process when the system's libprotobuf
// (3.21) is loaded beside it, so neither libprotobuf nor protobuf-lite can parse it in this
// process. libsentencepiece has already parsed and checked the same bytes.
struct Field {
  uint32_t number;
  uint64_t value;         // varint and fixed32 fields
  std::string_view bytes; // length-delimited fields
};

bool readVarint(std::string_view &in, uint64_t &value) {
  value = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(in[0]);
    in.remove_prefix(1);
    value |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if (!(byte & 0x80))
      return true;
  }
  return false;
}

// Calls `visit` for each field of `message`; false when the bytes are not a message.
bool forEachField(std::string_view message, const std::function<void(const Field &)> &visit) {
  while (!message.empty()) {
    uint64_t key;
    if (!readVarint(message, key))
      return false;
    Field field{static_cast<uint32_t>(key >> 3), 0, {}};
    switch (key & 7) {
    case 0: // varint
      if (!readVarint(message, field.value))
        return false;
      break;
    case 1: // fixed64
      if (message.size() < 8)
        return false;
      message.remove_prefix(8);
      continue;
    case 2: { // length-delimited
      uint64_t length;
      if (!readVarint(message, length) || length > message.size())
        return false;
      field.bytes = message.substr(0, length);
      message.remove_prefix(length);
      break;
    }
    case 5: { // fixed32
      if (message.size() < 4)
        return false;
      uint32_t bits = 0;
      for (int i = 0; i < 4; ++i)
        bits |= static_cast<uint32_t>(static_cast<uint8_t>(message[i])) << (8 * i);
      field.value = bits;
      message.remove_prefix(4);
      break;
    }
    default: // groups are not used by ModelProto
      return false;
    }
    visit(field);
  }
  return true;
}

float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

bool readModel(std::string_view bytes, ModelFields &m) {
  bool ok = true;
  ok &= forEachField(bytes, [&](const Field &f) {
    if (f.number == 1) { // pieces
      Piece piece;
      ok &= forEachField(f.bytes, [&](const Field &p) {
        if (p.number == 1)
          piece.text = std::string(p.bytes);
        else if (p.number == 2)
          piece.score = floatOf(static_cast<uint32_t>(p.value));
        else if (p.number == 3)
          piece.type = static_cast<int>(p.value);
      });
      m.pieces.push_back(std::move(piece));
    } else if (f.number == 2) { // trainer_spec
      ok &= forEachField(f.bytes, [&](const Field &t) {
        if (t.number == 3)
          m.modelType = static_cast<int>(t.value);
        else if (t.number == 24)
          m.treatWhitespaceAsSuffix = t.value != 0;
        else if (t.number == 35)
          m.byteFallback = t.value != 0;
      });
    } else if (f.number == 3) { // normalizer_spec
      ok &= forEachField(f.bytes, [&](const Field &n) {
        if (n.number == 1)
          m.normalizerName = std::string(n.bytes);
        else if (n.number == 2)
          m.charsmap = std::string(n.bytes);
        else if (n.number == 3)
          m.addDummyPrefix = n.value != 0;
        else if (n.number == 4)
          m.removeExtraWhitespaces = n.value != 0;
        else if (n.number == 5)
          m.escapeWhitespaces = n.value != 0;
      });
    } else if (f.number == 5) { // denormalizer_spec
      ok &= forEachField(f.bytes, [&](const Field &n) {
        if (n.number == 2)
          m.denormalizerCharsmap = std::string(n.bytes);
      });
    }
  });
  return ok;
}

const char *modelTypeName(int type) {
  switch (type) {
  case UnigramModel:
    return "UNIGRAM";
  case BpeModel:
    return "BPE";
  case WordModel:
    return "WORD";
  case CharModel:
    return "CHAR";
  }
  return "unknown";
}

bool isCharacterStart(char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }

// SentencePiece's BPE merges the adjacent pair of symbols whose concatenation is the piece of
// highest score (the leftmost among equals), every way of splitting a piece being a pair. As
// ranked merges: each normal piece's splits into two normal pieces, by the piece's score, highest
// first; equal scores and the splits of one piece are ranked by ids.
json bpeMerges(const std::vector<Piece> &pieces) {
  std::unordered_map<std::string_view, int32_t> normal;
  for (size_t id = 0; id < pieces.size(); ++id)
    if (pieces[id].type == Normal)
      normal.emplace(pieces[id].text, static_cast<int32_t>(id));
  struct Merge {
    float score;
    int32_t merged, left, right;
  };
  std::vector<Merge> merges;
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (pieces[id].type != Normal)
      continue;
    const std::string_view text = pieces[id].text;
    for (size_t k = 1; k < text.size(); ++k) {
      if (!isCharacterStart(text[k]))
        continue;
      auto left = normal.find(text.substr(0, k)), right = normal.find(text.substr(k));
      if (left != normal.end() && right != normal.end())
        merges.push_back({pieces[id].score, static_cast<int32_t>(id), left->second, right->second});
    }
  }
  std::sort(merges.begin(), merges.end(), [](const Merge &a, const Merge &b) {
    if (a.score != b.score)
      return a.score > b.score;
    if (a.merged != b.merged)
      return a.merged < b.merged;
    return a.left < b.left;
  });
  json list = json::array();
  for (const Merge &merge : merges)
    list.push_back(json::array({pieces[merge.left].text, pieces[merge.right].text}));
  return list;
}

json replace(json pattern, const std::string &content) {
  return {{"type", "Replace"}, {"pattern", std::move(pattern)}, {"content", content}};
}

// SentencePiece's normalizer with the identity character map: remove_extra_whitespaces drops
// leading and trailing spaces and collapses runs of them, add_dummy_prefix puts a space before a
// text that is not empty, and every space becomes U+2581. The trailing strip comes last and takes
// any U+2581 at the end, as SentencePiece strips the escaped text.
json normalizer(const ModelFields &m) {
  const std::string space = "\u2581";
  json steps = json::array();
  if (m.removeExtraWhitespaces) {
    steps.push_back(replace({{"Regex", " {2,}"}}, " "));
    steps.push_back(replace({{"Regex", "^ +"}}, ""));
  }
  if (m.addDummyPrefix)
    steps.push_back({{"type", "Prepend"}, {"prepend", space}});
  steps.push_back(replace({{"String", " "}}, space));
  if (m.removeExtraWhitespaces)
    steps.push_back(replace({{"Regex", space + "+\\z"}}, ""));
  return {{"type", "Sequence"}, {"normalizers", std::move(steps)}};
}

// SentencePiece's decoding: U+2581 is a space, byte pieces are bytes, and the first piece loses
// its leading space when the normalizer adds a dummy prefix or removes extra whitespace.
json decoder(const ModelFields &m) {
  json steps = json::array();
  steps.push_back(replace({{"String", "\u2581"}}, " "));
  steps.push_back({{"type", "ByteFallback"}});
  steps.push_back({{"type", "Fuse"}});
  if (m.addDummyPrefix || m.removeExtraWhitespaces)
    steps.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  return {{"type", "Sequence"}, {"decoders", std::move(steps)}};
}

json specialToken(const std::string &text, int32_t id) {
  return {{"id", text}, {"ids", {id}}, {"tokens", {text}}};
}

json postProcessor(const ModelFields &m, int32_t bos, int32_t eos, bool addBos, bool addEos) {
  if (!addBos && !addEos)
    return nullptr;
  json single = json::array(), pair = json::array(), specials = json::object();
  auto add = [&](int32_t id) {
    const std::string &text = m.pieces[id].text;
    single.push_back({{"SpecialToken", {{"id", text}, {"type_id", 0}}}});
    specials[text] = specialToken(text, id);
  };
  if (addBos)
    add(bos);
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (addEos)
    add(eos);
  for (const json &item : single)
    pair.push_back(item);
  for (const json &item : single) {
    json second = item;
    if (second.contains("Sequence"))
      second["Sequence"]["id"] = "B";
    for (auto &[key, value] : second.items())
      value["type_id"] = 1;
    pair.push_back(second);
  }
  return {{"type", "TemplateProcessing"},
          {"single", std::move(single)},
          {"pair", std::move(pair)},
          {"special_tokens", std::move(specials)}};
}

// libsentencepiece's failed checks read "./src/file.cc(line) [condition] detail": the detail, or
// for bytes that do not parse, saying so.
std::string loadError(const std::string &message) {
  const size_t open = message.find(") ["), close = message.find("]", open);
  if (message.rfind("./", 0) != 0 || open == std::string::npos || close == std::string::npos)
    return message;
  const std::string condition = message.substr(open + 3, close - open - 3);
  if (condition.find("ParseFromArray") != std::string::npos)
    return "not a SentencePiece model (its bytes do not parse as one)";
  const size_t detail = message.find_first_not_of(' ', close + 1);
  return detail == std::string::npos ? condition : message.substr(detail);
}

} // namespace

Result<Conversion> convertSentencePiece(const std::string &model,
                                        const ConversionOptions &options) {
  ::sentencepiece::SentencePieceProcessor processor;
  if (const auto status = processor.LoadFromSerializedProto(model); !status.ok())
    return Status::error("libsentencepiece cannot load it: " + loadError(status.message()));
  ModelFields m;
  if (!readModel(model, m) || m.pieces.size() != static_cast<size_t>(processor.GetPieceSize()))
    return Status::error("libsentencepiece loads it but its pieces cannot be read");

  if (m.modelType != UnigramModel && m.modelType != BpeModel)
    return Status::error(std::string("model type ") + modelTypeName(m.modelType) +
                         " is not supported (BPE and UNIGRAM are)");
  // A character map rewrites text by rules hetc's normalizers do not reproduce exactly.
  if (!m.charsmap.empty())
    return Status::error("normalizer '" + m.normalizerName +
                         "' (a precompiled character map) is not supported: only 'identity' "
                         "converts exactly (spm_train --normalization_rule_name=identity)");
  if (!m.denormalizerCharsmap.empty())
    return Status::error("a denormalizer (a precompiled character map) is not supported");
  if (!m.escapeWhitespaces)
    return Status::error("normalizer escape_whitespaces false is not supported");
  if (m.treatWhitespaceAsSuffix)
    return Status::error("treat_whitespace_as_suffix is not supported");

  int32_t unk = -1;
  for (size_t id = 0; id < m.pieces.size(); ++id) {
    const Piece &piece = m.pieces[id];
    if (piece.type == Unused) // SentencePiece re-splits an UNUSED piece the BPE merges into
      return Status::error("piece " + std::to_string(id) + " '" + piece.text +
                           "' is of type UNUSED, which is not supported");
    if (piece.type == Unknown && unk < 0)
      unk = static_cast<int32_t>(id);
  }
  if (unk < 0) // libsentencepiece requires one
    return Status::error("the model has no unknown piece");

  Conversion conversion;
  conversion.bosId = processor.bos_id();
  conversion.eosId = processor.eos_id();
  const bool addBos = options.addBos.value_or(conversion.bosId >= 0);
  const bool addEos = options.addEos.value_or(false);
  if (addBos && conversion.bosId < 0)
    return Status::error("add_bos_token is set but the model has no bos piece");
  if (addEos && conversion.eosId < 0)
    return Status::error("add_eos_token is set but the model has no eos piece");

  // Control and unknown pieces are special tokens, user-defined pieces added tokens: both are
  // matched in the text before it is normalized, as SentencePiece matches user-defined pieces.
  json added = json::array();
  for (size_t id = 0; id < m.pieces.size(); ++id) {
    const Piece &piece = m.pieces[id];
    if (piece.type == Control || piece.type == Unknown || piece.type == UserDefined)
      added.push_back({{"id", id},
                       {"content", piece.text},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", piece.type != UserDefined}});
  }

  json modelJson;
  if (m.modelType == BpeModel) {
    json vocab = json::object();
    for (size_t id = 0; id < m.pieces.size(); ++id)
      vocab[m.pieces[id].text] = id;
    modelJson = {{"type", "BPE"},
                 {"dropout", nullptr},
                 {"unk_token", m.pieces[unk].text},
                 {"continuing_subword_prefix", nullptr},
                 {"end_of_word_suffix", nullptr},
                 // SentencePiece gives a run of unknown characters one unknown id.
                 {"fuse_unk", true},
                 {"byte_fallback", m.byteFallback},
                 {"ignore_merges", false},
                 {"vocab", std::move(vocab)},
                 {"merges", bpeMerges(m.pieces)}};
  } else {
    json vocab = json::array();
    for (const Piece &piece : m.pieces)
      vocab.push_back(json::array({piece.text, piece.score}));
    modelJson = {{"type", "Unigram"},
                 {"unk_id", unk},
                 {"vocab", std::move(vocab)},
                 {"byte_fallback", m.byteFallback}};
  }

  json root = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", std::move(added)},
      {"normalizer", normalizer(m)},
      {"pre_tokenizer", nullptr},
      {"post_processor", postProcessor(m, conversion.bosId, conversion.eosId, addBos, addEos)},
      {"decoder", decoder(m)},
      {"model", std::move(modelJson)}};
  try {
    conversion.tokenizerJson = root.dump();
  } catch (const json::exception &) { // a piece that is not UTF-8
    return Status::error("a piece is not valid UTF-8");
  }
  return conversion;
}

} // namespace hetc::spm
