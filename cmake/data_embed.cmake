# cmake -DIN=x.json -DOUT=x.json.cpp -DNAME=x -P data_embed.cmake: writes a C++ array of the file's
# bytes (rocky::tune::k_profile_<NAME>, not NUL-terminated, and its size).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n_hex)
math(EXPR n_bytes "${n_hex} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n" body "${body}")
file(WRITE ${OUT} "// Generated from ${NAME}.json by cmake/data_embed.cmake — do not edit.
#include <cstddef>
namespace rocky::tune {
extern const unsigned char k_profile_${NAME}[];
extern const size_t k_profile_${NAME}_size;
const unsigned char k_profile_${NAME}[] = {
${body}};
const size_t k_profile_${NAME}_size = ${n_bytes};
}  // namespace rocky::tune
")
