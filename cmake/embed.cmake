# A file's bytes as a C array, at build time, so that the binary carries it
# and looks up no file at run time (the agent's default seccomp profile,
# the supervisor's OpenAPI document):
#   cmake -DIN=<file> -DOUT=<file.c> -DNAME=<array> -DLEN=<length> -P embed.cmake
# makes `const char NAME[]` (the bytes, then a NUL, so it is also a C
# string) and `const size_t LEN` (the bytes without the NUL).
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n\t" bytes "${bytes}")
file(WRITE "${OUT}.tmp"
  "/* Generated from ${IN} by cmake/embed.cmake; do not edit. */\n"
  "#include <stddef.h>\n"
  "extern const char ${NAME}[];\n"
  "extern const size_t ${LEN};\n"
  "const char ${NAME}[] = {\n\t${bytes}0x00\n};\n"
  "const size_t ${LEN} = sizeof(${NAME}) - 1;\n")
file(RENAME "${OUT}.tmp" "${OUT}")
