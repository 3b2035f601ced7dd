# cmake -DSPV=x.spv -DOUT=x.spv.cpp -DNAME=x -P shader_embed.cmake: writes a C++ array of the SPIR-V.
file(READ ${SPV} hex HEX)
string(LENGTH "${hex}" n_hex)
math(EXPR n_bytes "${n_hex} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n" body "${body}")
file(WRITE ${OUT} "// Generated from ${NAME}.spv by cmake/shader_embed.cmake — do not edit.
#include <cstddef>
namespace rocky::vulkan {
extern const unsigned char k_spv_${NAME}[];
extern const size_t k_spv_${NAME}_size;
alignas(4) const unsigned char k_spv_${NAME}[] = {
${body}};
const size_t k_spv_${NAME}_size = ${n_bytes};
}  // namespace rocky::vulkan
")
