"""stdout callback: the whole run as one JSON document, for the tests.

ansible-core 2.14 (Debian 12's) ships no json callback: that one is in the
ansible.posix collection (plugins/callback/json.py), which Debian packages
only in the full `ansible`. This writes the same shape, the parts the tests
read: {"plays": [{"play": {"name"}, "tasks": [{"task": {"name"},
"hosts": {HOST: result}}]}], "stats": {HOST: {ok, changed, failures,
unreachable, rescued, skipped, ignored}}}.
"""

import json
import time

from ansible.module_utils.common.json import AnsibleJSONEncoder
from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: fleet_json
    type: stdout
    short_description: the run as one JSON document (tests only)
    description: ansible.posix.json's output shape, for ansible-core alone.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "fleet_json"

    def __init__(self):
        super().__init__()
        self.plays = []

    def v2_playbook_on_play_start(self, play):
        self.plays.append({"play": {"name": play.get_name()}, "tasks": []})

    def _task_start(self, task):
        if not self.plays:  # ad-hoc runs start no play of their own name
            self.plays.append({"play": {"name": ""}, "tasks": []})
        self.plays[-1]["tasks"].append(
            {"task": {"name": task.get_name(), "start": time.time()},
             "hosts": {}})

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._task_start(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._task_start(task)

    def _record(self, result, **flags):
        if not self.plays or not self.plays[-1]["tasks"]:
            self._task_start(result._task)
        body = dict(result._result)
        body.update(flags)
        # Seconds since the task started, for finding where a run's time goes.
        body["_fleet_seconds"] = round(
            time.time() - self.plays[-1]["tasks"][-1]["task"]["start"], 3)
        self.plays[-1]["tasks"][-1]["hosts"][result._host.get_name()] = body

    def v2_runner_on_ok(self, result):
        self._record(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, failed=True)

    def v2_runner_on_unreachable(self, result):
        self._record(result, unreachable=True)

    def v2_runner_on_skipped(self, result):
        self._record(result, skipped=True)

    def v2_playbook_on_stats(self, stats):
        summary = {host: stats.summarize(host) for host in sorted(stats.processed)}
        self._display.display(json.dumps(
            {"plays": self.plays, "stats": summary}, cls=AnsibleJSONEncoder,
            indent=1, sort_keys=True))
