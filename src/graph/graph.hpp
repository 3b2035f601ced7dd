// The forward pass of one ubatch as a flat list of named nodes — the contract between the model
// builders (src/model/arch/*.cpp), the arena planner (planner.hpp) and every backend.
//
// Shapes follow GGUF/ggml order: ne0 is the innermost (contiguous) dimension. Every activation is
// a dense f32 matrix [ne0 = features, ne1 = tokens] (column j = token j of the ubatch), unless the
// node's `out_type` says otherwise. Nodes appear in a valid execution order (sources first).
//
// Weights are GGUF tensors (gguf::TensorInfo, data mmap'ed): a 2-D weight W has ne0 = K (inner
// dimension, the row length) and ne1 = M (output features); MATMUL computes y[M, N] = W · x[K, N],
// i.e. y[m, n] = Σ_k W[k + m·K] · x[k + n·K].
//
// Names match llama.cpp's graph names where they exist ("blk.3.attn_q", "blk.3.ffn_out", "result_norm",
// "result_output") so per-node comparisons (rocky verify --bisect) are readable.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "gguf/gguf.hpp"

namespace rocky::graph {

enum class Op : uint8_t {
  GET_ROWS,   // out[:, j] = dequant(weight row tokens[j]); weight = embedding [n_embd, n_vocab]; src none
  RMS_NORM,   // out = src0 / sqrt(mean(src0²) + eps) * weight   (weight: f32 [ne0], per column)
  MATMUL,     // out[M, N] = weight[K, M] · src0[K, N]   (any computable weight type)
  ADD_BIAS,   // out = src0 + weight (f32 [ne0], broadcast over columns)
  ROPE,       // rotary embedding of src0 viewed as [head_dim, n_head, N]; positions n_past + j;
              // weight (optional) = f32 [n_rot/2] frequency divisors (rope_freqs, Llama 3.1 scaling)
  KV_STORE,   // write src0 [n_embd_gqa, N] into the layer's K (kv=0) or V (kv=1) cache at n_past..;
              // no arena output (ne0 = ne1 = 0)
  ATTENTION,  // causal GQA attention of src0 = Q [head_dim·n_head, N] over cache positions
              // [0, n_past + j] for token j; src1/src2 = the K and V KV_STORE nodes (ordering deps)
  SILU_MUL,   // out = silu(src0) * src1   (SwiGLU: src0 = gate, src1 = up)
  ADD,        // out = src0 + src1 (residual)
  TAKE_COLS,  // out = src0[:, first_col : first_col + ne1]  (e.g. the last token before the logits)
  SCALE,      // out = src0 · scale (Gemma's embeddings × √n_embd)
  GELU_MUL,   // out = gelu_tanh(src0) * src1   (GeGLU: src0 = gate, src1 = up; ggml's tanh form)
  VIEW,       // out = src0 reinterpreted as [ne0, ne1] (ne0·ne1 = the source's element count): no
              // copy, no dispatch; the planner gives it the source's arena bytes (planner.hpp).
              // E.g. [head_dim·n_head, N] → [head_dim, n_head·N], so a per-head op (qwen3's q/k
              // RMSNorm) is an ordinary per-column op on the view.
  // Hybrid linear attention (qwen35). The recurrent nodes read and update their layer's state
  // in the context (KvShape::conv_state / ssm_state; sequence 0), carried across ubatches and
  // zeroed by Context::reset().
  SSM_CONV,     // causal depthwise conv over time, then SiLU: src0 = x [C, N], weight = f32 [K, C];
                // out[c, t] = silu(Σ_{i<K} w[i + c·K] · x̃[c, t − (K−1) + i]) where x̃ at columns < 0 is
                // the conv state (the sequence's last K−1 inputs, zero at its start); afterwards the
                // state holds the last K−1 columns of x̃. State layout: [K−1 slots (oldest first)][C].
  GATED_DELTA,  // gated delta rule (Yang et al. 2024, Gated DeltaNet): src0 = conv output [C, N] with
                // C = 2·H_k·d_k + H_v·d_v, rows q (H_k·d_k) | k (H_k·d_k) | v (H_v·d_v); src1 = decay
                // input a [H_v, N] (h·W_alpha + dt_bias); src2 = β logits b [H_v, N]; weight = ssm_a
                // f32 [H_v] (A ≤ 0). Per token, per value head j with key head j mod H_k:
                // q̂, k̂ = q, k / max(‖·‖, eps); g = softplus(a)·A; β = sigmoid(b);
  // S ← exp(g)·S; S ← S + k̂·(β·(v − Sᵀk̂))ᵀ; o = Sᵀq̂ / √d_k. out = o [H_v·d_v, N].
  // State S per head d_k × d_v: element (i, c) of head j at (j·d_k + i)·d_v + c.
  TAKE_ROWS,    // out[i, j] = src0[first_row + i, j] for i < ne0 (a row range of every column)
  SIGMOID_MUL,  // out = src0 · sigmoid(src1) (qwen35's attention output gate)
};
const char* op_name(Op op);

enum class RopeMode : uint8_t {
  NORMAL,  // llama: rotate adjacent pairs (x[2i], x[2i+1])
  NEOX,    // qwen2 / GPT-NeoX: rotate (x[i], x[i + n_rot/2])
};

struct RopeParams {
  RopeMode mode = RopeMode::NORMAL;
  int32_t head_dim = 0;     // elements per head
  int32_t n_head = 0;       // heads in src0 (n_head for Q, n_head_kv for K)
  int32_t n_rot = 0;        // rotated dims per head (≤ head_dim; the rest pass through)
  float freq_base = 10000;  // theta_i = pos · freq_scale · base^(-2i/n_rot) / factor_i
  float freq_scale = 1;     // factor_i: the node's weight (rope_freqs) when set, else 1
};

struct AttnParams {
  int32_t head_dim = 0;
  int32_t n_head = 0;     // query heads
  int32_t n_head_kv = 0;  // KV heads; query head h reads KV head h / (n_head / n_head_kv)
  float scale = 0;        // usually 1/sqrt(head_dim)
  int32_t window = 0;     // sliding window: token at position q sees keys p with q − window < p ≤ q; 0 = all
};

// GATED_DELTA's head counts and dims (graph.hpp Op comment).
struct SsmParams {
  int32_t n_k_heads = 0;  // H_k (ssm.group_count)
  int32_t n_v_heads = 0;  // H_v (ssm.time_step_rank), a multiple of H_k
  int32_t d_k = 0;        // key/query head dim (ssm.state_size)
  int32_t d_v = 0;        // value head dim (ssm.inner_size / H_v)
  float eps = 0;          // L2-norm floor of q and k
};

struct Node {
  Op op = Op::ADD;
  std::string name;
  int64_t ne0 = 0, ne1 = 0;                  // output shape [features, tokens]; 0×0 = no arena output
  DType out_type = DType::F32;               // element type of the output in the arena
  std::array<int32_t, 3> src{-1, -1, -1};    // input node ids (-1 = unused)
  const gguf::TensorInfo* weight = nullptr;  // MATMUL/GET_ROWS/RMS_NORM/ADD_BIAS; ROPE (optional)
  int32_t layer = -1;                        // KV_STORE/ATTENTION: which layer's cache
  int32_t kv = 0;                            // KV_STORE: 0 = K, 1 = V
  int64_t first_col = 0;                     // TAKE_COLS
  float eps = 0;                             // RMS_NORM
  float scale = 1;                           // SCALE
  RopeParams rope;                           // ROPE
  AttnParams attn;                           // ATTENTION
  int64_t first_row = 0;                     // TAKE_ROWS
  SsmParams ssm;                             // GATED_DELTA (SSM_CONV, GATED_DELTA: `layer` = whose state)

  uint64_t out_bytes() const { return row_bytes(out_type, static_cast<uint64_t>(ne0)) * static_cast<uint64_t>(ne1); }
};

// Shape of the KV cache the graph expects: per layer, K and V each [n_embd_kv, cells] per sequence
// (within a column, head h's head_dim values are contiguous). A layer holds cells(l) columns per
// sequence: n_ctx (column p = position p), or for a sliding-window layer whose KV is a ring
// (ring_layer(l): n_ring > 0, gemma3's local layers) n_ring columns, position p at column
// p mod n_ring. A ring of window + ubatch cells holds every key any token of a ubatch can see (a
// token at q sees q − window < p ≤ q; the ubatch's own keys are written before it attends), so
// positions older than n_past − n_ring are gone from those layers (what the runtime tracks).
struct KvShape {
  int32_t n_layer = 0;
  int32_t n_embd_kv = 0;  // head_dim · n_head_kv
  int32_t n_ctx = 0;
  int32_t n_ring = 0;         // cells per sequence of a ring layer (0: no ring; < n_ctx when set)
  std::vector<uint8_t> ring;  // per layer (n_layer entries, or empty: none): 1 = a ring of n_ring cells
  bool ring_layer(int32_t l) const {
    return n_ring > 0 && l >= 0 && static_cast<size_t>(l) < ring.size() && ring[static_cast<size_t>(l)] != 0;
  }
  int32_t cells(int32_t l) const { return ring_layer(l) ? n_ring : n_ctx; }
  // The column of position p in layer l's cells of one sequence.
  int64_t cell(int32_t l, int64_t p) const { return ring_layer(l) ? p % n_ring : p; }
  bool has_ring() const { return n_ring > 0; }
  // Recurrent state per layer and sequence (hybrid models; 0 = none), in floats: the SSM_CONV
  // window ((K−1)·C) and the GATED_DELTA state (H_v·d_k·d_v). A context holds them for every layer
  // index below n_layer (unused by the attention layers) beside the KV cache.
  int64_t conv_state = 0;
  int64_t ssm_state = 0;
  bool recurrent() const { return conv_state > 0 || ssm_state > 0; }
  bool operator==(const KvShape&) const = default;
};

struct Graph {
  std::vector<Node> nodes;
  int32_t n_tokens = 0;  // ubatch size N
  int32_t n_past = 0;    // cache positions already filled before this ubatch
  int32_t output = -1;   // node id of the logits [n_vocab, n_out]; -1 when the ubatch needs no
                         // logits (a prefill ubatch before the last one: it only fills the KV cache)
  KvShape kv;
  // A multi-sequence ubatch (several sequences' tokens in one ubatch; empty = one sequence,
  // the default): token j belongs to sequence seq[j] (< the context's ContextOptions::n_seq) at
  // position pos[j] (both n_tokens long). ROPE rotates token j by pos[j]; KV_STORE writes it at
  // cell seq[j] · kv.n_ctx + pos[j] (sequence s owns cells [s · n_ctx, (s + 1) · n_ctx)); ATTENTION
  // of token j reads its sequence's positions [0, pos[j]] (with a sliding window, the last `window`
  // of them). No (seq, pos) pair may repeat in one ubatch; n_past is ignored. Set them after
  // model::Model::build_graph (the nodes do not depend on them), as n_past.
  std::vector<int32_t> seq, pos;
  bool multi_seq() const { return !pos.empty(); }
  // rocky::Error naming the token when seq/pos do not fit a context of n_seq sequences of kv.n_ctx
  // positions (sizes, ranges, a repeated pair).
  void check_seqs(int32_t n_seq) const;
  // With a sliding-window ring (kv.n_ring > 0): rocky::Error naming the sequence when its tokens in
  // this ubatch span more than n_ring − window positions (the keys it writes would overwrite keys
  // it reads; the runtime's ubatches never do: the ring was sized for them).
  void check_ring(int32_t n_seq) const;

  int32_t add(Node n) {
    nodes.push_back(std::move(n));
    return static_cast<int32_t>(nodes.size()) - 1;
  }
  // A VIEW of node `src` as [ne0, ne1]; rocky::Error when the element counts differ.
  int32_t view(int32_t src, int64_t ne0, int64_t ne1, std::string name);
  // The node whose arena bytes node `id` uses: itself, or for a VIEW (of a VIEW …) its source.
  int32_t storage_of(int32_t id) const;
  // Every distinct weight the graph reads, in first-use order.
  std::vector<const gguf::TensorInfo*> weights() const;
};

}  // namespace rocky::graph
