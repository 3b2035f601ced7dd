#version 450
// attention_split (decode at depth; flash-decoding): the online softmax of
// common/attention_simple.glsl over one chunk of the key range, so that a decode token's n_head
// workgroups become n_head · n_split and the GPU is filled at any depth. Workgroup (h, j, s) visits
// positions [f + s · chunk, min(f + (s + 1) · chunk, n_past + j + 1)) of query head h, token j
// (f: the first position of a sliding window, else 0), and writes its partial state (m, l,
// o[head_dim], o not normalised) to scratch row (j · n_head + h) · n_split + s;
// attention_merge.comp combines the rows. A chunk past the token's last position writes
// m = -1e30, l = 0 (merged as nothing).
// Each invocation owns output dims d = t + i·WG (i < DPT), head_dim ≤ DPT·WG (host-checked).
// Grid: (n_head, n_tokens, n_split). Bindings: 0 q, 1 K cache, 2 V cache (uint words: f32 bits,
// or packed f16 pairs when KV_F16 = 1), 3 scratch (f32; the merge writes the output), 4 the step
// buffer (POS_BUF = 1) or a dummy.
#define ROCKY_ATTN_SPLIT 1
#include "common/header.glsl"
#include "common/attention_simple.glsl"
