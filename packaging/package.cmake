# Packaging: the portable tree, the man page and bash completion (rendered by
# the binary from its own command line definition), and the .deb (cpack).
set(GPUNODE_PORTABLE ${CMAKE_BINARY_DIR}/portable/gpunode)
set(GPUNODE_DOCS ${CMAKE_BINARY_DIR}/docs)
# The Ansible collection build-portable.sh copies into the tree: an edit (or
# a new file, through CONFIGURE_DEPENDS) re-runs it, and so does a removed
# file (the directories are listed too: removing changes their mtime).
# __pycache__ is what an ansible run leaves there; build-portable.sh does not
# copy it either.
file(GLOB_RECURSE GPUNODE_COLLECTION_FILES CONFIGURE_DEPENDS LIST_DIRECTORIES
     true ${CMAKE_SOURCE_DIR}/packaging/ansible/*)
list(FILTER GPUNODE_COLLECTION_FILES EXCLUDE REGEX "/__pycache__(/|$)")
set(GPUNODE_COLLECTION
    ${GPUNODE_PORTABLE}/share/ansible/collections/ansible_collections/gpunode/gpunode)

add_custom_command(
  OUTPUT ${GPUNODE_PORTABLE}/bin/gpunode ${GPUNODE_PORTABLE}/lib/gpunode/gpunode
         ${GPUNODE_COLLECTION}/galaxy.yml
  COMMAND ${CMAKE_SOURCE_DIR}/packaging/build-portable.sh $<TARGET_FILE:gpunode>
          ${GPUNODE_PORTABLE}
  VERBATIM
  DEPENDS gpunode ${CMAKE_SOURCE_DIR}/packaging/build-portable.sh
          ${CMAKE_SOURCE_DIR}/packaging/portable-wrapper.sh
          ${GPUNODE_COLLECTION_FILES}
  COMMENT "Collecting the portable tree")
add_custom_command(
  OUTPUT ${GPUNODE_DOCS}/gpunode.1.gz ${GPUNODE_DOCS}/gpunode.bash
  COMMAND ${CMAKE_SOURCE_DIR}/packaging/render-docs.sh $<TARGET_FILE:gpunode>
          ${GPUNODE_DOCS}
  DEPENDS gpunode ${CMAKE_SOURCE_DIR}/packaging/render-docs.sh
  VERBATIM
  COMMENT "Rendering the man page and bash completion")
add_custom_target(gpunode_package_files ALL
  DEPENDS ${GPUNODE_PORTABLE}/bin/gpunode ${GPUNODE_DOCS}/gpunode.1.gz
          ${GPUNODE_DOCS}/gpunode.bash)

# The .deb carries the portable tree (/usr/bin/gpunode is the launcher,
# /usr/lib/gpunode/ the rest), so one package installs on Debian 12, Ubuntu
# 22.04/24.04 and older, and depends on nothing. The collection goes to
# /usr/share/ansible/collections, the system path in ansible-core's default
# COLLECTIONS_PATHS, so `ansible-doc gpunode.gpunode.gpunode` finds it.
install(PROGRAMS ${GPUNODE_PORTABLE}/bin/gpunode DESTINATION bin)
install(DIRECTORY ${GPUNODE_PORTABLE}/lib/gpunode DESTINATION lib
        USE_SOURCE_PERMISSIONS)
install(DIRECTORY ${GPUNODE_PORTABLE}/share/ansible DESTINATION share
        USE_SOURCE_PERMISSIONS)
install(FILES ${GPUNODE_DOCS}/gpunode.1.gz DESTINATION share/man/man1)
install(FILES ${GPUNODE_DOCS}/gpunode.bash
        DESTINATION share/bash-completion/completions RENAME gpunode)
install(FILES ${CMAKE_SOURCE_DIR}/packaging/config.toml
        DESTINATION /etc/gpunode)
install(DIRECTORY DESTINATION /etc/gpunode/trusted-keys)

# cpack packs what the build made; it never rebuilds (the tests run it while
# other targets may still be building).
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
file(WRITE ${CMAKE_BINARY_DIR}/deb-control/conffiles
     "/etc/gpunode/config.toml\n")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpunode)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Bring an NVIDIA GPU node running k3s to where Pods can use its GPUs, offline")
set(CPACK_PACKAGE_CONTACT "gpunode maintainers <gpunode@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# No maintainer scripts: only the conffiles list.
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/deb-control/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/package)
include(CPack)
