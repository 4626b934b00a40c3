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
    return (unit["pkg_id"], unit["target"]["name"], unit["mode"], tuple(sorted(unit["features"])),
            unit.get("platform"), json.dumps(profile, sort_keys=True))


tests = {key(u) for u in unit_graph(["test", "--workspace", "--no-run"])}
tested_packages = {k[0] for k in tests}
python = unit_graph(["build", "--manifest-path", "python/Cargo.toml", "--lib", "--profile", "dev"])
# Crates only the Python package uses (pyo3, numpy, the module itself) are
# built once whatever the features; what matters is the shared ones.
differing = sorted({f"{u['pkg_id'].split('#')[-1]} features {sorted(u['features'])}"
                    for u in python if u["pkg_id"] in tested_packages and key(u) not in tests})
if differing:
    print("check-unification: the Python package's build would compile these shared crates differently "
          "from `cargo test --workspace` (add the test build's features to the workspace hack in python/Cargo.toml):")
    for d in differing:
        print("  " + d)
    sys.exit(1)
print(f"check-unification: the Python package's build reuses the test build for all "
      f"{sum(1 for u in python if u['pkg_id'] in tested_packages)} shared units")
