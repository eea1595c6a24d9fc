# A file's bytes as a C array, at build time (no file looked up at run time):
#   cmake -DIN=<file> -DOUT=<file.c> -DNAME=<symbol> -P embed.cmake
# makes `const unsigned char NAME[]` (the bytes, then a NUL so the array is
# also a C string) and `const size_t NAME_len` (the bytes without the NUL).
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}.tmp"
  "/* Made by cmake/embed.cmake from ${IN}: do not edit. */\n"
  "#include <stddef.h>\n"
  "extern const unsigned char ${NAME}[];\n"
  "extern const size_t ${NAME}_len;\n"
  "const unsigned char ${NAME}[] = {\n${bytes}0x00 };\n"
  "const size_t ${NAME}_len = ${len};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
