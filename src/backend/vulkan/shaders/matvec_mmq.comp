#version 450
// matvec_mmq (decode, N = 1) over the mmq repack with subgroup reductions: common/matvec_mmq.glsl.
// Needs subgroup arithmetic in compute shaders (DeviceInfo::subgroup_arith); matvec_mmq_shared.comp
// is the same kernel with a shared-memory reduction.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#define MMV_SUBGROUP 1
#include "common/matvec_mmq.glsl"
