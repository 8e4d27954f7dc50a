#include "codegen/cpu/isa/JitGenerator.h"

namespace hetc::codegen {

// DontSetProtectRWE: the buffer starts writable but not executable; create() flips it to
// read-and-execute once the code is complete, so no page is ever writable and executable.
JitGenerator::JitGenerator(std::string name, size_t maxCodeBytes)
    : Xbyak::CodeGenerator(maxCodeBytes, Xbyak::DontSetProtectRWE), name_(std::move(name)) {}

Status JitGenerator::create() {
  if (created_)
    return Status::error("JIT kernel " + name_ + " is already generated");
  // xbyak keeps the first error of this thread until cleared: start clean.
  Xbyak::ClearError();
  if (!getCode())
    return Status::error("JIT kernel " + name_ + ": cannot allocate its code buffer");
  generate();
  int error = Xbyak::GetError();
  if (!error && hasUndefinedLabel())
    error = Xbyak::ERR_LABEL_IS_NOT_FOUND;
  if (!error && !setProtectModeRE(false))
    error = Xbyak::ERR_CANT_PROTECT;
  if (error) {
    Xbyak::ClearError();
    return Status::error("JIT kernel " + name_ +
                         " failed to generate: " + Xbyak::ConvertErrorToString(error));
  }
  created_ = true;
  return Status();
}

} // namespace hetc::codegen
