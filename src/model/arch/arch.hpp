// Per-architecture binding and graph builders (one .cpp per architecture), dispatched by model.cpp.
#pragma once

#include "graph/graph.hpp"
#include "model/model.hpp"

namespace rocky::model::arch {

void bind_llama(const gguf::GgufFile& f, const HParams& hp, Weights& w);
graph::Graph build_llama(const HParams& hp, const Weights& w, const UbatchSpec& u);

void bind_qwen2(const gguf::GgufFile& f, const HParams& hp, Weights& w);
graph::Graph build_qwen2(const HParams& hp, const Weights& w, const UbatchSpec& u);

// Shared: the per-layer tensors every llama-style block has (attn_norm, q/k/v/o, ffn_*).
LayerWeights bind_common_layer(const gguf::GgufFile& f, const HParams& hp, int il);

}  // namespace rocky::model::arch
