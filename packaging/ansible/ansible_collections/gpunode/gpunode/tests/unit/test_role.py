# -*- coding: utf-8 -*-
# roles/gpunode: every variable in defaults/main.yml is documented in
# meta/argument_specs.yml (ansible-doc and Ansible's own check read it) and
# used by a task or the playbook; the ones operators asked for are there.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import unittest

import yaml

COLLECTION = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
ROLE = os.path.join(COLLECTION, 'roles', 'gpunode')


def load(*parts):
    with open(os.path.join(*parts)) as f:
        return yaml.safe_load(f)


def tasks_text():
    text = ''
    for path in glob.glob(os.path.join(ROLE, 'tasks', '*.yml')) + \
            glob.glob(os.path.join(ROLE, 'vars', '*.yml')) + \
            glob.glob(os.path.join(COLLECTION, 'playbooks', '*.yml')):
        with open(path) as f:
            text += f.read()
    return text


class RoleVariablesTest(unittest.TestCase):
    def setUp(self):
        self.defaults = load(ROLE, 'defaults', 'main.yml')
        self.specs = load(ROLE, 'meta', 'argument_specs.yml')[
            'argument_specs']['main']['options']

    def test_the_operators_settings_are_role_variables(self):
        for name in ('gpunode_replace_existing', 'gpunode_smoke',
                     'gpunode_node', 'gpunode_serial', 'gpunode_timeout'):
            self.assertIn(name, self.defaults)
            self.assertIn(name, self.specs)

    def test_every_default_is_documented_and_used(self):
        text = tasks_text()
        for name, value in self.defaults.items():
            self.assertIn(name, self.specs, name)
            self.assertIn(name, text, '%s is set nowhere in a task' % name)
            if '{{' not in str(value):
                self.assertEqual(self.specs[name].get('default'), value, name)
        for name in self.specs:
            self.assertIn(name, self.defaults, name)

    def test_timeout_unset_leaves_gpunodes_own(self):
        # config.toml and GPUNODE_TIMEOUT apply unless the play sets one.
        self.assertEqual(self.defaults['gpunode_timeout'], '')
        self.assertNotIn('timeout: "{{ gpunode_timeout }}"', tasks_text())

    def test_only_a_zero_replicas_is_left_out(self):
        # Regression (independent try of issue 26): gpunode_replicas: -1
        # was dropped (`| int > 0`) and the default used without a word;
        # only 0 means the default, anything else goes to gpunode to check.
        text = tasks_text()
        self.assertNotIn('gpunode_replicas | int > 0', text)
        for path in glob.glob(os.path.join(ROLE, 'tasks', '*.yml')):
            with open(path) as f:
                for line in f:
                    if 'replicas:' in line and 'gpunode_replicas' in line:
                        self.assertIn('gpunode_replicas | int != 0', line,
                                      path)


if __name__ == '__main__':
    unittest.main()
