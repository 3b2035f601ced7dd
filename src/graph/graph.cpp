// Graph helpers: op names and the weight list (see graph.hpp for the node contract).
#include "graph/graph.hpp"

#include <unordered_set>

namespace rocky::graph {

const char* op_name(Op op) {
  switch (op) {
    case Op::GET_ROWS: return "get_rows";
    case Op::RMS_NORM: return "rms_norm";
    case Op::MATMUL: return "matmul";
    case Op::ADD_BIAS: return "add_bias";
    case Op::ROPE: return "rope";
    case Op::KV_STORE: return "kv_store";
    case Op::ATTENTION: return "attention";
    case Op::SILU_MUL: return "silu_mul";
    case Op::ADD: return "add";
    case Op::TAKE_COLS: return "take_cols";
  }
  return "unknown";
}

std::vector<const gguf::TensorInfo*> Graph::weights() const {
  std::vector<const gguf::TensorInfo*> out;
  std::unordered_set<const gguf::TensorInfo*> seen;
  for (const Node& n : nodes) {
    if (n.weight != nullptr && seen.insert(n.weight).second) out.push_back(n.weight);
  }
  return out;
}

}  // namespace rocky::graph
