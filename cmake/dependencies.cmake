# Every system dependency of weft, found once for all layers. scripts/setup installs them.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(MPI REQUIRED COMPONENTS C)
find_package(CapnProto REQUIRED)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
find_package(fmt REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(ZLIB REQUIRED)
# oneDNN (Debian's libdnnl-dev) computes the float32 convolutions on the CPU
# (kernels/cpu/conv_onednn.cpp). Debian builds it on OpenMP (it needs libgomp), and weft sets
# OpenMP's thread count to the CPU device's before each call, so it links libgomp itself too.
# Found as plain paths rather than dnnl's CMake package, whose config also looks for OpenCL and
# would have to be found again by every project that links weft.
find_path(WEFT_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp REQUIRED)
find_library(WEFT_DNNL_LIBRARY dnnl REQUIRED)
find_library(WEFT_GOMP_LIBRARY NAMES gomp libgomp.so.1 REQUIRED)
