#!/usr/bin/env python3
"""Checks that `pip install ./python` reuses the test build's artifacts.

`cargo test --workspace` and the Python package's build (maturin builds
the `trtc-python` crate alone, with the dev profile) each resolve the
features of every dependency. Where they differ for a crate, cargo compiles
that crate, and everything above it, twice: with tract and the compiler
above, about 10 minutes of a 2-core CI run. python/Cargo.toml asks for the
test build's features where they would differ (its "workspace hack"); this
script compares the two unit graphs (cargo's `--unit-graph`, read through
RUSTC_BOOTSTRAP=1 since the flag is unstable) and names each crate the
Python build would compile differently. Exit status 1 if there is one.

    python3 scripts/check-unification.py
"""

import hashlib
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def unit_graph(args):
    env = dict(os.environ, RUSTC_BOOTSTRAP="1")
    out = subprocess.run(["cargo", *args, "--locked", "--unit-graph", "-Z", "unstable-options"],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"check-unification: cargo {' '.join(args)} failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout)["units"]


def key(unit):
    # The profile's name (dev, test) is not part of an artifact's identity.
    profile = {k: v for k, v in unit["profile"].items() if k != "name"}
    return json.dumps([unit["pkg_id"], unit["target"]["name"], unit["target"]["kind"], unit["mode"],
                       sorted(unit["features"]), unit.get("platform"), profile], sort_keys=True)


def identities(units):
    """Each unit's identity: its own key and its dependencies' identities,
    as cargo's artifact hash covers the unit and everything below it (a
    crate built for the host, e.g. under a proc macro, differs from the
    same crate with the same features built for the target only here)."""
    memo = {}

    def ident(i):
        if i not in memo:
            u = units[i]
            deps = sorted(ident(d["index"]) for d in u["dependencies"])
            memo[i] = hashlib.sha256((key(u) + "|" + ",".join(deps)).encode()).hexdigest()
        return memo[i]

    return [ident(i) for i in range(len(units))]


tests_units = unit_graph(["test", "--workspace", "--no-run"])
tests = set(identities(tests_units))
tested_packages = {u["pkg_id"] for u in tests_units}
python_units = unit_graph(["build", "--manifest-path", "python/Cargo.toml", "--lib", "--profile", "dev"])
python_ids = identities(python_units)
# Crates only the Python package uses (pyo3, numpy, the module itself) are
# built once whatever the features; what matters is the shared ones. A
# shared unit is a cause when it differs from the test build while all its
# dependencies agree; everything above it is then built twice as well.
shared = [i for i, u in enumerate(python_units) if u["pkg_id"] in tested_packages]
differing = {i for i in shared if python_ids[i] not in tests}
causes = sorted({f"{python_units[i]['pkg_id'].split('#')[-1]} features {sorted(python_units[i]['features'])}"
                 for i in differing
                 if all(d["index"] not in differing for d in python_units[i]["dependencies"])})
if causes:
    print(f"check-unification: the Python package's build would compile {len(differing)} shared units again, "
          "because these differ from `cargo test --workspace` in their features or in those of a dependency "
          "(add the test build's features to the workspace hack in python/Cargo.toml; `cargo tree -e features "
          "-i CRATE` shows who enables what):")
    for c in causes:
        print("  " + c)
    sys.exit(1)
print(f"check-unification: the Python package's build reuses the test build for all {len(shared)} shared units")
