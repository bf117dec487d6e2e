# -*- coding: utf-8 -*-
# module_utils/gpunode_run.py: module options onto gpunode's flags.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import unittest

from ansible_collections.gpunode.gpunode.plugins.module_utils.gpunode_run import option_flags


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


if __name__ == '__main__':
    unittest.main()
