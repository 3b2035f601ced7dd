// The SPIR-V of every shaders/*.comp, embedded at build time by cmake/shaders.cmake (the arrays
// live in generated sources under the build tree; nothing generated is committed).
#pragma once

#include <cstddef>
#include <string_view>

namespace rocky::vulkan {

struct EmbeddedShader {
  const char* name;           // file stem: "matmul" for shaders/matmul.comp
  const unsigned char* code;  // SPIR-V words, little-endian, 4-byte aligned
  size_t size;                // bytes
};

extern const EmbeddedShader k_embedded_shaders[];
extern const size_t k_embedded_shader_count;

// The shader named `name`; rocky::Error when no such shader was built.
const EmbeddedShader& find_shader(std::string_view name);

}  // namespace rocky::vulkan
