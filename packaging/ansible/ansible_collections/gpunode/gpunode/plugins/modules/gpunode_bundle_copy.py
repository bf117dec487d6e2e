#!/usr/bin/python
# -*- coding: utf-8 -*-
# gpunode_bundle_copy: its work is done on the controller, by the action
# plugin of the same name (plugins/action/gpunode_bundle_copy.py); this file
# holds its documentation, which ansible-doc and ansible-lint read.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: gpunode_bundle_copy
short_description: Copy a verified gpunode bundle from the controller to a node as one tar stream
version_added: 0.2.0
description:
  - Streams the controller's bundle directory to the node, C(tar -c) on the
    controller straight into C(tar -x) on the node, with no tar file on
    either side.
  - Over the C(ssh) connection (no connection password) and the C(local)
    one, with become only when it needs no password. The stream runs on an
    ssh session of its own, uncompressed; the inventory's user, port, key
    and C(ssh_args) apply.
  - Over any other connection, or with a become or connection password, the
    tar is made once on the controller in O(cache) (one file a
    C(bundle.toml) SHA-256, kept for reruns), sent by the connection, and
    unpacked on the node.
  - The node unpacks into C(DEST.gpunode-new) and swaps it in only once the
    whole stream has been read, so a cut stream or a failed unpack leaves
    the node's previous bundle as it was, and no file of an older bundle
    stays behind.
  - It does not verify. Verify the copy on the node afterwards
    (M(gpunode.gpunode.gpunode_bundle) with C(bundle_sha256)), and verify
    O(src) on the controller first, with the controller's own gpunode.
options:
  src:
    description:
      - The bundle directory on the controller (it must hold C(bundle.toml)).
    type: path
    required: true
  dest:
    description:
      - The bundle directory on the node, replaced whole. Its parent is made
        when missing.
    type: path
    required: true
  sha256:
    description:
      - SHA-256 of the verified C(bundle.toml) (M(gpunode.gpunode.gpunode_bundle)'s
        C(bundle.toml_sha256)); it names the cached tar.
    type: str
    required: true
  cache:
    description:
      - Where the controller keeps the tar when the connection cannot stream.
    type: path
    default: ~/.cache/gpunode
notes:
  - In check mode nothing is copied; it reports C(changed).
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
author:
  - gpunode maintainers
'''

EXAMPLES = r'''
- name: Copy the bundle the controller verified
  gpunode.gpunode.gpunode_bundle_copy:
    src: /srv/gpunode-bundle
    dest: /var/cache/gpunode/bundle
    sha256: "{{ verified.bundle['toml_sha256'] }}"
  become: true
'''

RETURN = r'''
method:
  description: C(stream) or C(transfer) (C(none) in check mode).
  returned: always
  type: str
bytes:
  description: Bytes of the tar that was sent.
  returned: when copied
  type: int
dest:
  description: The bundle directory on the node.
  returned: always
  type: str
'''
