#version 450
// attention for the replayed decode step: common/attention_simple.glsl with n_past read from
// binding 4 (the step buffer, ROCKY_SC_POS_BUF's counterpart for this kernel).
#define ROCKY_ATTN_STEP 1
#include "common/header.glsl"
#include "common/attention_simple.glsl"
