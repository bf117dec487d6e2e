# -*- coding: utf-8 -*-
# module_utils/gpunode_run.py: module options onto gpunode's flags.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import tempfile
import unittest

from ansible_collections.gpunode.gpunode.plugins.module_utils.gpunode_run import (
    option_flags,
    untrusted_binary,
)


class OptionFlagsTest(unittest.TestCase):
    def test_each_kind_of_value(self):
        params = {'scope': 'node', 'replicas': 4, 'only': ['driver', 'image'],
                  'all_nodes': True, 'smoke': False, 'skip': [],
                  'node': None, 'timeout': '', 'min_driver': 0}
        options = (('scope', '--scope'), ('replicas', '--replicas'),
                   ('only', '--only'), ('all_nodes', '--all-nodes'),
                   ('smoke', '--smoke'), ('skip', '--skip'), ('node', '--node'),
                   ('timeout', '--timeout'), ('min_driver', '--min-driver'),
                   ('absent', '--absent'))
        self.assertEqual(option_flags(params, options),
                         ['--scope', 'node', '--replicas', '4',
                          '--only', 'driver,image', '--all-nodes'])


class UntrustedBinaryTest(unittest.TestCase):
    """Regression (independent try of issue 26): the module ran a gpunode
    that anyone could rewrite, as root."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()  # 0700, ours
        self.binary = os.path.join(self.dir, 'gpunode')
        with open(self.binary, 'w') as f:
            f.write('#!/bin/sh\n')
        os.chmod(self.binary, 0o755)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_a_binary_only_we_can_write_is_trusted(self):
        self.assertIsNone(untrusted_binary(self.binary))

    def test_a_world_or_group_writable_binary_is_not(self):
        os.chmod(self.binary, 0o777)
        self.assertEqual(untrusted_binary(self.binary),
                         '%s is writable by everyone' % self.binary)
        os.chmod(self.binary, 0o775)
        self.assertEqual(untrusted_binary(self.binary),
                         '%s is writable by its group' % self.binary)

    def test_a_directory_others_can_write_is_not(self):
        os.chmod(self.dir, 0o777)
        self.assertEqual(untrusted_binary(self.binary),
                         '%s is writable by everyone' % self.dir)
        # Sticky, like /tmp: others cannot replace our file in it.
        os.chmod(self.dir, 0o1777)
        self.assertIsNone(untrusted_binary(self.binary))

    def test_another_owner_is_not(self):
        st = os.stat(self.binary)
        self.assertEqual(untrusted_binary(self.binary, euid=st.st_uid + 1),
                         None if st.st_uid == 0 else
                         '%s is owned by uid %d' % (self.binary, st.st_uid))

    def test_relative_paths_and_directories_are_not(self):
        self.assertEqual(untrusted_binary('gpunode'), 'is not an absolute path')
        self.assertEqual(untrusted_binary(self.dir), 'is not a regular file')

    def test_a_link_is_judged_by_its_target(self):
        link = os.path.join(self.dir, 'link')
        os.symlink(self.binary, link)
        self.assertIsNone(untrusted_binary(link))
        os.chmod(self.binary, 0o757)
        self.assertEqual(untrusted_binary(link),
                         '%s is writable by everyone' % self.binary)


if __name__ == '__main__':
    unittest.main()
