# cmake -DINPUT=<profile.json> -DOUTPUT=<file.c> -P embed.cmake
# Writes the profile as a C string, so that the agent carries its default
# seccomp profile and runs even where /etc/sandbox/seccomp.json is absent.
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n\t" bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
  "/* Generated from ${INPUT} by embed.cmake; do not edit. */\n"
  "#include <stddef.h>\n"
  "extern const char agent_seccomp_builtin_json[];\n"
  "extern const size_t agent_seccomp_builtin_len;\n"
  "const char agent_seccomp_builtin_json[] = {\n\t${bytes}0x00\n};\n"
  "const size_t agent_seccomp_builtin_len = sizeof(agent_seccomp_builtin_json) - 1;\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
