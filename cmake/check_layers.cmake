# The layers' include rule, checked on every build (target
# gpunode_layer_check) and by the ctest meta-layers-*:
#
#   common/  <  bundle/  <  installer/
#
# A layer includes its own headers and those of the layers below, never one
# above. The include paths already make an upward "gpunode/..." include fail
# to compile (each layer's include/ is on the path of that layer and the ones
# above only); this script closes what a path cannot: a quoted include that
# climbs out of its directory ("../..."), and a header of a higher layer
# named by any other spelling.
#
#   cmake -DROOT=<source dir> [-DEXTRA_FILE=<file> -DEXTRA_LAYER=<layer>] -P check_layers.cmake
#
# EXTRA_FILE checks one more file as if it sat in EXTRA_LAYER (the ctest's
# injected upward include). Fails with one line per offending include.
cmake_minimum_required(VERSION 3.18)
if(NOT ROOT)
  message(FATAL_ERROR "check_layers: pass -DROOT=<source dir>")
endif()

set(layers common bundle installer)
# The headers CMake generates into build/generated/, and the layer that owns them.
set(generated_headers_bundle images_lock_data.hpp manifests_data.hpp)

function(layer_rank layer out)
  list(FIND layers "${layer}" rank)
  set(${out} ${rank} PARENT_SCOPE)
endfunction()

# The layer whose include/ holds gpunode/NAME, or "" when none does.
function(owner_of_public header out)
  set(found "")
  foreach(layer IN LISTS layers)
    if(EXISTS "${ROOT}/${layer}/include/${header}")
      set(found ${layer})
    endif()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

set(problems "")
function(check_file file layer)
  layer_rank(${layer} rank)
  file(STRINGS "${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  get_filename_component(dir "${file}" DIRECTORY)
  file(RELATIVE_PATH shown "${ROOT}" "${file}")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*" "\\1" name "${line}")
    if(name MATCHES "(^|/)\\.\\.(/|$)")
      list(APPEND problems "${shown}: #include \"${name}\" climbs out of its directory (include a header by its layer's path, gpunode/...)")
      continue()
    endif()
    if(name MATCHES "^gpunode/")
      owner_of_public("${name}" owner)
      if(owner STREQUAL "")
        continue()  # not a header of ours: the compiler says so
      endif()
      layer_rank(${owner} owner_rank)
      if(owner_rank GREATER rank)
        list(APPEND problems "${shown} (layer ${layer}): #include \"${name}\" runs upward into ${owner}/ (move the code it needs down, or the caller up)")
      endif()
      continue()
    endif()
    list(FIND generated_headers_${layer} "${name}" generated)
    if(EXISTS "${dir}/${name}" OR NOT generated EQUAL -1)
      continue()
    endif()
    # A private header of a higher layer, reached through its include path
    # (installer/ is on gpunode_core's path for "stages/...", "kube/...").
    foreach(higher IN LISTS layers)
      layer_rank(${higher} higher_rank)
      if(higher_rank GREATER rank AND EXISTS "${ROOT}/${higher}/${name}")
        list(APPEND problems "${shown} (layer ${layer}): #include \"${name}\" runs upward into ${higher}/")
      endif()
    endforeach()
  endforeach()
  set(problems "${problems}" PARENT_SCOPE)
endfunction()

foreach(layer common bundle)
  file(GLOB_RECURSE files "${ROOT}/${layer}/*.cpp" "${ROOT}/${layer}/*.hpp" "${ROOT}/${layer}/*.hpp.in")
  foreach(file IN LISTS files)
    check_file("${file}" ${layer})
  endforeach()
endforeach()
if(EXTRA_FILE)
  check_file("${EXTRA_FILE}" ${EXTRA_LAYER})
endif()

if(problems)
  list(LENGTH problems count)
  string(REPLACE ";" "\n  " listed "${problems}")
  message(FATAL_ERROR "check_layers: ${count} include(s) against the layers (common < bundle < installer):\n  ${listed}")
endif()
