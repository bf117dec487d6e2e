# -*- coding: utf-8 -*-
# The options every gpunode module shares (module_utils/gpunode_run.py's
# COMMON_ARGS): one text for ansible-doc, one argument spec.

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    DOCUMENTATION = r'''
options:
  binary:
    description:
      - The gpunode binary on the node.
      - Default is C(<bundle>/bin/gpunode) when C(bundle) is set, else
        C(gpunode) on C(PATH) (the .deb's C(/usr/bin/gpunode)).
    type: path
  bundle:
    description:
      - The offline bundle directory on the node (the stick, mounted, or a
        copy of it). gpunode verifies it (signature, every file's hash) before
        it uses it, and never writes to it, so read-only media works.
    type: path
  root:
    description:
      - Directory that stands for the host's C(/) (C(--root)); tests and
        demos point it at a simulated host tree.
    type: path
    default: /
  trust_keys:
    description:
      - Publisher keys (Ed25519 C(.pub), paths on the node) the bundle must be
        signed with. gpunode also reads C(<root>/etc/gpunode/trusted-keys/*.pub).
    type: list
    elements: path
    default: []
  insecure_skip_signature:
    description:
      - Accept a bundle without checking who signed it (its hashes are still
        checked).
    type: bool
    default: false
requirements:
  - gpunode on the node (the bundle's C(bin/gpunode), or the .deb), run as root
    (use C(become)).
'''
