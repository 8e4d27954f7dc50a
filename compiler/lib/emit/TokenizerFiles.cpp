#include "hetc/compiler/TokenizerFiles.h"

#include "runtime/tokenizer/Tokenizer.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace hetc::compiler {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::optional<std::string> readText(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The JSON object in `path`, or null when the file is absent or not an object.
json readObject(const fs::path &path) {
  std::optional<std::string> text = readText(path);
  if (!text)
    return json();
  json object = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  return object.is_object() ? object : json();
}

// bos_token_id / eos_token_id of config.json and generation_config.json: an id or a list of ids.
std::vector<int32_t> idsOf(const json &object, const char *key) {
  std::vector<int32_t> ids;
  auto it = object.find(key);
  if (it == object.end())
    return ids;
  if (it->is_number_integer() && it->get<int64_t>() >= 0)
    ids.push_back(it->get<int32_t>());
  else if (it->is_array())
    for (const json &id : *it)
      if (id.is_number_integer() && id.get<int64_t>() >= 0)
        ids.push_back(id.get<int32_t>());
  return ids;
}

// tokenizer_config.json's bos_token / eos_token: the token's text, or {"content": text}.
int32_t tokenOf(const json &config, const char *key, const Tokenizer &tokenizer) {
  auto it = config.find(key);
  if (it == config.end())
    return -1;
  if (it->is_string())
    return tokenizer.tokenId(it->get<std::string>());
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return tokenizer.tokenId((*it)["content"].get<std::string>());
  return -1;
}

} // namespace

Result<TokenizerFiles> readTokenizerFiles(const std::string &option, const std::string &onnxPath) {
  fs::path file;
  std::error_code error;
  if (option.empty()) {
    file = fs::path(onnxPath).parent_path() / "tokenizer.json";
    if (!fs::is_regular_file(file, error))
      return TokenizerFiles();
  } else {
    file = fs::is_directory(option, error) ? fs::path(option) / "tokenizer.json" : fs::path(option);
    if (!fs::is_regular_file(file, error))
      return Status::error("--tokenizer " + option + ": " + file.string() + " does not exist");
  }
  std::optional<std::string> text = readText(file);
  if (!text)
    return Status::error("cannot read " + file.string());
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::fromJson(*text);
  if (!tokenizer) { // "tokenizer.json: ..." said once, with the file's path
    const std::string prefix = "tokenizer.json: ";
    const std::string &message = tokenizer.message();
    return Status::error(file.string() + ": " +
                         (message.compare(0, prefix.size(), prefix) == 0
                              ? message.substr(prefix.size())
                              : message));
  }

  auto def = std::make_unique<plan::TokenizerDefT>();
  def->tokenizer_json = std::move(*text);
  def->source = file.string();
  const fs::path dir = file.parent_path();
  const json generation = readObject(dir / "generation_config.json");
  const json model = readObject(dir / "config.json");
  const json config = readObject(dir / "tokenizer_config.json");
  // The generation config is what generation stops by; config.json and the tokenizer's config
  // name the same tokens in older checkpoints.
  for (const json *source : {&generation, &model}) {
    if (def->bos_token_id < 0 && !idsOf(*source, "bos_token_id").empty())
      def->bos_token_id = idsOf(*source, "bos_token_id")[0];
    if (def->eos_token_ids.empty())
      def->eos_token_ids = idsOf(*source, "eos_token_id");
  }
  if (def->bos_token_id < 0)
    def->bos_token_id = tokenOf(config, "bos_token", **tokenizer);
  if (def->eos_token_ids.empty())
    if (int32_t eos = tokenOf(config, "eos_token", **tokenizer); eos >= 0)
      def->eos_token_ids.push_back(eos);
  if (auto it = config.find("chat_template"); it != config.end() && it->is_string())
    def->chat_template = it->get<std::string>();
  return TokenizerFiles{std::move(def), (*tokenizer)->idCount()};
}

} // namespace hetc::compiler
