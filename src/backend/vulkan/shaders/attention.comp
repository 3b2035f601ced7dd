#version 450
// attention: see common/attention_simple.glsl (n_past from the push constant).
#include "common/header.glsl"
#include "common/attention_simple.glsl"
