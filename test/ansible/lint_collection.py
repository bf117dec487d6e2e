"""ansible-lint over the collection, and ansible-doc for each of its modules
and its role (their documentation blocks must parse: ansible-doc is how a
site reads them offline). Exit 0, 1 on a finding, 77 without the tools."""

import shutil
import subprocess
import sys

import fleet_bed as bed
import fleet_checks as fc

COLLECTION = bed.COLLECTIONS / "ansible_collections" / "gpunode" / "gpunode"


def main():
    bed.require_tools()
    if shutil.which("ansible-lint") is None:
        bed.skip("ansible-lint not installed (scripts/setup.sh installs it)")
    checks = fc.Checks("lint")
    env = bed.ansible_env(bed.BUILD / "test")
    env.pop("ANSIBLE_STDOUT_CALLBACK")
    # --offline: no Galaxy look-ups (ansible-lint would install the
    # collection's dependencies otherwise); the machine may have no network.
    lint = subprocess.run(["ansible-lint", "--offline", "--nocolor", "-p"],
                          cwd=COLLECTION, env=env, capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)
    checks.check("ansible-lint finds nothing", lint.returncode == 0,
                 (lint.stdout + lint.stderr)[-4000:])
    modules = sorted(p.stem for p in (COLLECTION / "plugins" / "modules")
                     .glob("*.py") if p.stem != "__init__")
    checks.check("the collection has modules", bool(modules))
    docs = [("module", f"gpunode.gpunode.{m}") for m in modules]
    docs.append(("role", "gpunode.gpunode.gpunode"))
    for kind, name in docs:
        doc = subprocess.run(["ansible-doc", "-t", kind, name], env=env,
                             capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL)
        checks.check(f"ansible-doc -t {kind} {name}",
                     doc.returncode == 0 and name.split(".")[-1] in doc.stdout
                     and "ERROR" not in doc.stderr, doc.stderr[-2000:])
    return checks.exit_code()


if __name__ == "__main__":
    sys.exit(main())
