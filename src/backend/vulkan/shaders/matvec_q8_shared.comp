#version 450
// matvec_q8 reduced in shared memory (one pass, one barrier): common/matvec_q8.glsl. For devices
// without subgroup arithmetic in compute shaders.
#define MMV_SUBGROUP 0
#include "common/matvec_q8.glsl"
