#version 450
// mul_mm with f16 shared-memory tiles (shaderFloat16): see common/mul_mm.glsl.
#define ROCKY_MM_F16 1
#include "common/mul_mm.glsl"
