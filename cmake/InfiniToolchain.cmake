# Compiler checks and project-wide flags.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR CMAKE_CXX_COMPILER_VERSION VERSION_LESS 19)
  message(FATAL_ERROR "Infini needs clang >= 19 for C++20 named modules "
                      "(found ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}); "
                      "configure with a preset or -DCMAKE_CXX_COMPILER=clang++-19")
endif()

add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wall> $<$<COMPILE_LANGUAGE:CXX>:-Wextra>)

# Sanitizers are scoped to C++ so the nvcc/g++ side does not record GCC's runtimes
# (see TOOLCHAIN-NOTES: mixing them aborts with "incompatible ASan runtimes").
if(INFINI_SANITIZE AND INFINI_TSAN)
  message(FATAL_ERROR "INFINI_SANITIZE (AddressSanitizer) and INFINI_TSAN (ThreadSanitizer) exclude each other")
endif()
if(INFINI_SANITIZE)
  set(infini_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
elseif(INFINI_TSAN)
  set(infini_sanitize_flags -fsanitize=thread -fno-omit-frame-pointer)
endif()
if(INFINI_SANITIZE OR INFINI_TSAN)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${infini_sanitize_flags}>")
  add_link_options("$<$<LINK_LANGUAGE:CXX>:${infini_sanitize_flags}>")
endif()
