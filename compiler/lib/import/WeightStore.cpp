// The weight store: a name -> bytes table whose memory is owned by the objects kept alive here.
#include "hetc/compiler/WeightStore.h"

#include <utility>

namespace hetc::compiler {

WeightStore::WeightStore() = default;
WeightStore::~WeightStore() {
  // Entries point into the owners; drop them first so no pointer outlives its memory.
  weights_.clear();
  owners_.clear();
}

const StoredWeight *WeightStore::find(const std::string &name) const {
  auto it = weights_.find(name);
  return it == weights_.end() ? nullptr : &it->second;
}

void WeightStore::add(StoredWeight weight) {
  std::string name = weight.name;
  weights_[name] = std::move(weight);
}

void WeightStore::keepAlive(std::shared_ptr<void> owner) {
  if (owner)
    owners_.push_back(std::move(owner));
}

} // namespace hetc::compiler
