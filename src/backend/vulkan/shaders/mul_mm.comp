#version 450
// mul_mm with f32 shared-memory tiles: see common/mul_mm.glsl.
#include "common/mul_mm.glsl"
