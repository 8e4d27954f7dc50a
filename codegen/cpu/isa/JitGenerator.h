// The base of every JIT kernel: an xbyak code generator that a kernel class derives from and
// fills in generate(). A kernel is one function taking one pointer to its standard-layout
// argument struct, whose fields the generated code reads by offsetof.
//
//   class LinearAvx512Bf16 : public JitGenerator { void generate() override; ... };
//   LinearAvx512Bf16 kernel(shape);
//   if (Status s = kernel.create(); !s) ...;           // generate, check, make executable
//   kernel.function<void (*)(const Args *)>()(&args);
//
// Kernels are generated at plan load for the plan's exact shapes and never on the step path.
#pragma once

#include "runtime/format/Status.h"

#include <xbyak/xbyak.h>

#include <cstddef>
#include <string>

namespace hetc::codegen {

class JitGenerator : public Xbyak::CodeGenerator {
public:
  // `name` says the ISA ("LinearAvx512Bf16"); `maxCodeBytes` bounds the generated code.
  JitGenerator(std::string name, size_t maxCodeBytes);
  ~JitGenerator() override = default;
  JitGenerator(const JitGenerator &) = delete;
  JitGenerator &operator=(const JitGenerator &) = delete;

  // Runs generate(), checks that xbyak reported no error and that every label resolved, then
  // makes the code read-and-execute only. Call once; function() is valid after success.
  Status create();

  template <typename Function> Function function() const {
    return reinterpret_cast<Function>(const_cast<uint8_t *>(getCode()));
  }
  const std::string &name() const { return name_; }
  size_t codeBytes() const { return getSize(); }

protected:
  virtual void generate() = 0;

  // The first integer argument (System V AMD64): the argument struct pointer.
  const Xbyak::Reg64 &abiArgs() const { return rdi; }

private:
  std::string name_;
  bool created_ = false;
};

} // namespace hetc::codegen
