# Writes OUT, a header defining WEFT_BUILD_ID: a hash of every source file of weft's libraries
# (SOURCES, a ;-list), so that two processes of a job can tell whether they run the same weft
# (cluster/build_identity.h). Run at build time by cluster/CMakeLists.txt whenever a source
# changes; the header is rewritten only when the hash does, so nothing else rebuilds.
set(hashes "")
foreach(f IN LISTS SOURCES)
  file(SHA256 "${f}" h)
  string(APPEND hashes "${h}")
endforeach()
string(SHA256 id "${VERSION};${hashes}")
string(SUBSTRING "${id}" 0 16 id)
file(CONFIGURE OUTPUT "${OUT}.new" CONTENT "#pragma once\n#define WEFT_BUILD_ID \"${id}\"\n#define WEFT_VERSION \"${VERSION}\"\n")
file(COPY_FILE "${OUT}.new" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.new")
