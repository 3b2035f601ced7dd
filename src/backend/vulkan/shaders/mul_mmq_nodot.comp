#version 450
// mul_mmq without the int8 dot feature (bytes unpacked, integer FMA): see common/mul_mmq.glsl.
#define ROCKY_MMQ_NODOT 1
#include "common/mul_mmq.glsl"
