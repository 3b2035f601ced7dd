#version 450
// matvec_q8 (decode and short ubatches, N ≤ Env::mmv_q8): q8_1 activations, packed int8 dots, over
// the mmq repack, with subgroup reductions: common/matvec_q8.glsl. matvec_q8_shared.comp is the
// same kernel with a shared-memory reduction.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#define MMV_SUBGROUP 1
#include "common/matvec_q8.glsl"
