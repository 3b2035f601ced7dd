# Cross-compiling rocky for 64-bit Arm Linux (the RK3588 boards) on a Debian/Ubuntu x86-64 host:
#   sudo bash scripts/install-deps.sh --cross-arm64     (g++-aarch64-linux-gnu, the :arm64 -dev libraries)
#   cmake -S . -B build-arm64 -G Ninja --toolchain cmake/toolchains/aarch64-linux-gnu.cmake
# Debian's cross compilers (aarch64-linux-gnu-gcc/g++) and its multiarch layout: the :arm64 libraries
# live in /usr/lib/aarch64-linux-gnu, their headers in /usr/include (shared with the host's), their
# pkg-config files in /usr/lib/aarch64-linux-gnu/pkgconfig. Build tools (glslc, spirv-val) are the
# host's. Tests run under qemu-user: CTest prefixes every test executable with
# CMAKE_CROSSCOMPILING_EMULATOR, whose -L prefix tells qemu where the arm64 dynamic loader is.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Search the multiarch directories for :arm64 libraries and packages, the host for programs.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config: only the arm64 .pc files (and the architecture-independent ones), never the host's.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# The loader must be the one of the libc it loads. The :arm64 libraries rocky links pull in the
# multiarch libc (libc6:arm64, /lib/aarch64-linux-gnu), whose loader is /lib/ld-linux-aarch64.so.1:
# prefix "/". The cross toolchain's own loader (/usr/aarch64-linux-gnu/lib) belongs to the older
# libc6-arm64-cross; paired with the multiarch libc (Debian 12: 2.36-8cross1 with 2.36-9+deb12u14)
# every pthread_create spins forever under qemu. That prefix is only the fallback without libc6:arm64.
find_program(ROCKY_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(ROCKY_QEMU_AARCH64)
  if(EXISTS /lib/ld-linux-aarch64.so.1)
    set(CMAKE_CROSSCOMPILING_EMULATOR ${ROCKY_QEMU_AARCH64};-L;/)
  else()
    set(CMAKE_CROSSCOMPILING_EMULATOR ${ROCKY_QEMU_AARCH64};-L;/usr/aarch64-linux-gnu)
  endif()
endif()
