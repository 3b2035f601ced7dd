#version 450
// mul_mmq with OpSDot (packed int8 dot): see common/mul_mmq.glsl.
#include "common/mul_mmq.glsl"
