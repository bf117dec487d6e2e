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
      - The gpunode binary on the node, one you trust.
      - Default is C(gpunode) on C(PATH) (the .deb's C(/usr/bin/gpunode)),
        which verifies the bundle itself before it uses it. With none there,
        the bundle's own C(bin/gpunode) runs only as a private copy (a 0700
        directory) whose SHA-256 is the one the C(bundle.toml) verified on
        the controller records (C(bundle_sha256)); without C(bundle_sha256)
        it is refused, since a stick's binary cannot vouch for its stick.
    type: path
  bundle_sha256:
    description:
      - SHA-256 of the C(bundle.toml) a trusted gpunode verified (on the
        controller, M(gpunode.gpunode.gpunode_bundle)'s C(bundle.toml_sha256)).
        This node's C(bundle.toml) must have it before the bundle's
        C(bin/gpunode) may run; only used when no C(binary) is given and no
        gpunode is on C(PATH).
    type: str
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
  - gpunode on the node (the .deb, or the bundle's C(bin/gpunode) verified as
    C(bundle_sha256) says), run as root (use C(become)).
'''
