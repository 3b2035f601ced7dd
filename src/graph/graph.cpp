// Graph helpers: op names and the weight list (see graph.hpp for the node contract).
#include "graph/graph.hpp"

#include <algorithm>
#include <unordered_set>

#include "core/error.hpp"

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
    case Op::SCALE: return "scale";
    case Op::GELU_MUL: return "gelu_mul";
    case Op::VIEW: return "view";
    case Op::SSM_CONV: return "ssm_conv";
    case Op::GATED_DELTA: return "gated_delta";
    case Op::TAKE_ROWS: return "take_rows";
    case Op::SIGMOID_MUL: return "sigmoid_mul";
  }
  return "unknown";
}

int32_t Graph::view(int32_t src, int64_t ne0, int64_t ne1, std::string name) {
  if (src < 0 || static_cast<size_t>(src) >= nodes.size()) fail("graph: view {} of node {} out of range", name, src);
  const Node& s = nodes[static_cast<size_t>(src)];
  if (ne0 <= 0 || ne1 <= 0 || ne0 * ne1 != s.ne0 * s.ne1 || s.out_type != DType::F32) {
    fail("graph: view {} [{}, {}] of node {} [{}, {}] {} changes the element count or type", name, ne0, ne1, s.name,
         s.ne0, s.ne1, dtype_name(s.out_type));
  }
  Node n;
  n.op = Op::VIEW;
  n.name = std::move(name);
  n.ne0 = ne0;
  n.ne1 = ne1;
  n.src[0] = src;
  return add(std::move(n));
}

int32_t Graph::storage_of(int32_t id) const {
  while (id >= 0 && nodes[static_cast<size_t>(id)].op == Op::VIEW) id = nodes[static_cast<size_t>(id)].src[0];
  return id;
}

void Graph::check_ring(int32_t n_seq) const {
  if (!kv.has_ring()) return;
  int32_t window = 0;
  for (const Node& n : nodes)
    if (n.op == Op::ATTENTION && kv.ring_layer(n.layer)) window = std::max(window, n.attn.window);
  if (window == 0) return;
  std::vector<std::pair<int32_t, int32_t>> span(static_cast<size_t>(std::max(n_seq, 1)), {INT32_MAX, -1});
  for (int32_t j = 0; j < n_tokens; ++j) {
    const size_t s = multi_seq() ? static_cast<size_t>(seq[static_cast<size_t>(j)]) : 0;
    if (s >= span.size()) continue;  // check_seqs names it
    const int32_t p = multi_seq() ? pos[static_cast<size_t>(j)] : n_past + j;
    span[s] = {std::min(span[s].first, p), std::max(span[s].second, p)};
  }
  for (size_t s = 0; s < span.size(); ++s)
    if (span[s].second >= 0 && span[s].second - span[s].first > kv.n_ring - window)
      fail(
          "graph: sequence {}'s positions {} … {} in one ubatch do not fit its sliding-window KV ring of {} cells "
          "(window {}): use a smaller -ub than the context was made for, or --swa-full",
          s, span[s].first, span[s].second, kv.n_ring, window);
}

void Graph::check_seqs(int32_t n_seq) const {
  if (!multi_seq()) {
    if (!seq.empty()) fail("graph: per-token sequence ids without positions");
    return;
  }
  if (pos.size() != static_cast<size_t>(n_tokens) || seq.size() != pos.size())
    fail("graph: {} positions and {} sequence ids for a ubatch of {} tokens", pos.size(), seq.size(), n_tokens);
  std::vector<int64_t> cells(pos.size());
  for (size_t j = 0; j < pos.size(); ++j) {
    if (seq[j] < 0 || seq[j] >= n_seq) fail("graph: token {}: sequence {} outside the context's {}", j, seq[j], n_seq);
    if (pos[j] < 0 || pos[j] >= kv.n_ctx)
      fail("graph: token {} (sequence {}): position {} outside the context ({} positions; raise -c)", j, seq[j], pos[j],
           kv.n_ctx);
    cells[j] = int64_t{seq[j]} * kv.n_ctx + pos[j];
  }
  std::sort(cells.begin(), cells.end());
  if (auto it = std::adjacent_find(cells.begin(), cells.end()); it != cells.end())
    fail("graph: sequence {} position {} appears twice in one ubatch", *it / kv.n_ctx, *it % kv.n_ctx);
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
