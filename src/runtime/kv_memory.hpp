// What a context's KV memory holds, by kind of layer, and the KV budget (--kv-budget).
//
// Kinds: full (K/V of full-attention layers: n_ctx cells per sequence), sliding_window (K/V of
// sliding-window layers, gemma3's local layers: a ring of window + ubatch cells per sequence,
// model::Model::swa_ring, or n_ctx cells with --swa-full or a short context), recurrent (the conv window and delta-rule state of a hybrid model's recurrent
// layers), unused (what the context holds for layers that do not read it: a hybrid model's K/V
// cells of its recurrent layers, its recurrent state of its attention layers). `rocky bench -o json`
// ("kv_bytes") and /metrics (rocky:kv_bytes{kind=…}) report them.
#pragma once

#include <cstdint>
#include <string>

#include "backend/backend.hpp"
#include "model/model.hpp"

namespace rocky::runtime {

struct KvBytes {
  uint64_t full = 0, sliding_window = 0, recurrent = 0, unused = 0;
  uint64_t total() const { return full + sliding_window + recurrent + unused; }
};

// A context of `n_seq` sequences of `n_ctx` positions of model `m` with KV elements of type `t`
// (the CPU keeps f32; Vulkan f16 by default) whose sliding-window layers hold rings of `n_ring`
// cells per sequence (Model::swa_ring; 0: n_ctx): the bytes it holds by kind (whole context) and,
// in `per_token` (optional), the bytes one cell of one sequence costs in each kind's K/V.
KvBytes kv_bytes(const model::Model& m, int32_t n_ctx, int32_t n_seq, backend::KvType t, KvBytes* per_token = nullptr,
                 int32_t n_ring = 0);

// --kv-budget: rocky::Error when `need` bytes of KV (what -c, -np and the KV type ask for) are over
// `budget_mib` MiB (0 = no budget), naming the budget, the need and the fix. Checked before any KV
// is allocated; a context is never made larger later (a rebuild after a device fault makes the
// same one), so nothing allocates past it.
void check_kv_budget(const KvBytes& need, uint64_t budget_mib, const std::string& what);

}  // namespace rocky::runtime
