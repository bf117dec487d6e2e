#!/usr/bin/python
# -*- coding: utf-8 -*-
# gpunode_bundle: `gpunode bundle verify --json`, read-only, on the node.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: gpunode_bundle
short_description: Verify a gpunode offline bundle on the node
version_added: 0.1.0
description:
  - Runs C(gpunode bundle verify), which checks the bundle in place and
    read-only, so read-only media works. It checks the signature of
    C(bundle.toml) against the trusted keys, then the size and SHA-256 of every
    file it lists.
  - Fails, naming each problem, when a hash or the signature does not verify.
    gpunode then refuses the bundle anyway, so nothing downstream runs on it.
  - Never changes anything, so C(changed) is always false.
  - Run on the controller (C(delegate_to=localhost)) with the controller's
    own gpunode, it returns C(bundle.toml_sha256), the digest of the
    C(bundle.toml) it verified; given to the modules on a node as
    C(bundle_sha256), it lets a node without a gpunode of its own run the
    bundle's C(bin/gpunode), once that file's SHA-256 is the one this
    verified C(bundle.toml) records.
extends_documentation_fragment:
  - gpunode.gpunode.common
options:
  bundle:
    description:
      - The bundle directory on the node.
    type: path
    required: true
  threads:
    description:
      - Hashing threads (0 means one per core).
    type: int
    default: 0
notes:
  - Supports check mode (it only reads).
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
author:
  - gpunode maintainers
'''

EXAMPLES = r'''
- name: Verify the stick
  gpunode.gpunode.gpunode_bundle:
    bundle: /media/usb/gpunode-bundle
    trust_keys: [/etc/gpunode/trusted-keys/site.pub]
  become: true
'''

RETURN = r'''
cmd:
  description: The gpunode command line that ran (the last one, in check or diff mode).
  returned: always
  type: list
  elements: str
bundle:
  description: What was verified.
  returned: success
  type: dict
  contains:
    files:
      description: Files C(bundle.toml) lists.
      type: int
    bytes:
      description: Their total size.
      type: int
    images:
      description: Images the bundle carries.
      type: int
    signed:
      description: The signature was checked against a trusted key.
      type: bool
    key_fingerprint:
      description: That key's fingerprint.
      type: str
    seconds:
      description: How long the check took.
      type: float
    toml_sha256:
      description: >-
        SHA-256 of the bundle.toml that was verified (read before and after
        the verify: a file that changed meanwhile fails).
      type: str
'''

import hashlib
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpunode.gpunode.plugins.module_utils.gpunode_events import (
    failure,
    failure_message,
)
from ansible_collections.gpunode.gpunode.plugins.module_utils.gpunode_run import (
    COMMON_ARGS,
    binary_of,
    root_flags,
    run_gpunode,
    trust_flags,
)


def main():
    argument_spec = dict(COMMON_ARGS)
    argument_spec.update(
        bundle=dict(type='path', required=True),
        threads=dict(type='int', default=0),
    )
    module = AnsibleModule(argument_spec=argument_spec,
                           supports_check_mode=True)
    p = module.params
    argv = [binary_of(module), 'bundle', 'verify', p['bundle'], '--json'] + \
        root_flags(p) + trust_flags(p)
    toml = os.path.join(p['bundle'], 'bundle.toml')
    before = toml_digest(toml)
    if p['threads']:
        argv += ['--threads', str(p['threads'])]
    run = run_gpunode(module, argv)
    what = failure(run.events, run.result)
    if what is not None:
        module.fail_json(msg=failure_message('bundle verify', run.result, what),
                         changed=False, rc=run.rc, failure=what,
                         stderr_tail=run.stderr)
    r = run.result
    if toml_digest(toml) != before:
        module.fail_json(msg='%s changed while it was verified' % toml,
                         changed=False, cmd=run.argv)
    module.exit_json(
        changed=False,
        cmd=run.argv,
        msg='bundle %s verified: %s files, %s bytes, %s' % (
            p['bundle'], r.get('files'), r.get('bytes'),
            'signed by %s' % r.get('key_fingerprint') if r.get('signed')
            else 'signature NOT checked'),
        bundle=dict(((k, r.get(k)) for k in (
            'files', 'bytes', 'images', 'signed', 'key_fingerprint',
            'seconds')), toml_sha256=before))


def toml_digest(path):
    try:
        with open(path, 'rb') as f:
            return hashlib.sha256(f.read()).hexdigest()
    except (IOError, OSError):
        return None


if __name__ == '__main__':
    main()
