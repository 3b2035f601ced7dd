#version 450
// matvec_mmq (decode, N = 1) over the mmq repack, reduced in shared memory (one pass, one barrier):
// common/matvec_mmq.glsl. For devices without subgroup arithmetic in compute shaders.
#define MMV_SUBGROUP 0
#include "common/matvec_mmq.glsl"
