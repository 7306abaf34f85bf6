#include "model/hlo/canonical_order.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace tgraph::hlo {
namespace {

using xla::HloComputationProto;
using xla::HloInstructionProto;
using xla::HloModuleProto;

// Working memory per instruction and per computation: the id map's slot (a flat hash
// map at most 7/8 full, reserved up front), the walk's state, use mark, frame and order
// slot, and the pointer array the elements pass through while reordered
// (tests/hlo_memory_test.cc checks the bound).
constexpr int64_t kPerElement = 2 * 16 + 2 + 16 + 8 + 8 + 24;

// Moves the elements of `field` into the order `order` (a permutation of its indices);
// nothing moves when they are in it already (as XLA's own protos and texts mostly are).
template <typename T>
void Permute(google::protobuf::RepeatedPtrField<T>* field, const std::vector<int>& order) {
  bool identity = true;
  for (size_t i = 0; i < order.size() && identity; ++i) identity = order[i] == static_cast<int>(i);
  if (identity) return;
  const int n = field->size();
  std::vector<T*> elements(static_cast<size_t>(n));
  field->ExtractSubrange(0, n, elements.data());
  for (int i : order) field->AddAllocated(elements[static_cast<size_t>(i)]);
}

// The position of each id among a repeated field's elements (the first when an id
// repeats: the featurizer reports repeats); -1 for an id none has.
class IdIndex {
 public:
  template <typename Field>
  explicit IdIndex(const Field& elements) {
    index_.reserve(static_cast<size_t>(elements.size()));
    int i = 0;
    for (const auto& e : elements) index_.emplace(e.id(), i++);
  }
  int operator()(int64_t id) const {
    const auto it = index_.find(id);
    return it == index_.end() ? -1 : it->second;
  }

 private:
  absl::flat_hash_map<int64_t, int> index_;
};

// A depth-first post order over nodes 0..n-1 from `starts`, then every node not reached
// in index order. `children(i, k)` is node i's k-th child (-1 to skip it) or -2 past
// its last. Children on the current path (cycles) are skipped.
template <typename Children>
std::vector<int> PostOrder(int n, const std::vector<int>& starts, Children children) {
  std::vector<char> state(static_cast<size_t>(n), 0);  // 0 new, 1 on the path, 2 placed
  std::vector<int> order;
  order.reserve(static_cast<size_t>(n));
  std::vector<std::pair<int, int>> stack;  // (node, next child)
  for (int s : starts) {
    if (state[static_cast<size_t>(s)] != 0) continue;
    state[static_cast<size_t>(s)] = 1;
    stack.emplace_back(s, 0);
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      const int child = children(node, next++);
      if (child == -2) {
        state[static_cast<size_t>(node)] = 2;
        order.push_back(node);
        stack.pop_back();
      } else if (child >= 0 && state[static_cast<size_t>(child)] == 0) {
        state[static_cast<size_t>(child)] = 1;
        stack.emplace_back(child, 0);
      }
    }
  }
  for (int i = 0; i < n; ++i)
    if (state[static_cast<size_t>(i)] == 0) order.push_back(i);
  return order;
}

// `indices` sorted by `less`, ties by index.
template <typename Less>
void SortBy(std::vector<int>* indices, Less less) {
  std::stable_sort(indices->begin(), indices->end(), less);
}

void OrderInstructions(HloComputationProto* comp) {
  const int n = comp->instructions_size();
  if (n <= 1) return;
  const IdIndex resolve(comp->instructions());
  std::vector<char> used(static_cast<size_t>(n), 0);
  for (const HloInstructionProto& inst : comp->instructions())
    for (int64_t o : inst.operand_ids())
      if (const int k = resolve(o); k >= 0) used[static_cast<size_t>(k)] = 1;
  const int root = resolve(comp->root_id());
  std::vector<int> parameters, others;
  for (int i = 0; i < n; ++i) {
    if (used[static_cast<size_t>(i)] || i == root) continue;
    (comp->instructions(i).opcode() == "parameter" ? parameters : others).push_back(i);
  }
  SortBy(&parameters, [&](int a, int b) {
    return comp->instructions(a).parameter_number() < comp->instructions(b).parameter_number();
  });
  SortBy(&others, [&](int a, int b) { return comp->instructions(a).name() < comp->instructions(b).name(); });
  std::vector<int> starts = std::move(parameters);
  starts.insert(starts.end(), others.begin(), others.end());
  if (root >= 0) starts.push_back(root);
  const std::vector<int> order = PostOrder(n, starts, [&](int node, int k) {
    const HloInstructionProto& inst = comp->instructions(node);
    return k < inst.operand_ids_size() ? resolve(inst.operand_ids(k)) : -2;
  });
  Permute(comp->mutable_instructions(), order);
}

// The entry computation's index: by id, else by name, else the last.
int EntryIndex(const HloModuleProto& module) {
  const int n = module.computations_size();
  for (int i = 0; i < n; ++i)
    if (module.entry_computation_id() != 0 && module.computations(i).id() == module.entry_computation_id()) return i;
  for (int i = 0; i < n; ++i)
    if (!module.entry_computation_name().empty() && module.computations(i).name() == module.entry_computation_name())
      return i;
  return n - 1;
}

void OrderComputations(HloModuleProto* module) {
  const int n = module->computations_size();
  if (n <= 1) return;
  const IdIndex resolve(module->computations());
  std::vector<char> called(static_cast<size_t>(n), 0);
  for (const HloComputationProto& c : module->computations())
    for (const HloInstructionProto& inst : c.instructions())
      for (int64_t id : inst.called_computation_ids())
        if (const int k = resolve(id); k >= 0) called[static_cast<size_t>(k)] = 1;
  const int entry = EntryIndex(*module);
  std::vector<int> starts;
  for (int i = 0; i < n; ++i)
    if (!called[static_cast<size_t>(i)] && i != entry) starts.push_back(i);
  SortBy(&starts, [&](int a, int b) { return module->computations(a).name() < module->computations(b).name(); });
  starts.push_back(entry);
  // A computation's children: the called computations of its instructions, in order.
  // The cursor k runs over (instruction, callee) pairs; `at` remembers where each
  // computation's walk is, so that the next child is found without a rescan.
  std::vector<std::pair<int, int>> at(static_cast<size_t>(n), {0, 0});  // (instruction, callee)
  const std::vector<int> order = PostOrder(n, starts, [&](int node, int) {
    const HloComputationProto& c = module->computations(node);
    auto& [i, j] = at[static_cast<size_t>(node)];
    while (i < c.instructions_size()) {
      const HloInstructionProto& inst = c.instructions(i);
      if (j < inst.called_computation_ids_size()) return resolve(inst.called_computation_ids(j++));
      ++i;
      j = 0;
    }
    return -2;
  });
  Permute(module->mutable_computations(), order);
}

}  // namespace

absl::Status CanonicalizeOrder(HloModuleProto* module, WorkingMemory* memory) {
  int64_t elements = module->computations_size();
  for (const HloComputationProto& c : module->computations()) elements += c.instructions_size();
  if (absl::Status s = memory->Reserve(elements * kPerElement); !s.ok()) return s;
  for (HloComputationProto& c : *module->mutable_computations()) OrderInstructions(&c);
  OrderComputations(module);
  return absl::OkStatus();
}

}  // namespace tgraph::hlo
