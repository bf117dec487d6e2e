# -*- coding: utf-8 -*-
# Reads what `gpunode ... --json` prints (docs/json-events.md in the gpunode
# source: one JSON object per line, the last one the `result` event) and
# maps it onto Ansible's contract: changed, failed with the layer, the
# message and the fix, facts, and a diff. Pure functions over the parsed
# events, so the modules only run the binary and hand over its output.
# Python standard library only (Ansible's module rules).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

# The event schema this collection reads; gpunode raises it when a field
# changes meaning (docs/json-events.md, "Versioning"). A newer gpunode with
# a higher number is refused rather than misread.
SCHEMA_VERSION = 1

# README, "Exit codes"; the result event's `status` says the same in words.
EXIT_WORDS = {
    0: 'done',
    1: 'blocked',
    2: 'invalid input',
    3: 'timed out',
    4: 'bundle integrity or signature failure',
    5: 'cannot run',
}

# Stage statuses that mean install wrote something, or would.
_WROTE = ('applied',)
_WOULD_WRITE = ('would-apply', 'needed')


def safe_text(value):
    """Untrusted text (a node's file contents, an API server's message) with
    control characters written as escapes, so it cannot drive the terminal
    Ansible prints to (gpunode's --json carries text as found)."""
    if value is None:
        return ''
    text = value if isinstance(value, str) else str(value)
    out = []
    for ch in text:
        code = ord(ch)
        if code < 0x20 or code == 0x7f or 0x80 <= code <= 0x9f:
            out.append('\\x%02x' % code if code < 0x100 else '\\u%04x' % code)
        else:
            out.append(ch)
    return ''.join(out)


# gpunode's flags as the operator sets them under Ansible: the role's
# variable (the module option is the same name less `gpunode_`). The one
# table of it; ansible_terms() rewrites fix and message text with it. None:
# a flag without a value.
FLAG_VARIABLES = {
    '--all-nodes': 'gpunode_all_nodes',
    '--restart-k3s': 'gpunode_restart_k3s',
    '--replace-existing': 'gpunode_replace_existing',
    '--upgrade-toolkit': 'gpunode_upgrade_toolkit',
    '--rename-shared': 'gpunode_rename_shared',
    '--smoke': 'gpunode_smoke',
    '--insecure-skip-signature': 'gpunode_insecure_skip_signature',
    '--variant': 'gpunode_variant',
    '--replicas': 'gpunode_replicas',
    '--node': 'gpunode_node',
    '--timeout': 'gpunode_timeout',
    '--min-driver': 'gpunode_min_driver',
    '--image-archive': 'gpunode_image_archive',
    '--bundle': 'gpunode_bundle_dir',
    '--trust-key': 'gpunode_trust_keys',
    '--skip': 'gpunode_skip',
}
_VALUED = ('--variant', '--replicas', '--node', '--timeout', '--min-driver',
           '--image-archive', '--bundle', '--trust-key', '--skip')
# Flags whose role variable is a list: its value is written as one.
_LISTS = ('--skip', '--trust-key')
_FLAG = re.compile(r'(?<![\w-])(--[a-z0-9][a-z0-9-]*)(?![\w-])'
                   r'(?:(?:=| )(?!--)([^\s,;()]+))?')
_INSTALL = re.compile(r'(?:sudo )?gpunode install((?: --[a-z0-9-]+'
                      r'(?:(?:=| )(?!--)[^\s,;()]+)?)+)')


def _variable(match, with_value):
    flag, value = match.group(1), match.group(2)
    name = FLAG_VARIABLES.get(flag)
    if name is None:
        return None
    if flag not in _VALUED:
        # A value-less flag took the next word by mistake: give it back.
        # In a list of flags (--variant/--rename-shared), or "the same
        # --rename-shared setting", it is a name.
        after = match.string[match.end(1):]
        listed = '/' in (match.string[match.start(1) - 1:match.start(1)] +
                         after[:1]) or after.startswith(' setting')
        return '%s%s%s' % (name, '' if listed else ': true',
                           ' ' + value if value else '')
    if value and with_value:
        return '%s: %s' % (name, '[%s]' % value if flag in _LISTS else value)
    return name


def ansible_terms(text):
    """gpunode's fix or message text with its flags named as the role's
    variables: `rerun gpunode with --restart-k3s` becomes `rerun the
    playbook with gpunode_restart_k3s: true`, and `sudo gpunode install
    --scope cluster --all-nodes` `the playbook with gpunode_all_nodes:
    true` (the playbook picks the scope). Other text is left as it is."""
    if not text:
        return text

    def command(m):
        flags = [_variable(f, True) for f in _FLAG.finditer(m.group(1))]
        named = [f for f in flags if f]
        if not named:
            return m.group(0)
        return 'rerun the playbook with ' + ', '.join(named)
    text = _INSTALL.sub(command, text)
    text = _FLAG.sub(lambda m: _variable(m, m.group(1) in _VALUED) or
                     m.group(0), text)
    return re.sub(r'\brerun (?:rerun )?(?:gpunode |the playbook )?with ',
                  'rerun the playbook with ', text)


_HELP_FIX = re.compile(r"^gpunode ([a-z -]+?) --help gives each flag's values$")
_LEADING_FLAG = re.compile(r'^(--[a-z0-9][a-z0-9-]*)\b')


def variable_fix(message, fix):
    """A refused value's fix, under Ansible: gpunode points at its --help,
    but the operator edits a role variable, so the fix names it, e.g.
    `correct gpunode_timeout (gpunode install --help describes its values,
    as --timeout)`. Any other fix is returned as ansible_terms() says it."""
    flag = _LEADING_FLAG.match(message or '')
    helped = _HELP_FIX.match(fix or '')
    if not flag or not helped or flag.group(1) not in FLAG_VARIABLES:
        return ansible_terms(fix)
    return 'correct %s (gpunode %s --help describes its values, as %s)' % (
        FLAG_VARIABLES[flag.group(1)], helped.group(1), flag.group(1))


class EventError(Exception):
    """gpunode's output cannot be trusted: no result, or another schema."""


def parse_events(stdout):
    """The JSON events gpunode printed, in order. A line that is not a JSON
    object is not gpunode's (a wrapper's noise) and is left out."""
    events = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith('{'):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and 'event' in event:
            events.append(event)
    return events


def result_event(events, rc):
    """The last `result` event, once its schema is the one read here."""
    results = [e for e in events if e.get('event') == 'result']
    if not results:
        raise EventError(
            'gpunode exited %s (%s) without its JSON result line'
            % (rc, EXIT_WORDS.get(rc, 'killed' if rc < 0 or rc > 128 else
                                  'unknown exit code')))
    result = results[-1]
    schema = result.get('schema')
    if schema != SCHEMA_VERSION:
        raise EventError(
            'gpunode speaks JSON event schema %s; this collection reads %s: '
            'use the collection that came with this gpunode (the same bundle '
            'or .deb)' % (safe_text(schema), SCHEMA_VERSION))
    return result


def stage_events(events):
    """stage name -> its last `stage` event."""
    stages = {}
    for e in events:
        if e.get('event') == 'stage' and 'stage' in e:
            stages[e['stage']] = e
    return stages


def wrote_something(events, result):
    """install and uninstall: something on the node or in the cluster was
    written. An `apply` event counts even when the write then failed or the
    process died: what was half-written is a change Ansible must report."""
    if result.get('command') == 'uninstall':
        return any(s.get('status') == 'removed'
                   for s in result.get('stages', []))
    if any(e.get('event') == 'apply' for e in events):
        return True
    return any(e.get('status') in _WROTE for e in stage_events(events).values())


def would_write(events):
    """plan: install would change something."""
    return any(e.get('status') in _WOULD_WRITE
               for e in stage_events(events).values())


def cause_layer(stage_event):
    """The layer a blocked stage's cause is in: the smoke stage's facts
    name it (docs/json-events.md, smoke: `layer`, e.g. `image` for a CUDA
    image not on the node), where the stage's own layer is only where it
    looked (`Pod resource limit`); any other stage, its own."""
    layer = (stage_event.get('facts') or {}).get('layer')
    return layer if isinstance(layer, str) and layer else         stage_event.get('layer')


def failure(events, result):
    """The diagnosis of a run that did not end done: the failed apply or
    outside error first (it is why the run stopped), else the lowest blocked
    stage (gpunode checks bottom-up, so the first one printed), else the
    result's own summary. None when the run was done."""
    if result.get('exit_code') == 0:
        return None
    for e in events:
        if e.get('event') == 'error':
            return {
                'stage': e.get('layer'),
                'layer': e.get('layer'),
                'code': None,
                'message': ansible_terms(safe_text(e.get('message'))),
                'fix': variable_fix(safe_text(e.get('message')),
                                    safe_text(e.get('fix'))) or None,
            }
    for e in events:
        if e.get('event') == 'stage' and e.get('status') == 'blocked':
            return {
                'stage': e.get('stage'),
                'layer': safe_text(cause_layer(e)),
                'code': e.get('code'),
                'message': ansible_terms(safe_text(e.get('summary'))),
                'fix': ansible_terms(safe_text(e.get('fix'))) or None,
            }
    return {
        'stage': None,
        'layer': None,
        'code': None,
        'message': safe_text(result.get('summary')),
        'fix': None,
    }


def failure_message(command, result, what):
    """One line for Ansible's `msg`: the command, the layer, what is wrong
    and the fix, as gpunode's own [ERROR layer] line says them."""
    where = what.get('stage') or 'gpunode'
    line = 'gpunode %s: %s at %s' % (
        command, result.get('status') or EXIT_WORDS.get(
            result.get('exit_code'), 'failed'), where)
    if what.get('layer') and what.get('layer') != where:
        line += ' (%s)' % what['layer']
    line += ': %s' % what.get('message')
    if what.get('fix'):
        line += ' Fix: %s' % what['fix']
    return line


def summary(result, events):
    """What the module returns as `gpunode`: the run in brief, every field
    safe to print."""
    stages = stage_events(events)
    out = {
        'command': result.get('command'),
        'exit_code': result.get('exit_code'),
        'status': result.get('status'),
        'summary': safe_text(result.get('summary')),
        'scope': result.get('scope'),
        'role': result.get('role'),
        'stages': [],
        'failure': failure(events, result),
        'warnings': [],
    }
    for s in result.get('stages', []):
        name = s.get('stage')
        e = stages.get(name, {})
        out['stages'].append({
            'stage': name,
            'status': s.get('status'),
            'code': e.get('code'),
            'summary': ansible_terms(safe_text(e.get('summary'))),
            'fix': ansible_terms(safe_text(e.get('fix'))) or None,
        })
    for e in events:
        if e.get('event') == 'warning':
            out['warnings'].append('%s: %s' % (
                safe_text(e.get('layer')),
                ansible_terms(safe_text(e.get('message')))))
        elif e.get('event') == 'stage':
            for w in e.get('warnings', []) or []:
                out['warnings'].append('%s: %s' % (
                    e.get('stage'), ansible_terms(safe_text(w))))
    return out


def facts(events, result):
    """ansible_facts.gpunode from any run's stage events (status gives them
    all): the GPUs, the driver, the slots this node advertises, and every
    GPU node's when the run had the cluster part."""
    stages = stage_events(events)

    def stage_facts(name):
        return (stages.get(name) or {}).get('facts') or {}

    driver = stage_facts('driver')
    allocatable = stage_facts('allocatable')
    plugin = stage_facts('plugin')
    image = (stage_facts('image').get('image') or {})
    nodes = []
    this_node = None
    for n in allocatable.get('nodes', []) or []:
        entry = {
            'node': safe_text(n.get('node')),
            'gpus': n.get('gpus'),
            'resource': n.get('resource'),
            'expected': n.get('expected'),
            'advertised': n.get('advertised'),
            'ok': bool(n.get('ok')),
        }
        if n.get('cause'):
            entry['cause'] = {k: ansible_terms(safe_text(v))
                              for k, v in n['cause'].items()}
        nodes.append(entry)
        if n.get('this_node'):
            this_node = entry
    settings = plugin.get('cluster_plugin') or plugin.get('plugin') or {}
    return {
        'schema': result.get('schema'),
        'healthy': result.get('exit_code') == 0,
        'scope': result.get('scope'),
        'role': result.get('role'),
        'node': safe_text(stage_facts('preflight').get('node')) or None,
        'driver_version': driver.get('driver_version'),
        'gpu_count': driver.get('gpu_count'),
        'gpus': [{
            'index': g.get('index'),
            'name': safe_text(g.get('name')),
            'uuid': safe_text(g.get('uuid')),
            'memory_mib': g.get('memory_mib'),
            'mig_mode': g.get('mig_mode'),
        } for g in driver.get('gpus', []) or []],
        # Below the driver (docs/json-events.md, driver): whether CUDA runs
        # on the host, the NVSwitch fabric, and the GPUs the device plugin
        # will drop.
        'cuda': {
            'checked': bool((driver.get('cuda') or {}).get('checked')),
            'outcome': (driver.get('cuda') or {}).get('outcome'),
            'version': (driver.get('cuda') or {}).get('driver_api_version'),
        },
        'nvswitch': bool((driver.get('fabric') or {}).get('nvswitch')),
        'health': [{
            'gpu': h.get('gpu'),
            'kind': h.get('kind'),
            'unhealthy': bool(h.get('unhealthy')),
            'message': safe_text(h.get('message')),
        } for h in driver.get('health', []) or []],
        'image': {
            'ref': image.get('ref'),
            'digest': image.get('digest'),
            'pinned': image.get('pinned'),
        },
        'plugin': {
            'variant': settings.get('variant'),
            'replicas': settings.get('replicas'),
            'resource': settings.get('resource'),
        },
        'slots': this_node,
        'nodes': nodes,
        'stages': {s.get('stage'): s.get('status')
                   for s in result.get('stages', [])},
    }


def _slots_line(slots):
    if not slots or slots.get('resource') is None:
        return 'no nvidia.com resource'
    return '%s %s' % (slots.get('resource'), slots.get('count'))


def plan_diff(events):
    """Ansible's diff of a plan: one entry a stage that would change, the
    state now before, what install does after. The plugin stage shows each
    GPU node's slots now and after (its facts' `nodes`)."""
    diffs = []
    for name, e in stage_events(events).items():
        if e.get('status') not in _WOULD_WRITE:
            continue
        before = [safe_text(e.get('summary'))]
        after = [safe_text(e.get('action') or e.get('summary'))]
        f = e.get('facts') or {}
        objects = f.get('objects') or {}
        for verb in ('create', 'update', 'delete'):
            for obj in objects.get(verb, []) or []:
                after.append('%s %s' % (verb, safe_text(obj)))
        for n in f.get('nodes', []) or []:
            if 'now' in n and 'after' in n:
                before.append('node %s: %s' % (safe_text(n.get('node')),
                                               _slots_line(n['now'])))
                after.append('node %s: %s' % (safe_text(n.get('node')),
                                              _slots_line(n['after'])))
        for label in f.get('labels', []) or []:
            line = '%s=%s' % (safe_text(label.get('name')),
                              safe_text(label.get('value')))
            if label.get('set'):
                before.append(line)
            after.append(line)
        diffs.append({
            'before_header': '%s (%s): now' % (name, safe_text(e.get('layer'))),
            'after_header': '%s: after install' % name,
            'before': '\n'.join(before) + '\n',
            'after': '\n'.join(after) + '\n',
        })
    return diffs
