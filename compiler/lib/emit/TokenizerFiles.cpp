#include "hetc/compiler/TokenizerFiles.h"

#include "runtime/tokenizer/Tokenizer.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

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

// hetc-sentencepiece, installed beside the running program.
fs::path sentencePieceConverter() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  return self.parent_path() / "hetc-sentencepiece";
}

// Runs `argv` and returns its stdout; its stderr is discarded (libsentencepiece's own logging).
// The exit status goes to `status` as waitpid gives it.
Result<std::string> runProgram(const std::vector<std::string> &argv, int &status) {
  int out[2];
  if (pipe(out) != 0)
    return Status::error("cannot create a pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addclose(&actions, out[1]);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<char *> args;
  for (const std::string &arg : argv)
    args.push_back(const_cast<char *>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  const int spawned = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (spawned != 0) {
    close(out[0]);
    return Status::error("cannot run " + argv[0] + ": " + std::strerror(spawned));
  }
  std::string text;
  char buffer[65536];
  for (ssize_t n; (n = read(out[0], buffer, sizeof(buffer))) != 0;) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      break;
    text.append(buffer, n);
  }
  close(out[0]);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return text;
}

// A SentencePiece model converted by hetc-sentencepiece: the tokenizer.json text and the model's
// bos and eos ids. tokenizer_config.json's add_bos_token / add_eos_token, when given, say whether
// encoding adds them.
struct ConvertedModel {
  std::string tokenizerJson;
  int32_t bos = -1, eos = -1;
};

Result<ConvertedModel> convertSentencePiece(const fs::path &file, const json &config) {
  std::vector<std::string> argv{sentencePieceConverter().string(), file.string()};
  for (const char *key : {"add_bos_token", "add_eos_token"})
    if (auto it = config.find(key); it != config.end() && it->is_boolean()) {
      argv.push_back(key == std::string("add_bos_token") ? "--add-bos" : "--add-eos");
      argv.push_back(it->get<bool>() ? "1" : "0");
    }
  int status = 0;
  Result<std::string> output = runProgram(argv, status);
  if (!output)
    return Status::error(file.string() + ": " + output.message() +
                         " (it converts SentencePiece models and is built beside hetc)");
  if (WIFSIGNALED(status))
    return Status::error(file.string() + ": " + argv[0] + " was ended by signal " +
                         std::to_string(WTERMSIG(status)) + " reading it");
  const json result = json::parse(*output, nullptr, /*allow_exceptions=*/false);
  if (result.is_object() && result.contains("error") && result["error"].is_string())
    return Status::error(result["error"].get<std::string>());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !result.is_object() ||
      !result.contains("tokenizer_json") || !result["tokenizer_json"].is_string())
    return Status::error(file.string() + ": " + argv[0] + " failed to convert it");
  ConvertedModel model;
  model.tokenizerJson = result["tokenizer_json"].get<std::string>();
  model.bos = result.value("bos_token_id", -1);
  model.eos = result.value("eos_token_id", -1);
  return model;
}

} // namespace

Result<TokenizerFiles> readTokenizerFiles(const std::string &option, const std::string &onnxPath) {
  // tokenizer.json, or a SentencePiece tokenizer.model when there is no tokenizer.json beside it.
  fs::path file;
  std::error_code error;
  const fs::path dir = option.empty() ? fs::path(onnxPath).parent_path() : fs::path(option);
  std::string note;
  if (option.empty() || fs::is_directory(option, error)) {
    const fs::path jsonFile = dir / "tokenizer.json", modelFile = dir / "tokenizer.model";
    const bool hasJson = fs::is_regular_file(jsonFile, error);
    const bool hasModel = fs::is_regular_file(modelFile, error);
    if (!hasJson && !hasModel) {
      if (option.empty())
        return TokenizerFiles();
      return Status::error("--tokenizer " + option + ": neither " + jsonFile.string() + " nor " +
                           modelFile.string() + " exists");
    }
    file = hasJson ? jsonFile : modelFile;
    if (hasJson && hasModel)
      note = " (not the tokenizer.model beside it)";
  } else {
    file = fs::path(option);
    if (!fs::is_regular_file(file, error))
      return Status::error("--tokenizer " + option + ": " + file.string() + " does not exist");
  }
  const bool sentencePiece = file.extension() == ".model";
  const fs::path directory = file.parent_path();
  const json generation = readObject(directory / "generation_config.json");
  const json model = readObject(directory / "config.json");
  const json config = readObject(directory / "tokenizer_config.json");

  std::optional<std::string> text;
  ConvertedModel converted;
  if (sentencePiece) {
    Result<ConvertedModel> result = convertSentencePiece(file, config);
    if (!result)
      return result.status();
    converted = std::move(*result);
    text = std::move(converted.tokenizerJson);
  } else {
    text = readText(file);
    if (!text)
      return Status::error("cannot read " + file.string());
  }
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::fromJson(*text);
  if (!tokenizer) { // "tokenizer.json: ..." said once, with the file's path
    const std::string prefix = "tokenizer.json: ";
    const std::string &message = tokenizer.message();
    return Status::error(file.string() + ": " + (sentencePiece ? "converted, " : "") +
                         (message.compare(0, prefix.size(), prefix) == 0
                              ? message.substr(prefix.size())
                              : message));
  }

  auto def = std::make_unique<plan::TokenizerDefT>();
  def->tokenizer_json = std::move(*text);
  def->source = sentencePiece ? "sentencepiece:" + file.string() : file.string();
  // The generation config is what generation stops by; config.json and the tokenizer's config
  // name the same tokens in older checkpoints; a SentencePiece model names its own.
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
  if (def->bos_token_id < 0)
    def->bos_token_id = converted.bos;
  if (def->eos_token_ids.empty() && converted.eos >= 0)
    def->eos_token_ids.push_back(converted.eos);
  if (auto it = config.find("chat_template"); it != config.end() && it->is_string())
    def->chat_template = it->get<std::string>();
  return TokenizerFiles{std::move(def), (*tokenizer)->idCount(), note};
}

} // namespace hetc::compiler
