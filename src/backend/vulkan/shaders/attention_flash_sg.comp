#version 450
// attention_flash_sg: common/attention_flash.glsl with FA_SG = 1 — a row group is one subgroup
// (subgroupMax / subgroupAdd row reductions, P exchanged within the subgroup, K and V staged
// together: two workgroup barriers per key block). The host runs it where the tile's CT equals the
// device's fixed subgroup size and subgroup arithmetic is supported (ops/attention.cpp).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#define FA_SG 1
#include "common/attention_flash.glsl"
