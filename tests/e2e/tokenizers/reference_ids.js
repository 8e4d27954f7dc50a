// Writes the ids the JavaScript port of Hugging Face tokenizers (@lenml/tokenizers, a fork of
// transformers.js's tokenizers) gives each text of a corpus, with the special tokens its
// post-processor adds: the reference hetc's tokenizer is compared with.
//
//   node reference_ids.js TOKENIZER_DIR CORPUS.json OUT.json
// TOKENIZER_DIR holds tokenizer.json and tokenizer_config.json; the corpus is a JSON array of
// strings; OUT.json is an array of id arrays, one per text.
"use strict";
const fs = require("fs");
const path = require("path");
const { TokenizerLoader } = require("@lenml/tokenizers");

const [dir, corpusPath, outPath] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node reference_ids.js TOKENIZER_DIR CORPUS.json OUT.json");
  process.exit(2);
}
const read = (name) => JSON.parse(fs.readFileSync(path.join(dir, name), "utf8"));
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: read("tokenizer.json"),
  tokenizerConfig: read("tokenizer_config.json"),
});
const corpus = JSON.parse(fs.readFileSync(corpusPath, "utf8"));
const ids = corpus.map((text) => Array.from(tokenizer.encode(text)));
fs.writeFileSync(outPath, JSON.stringify(ids));
