"""The testbed as a framework a replay relaunches, registered like slime (`triage.frameworks`).

Its entry is the module `triage.testbed.train`, installed with this package; its job runs
in the run directory (the run's paths are relative to it) and needs no GPU. What fault
the relaunched job plants is the testbed's "installed code": the environment the caller
gives the relaunch (`Run.relaunch_env`, e.g. `triage bench` from the scenario's
definition), never anything the run directory holds.
"""

from __future__ import annotations

from triage.replay.frameworks import Framework

FRAMEWORK = Framework("testbed", "triage.testbed", modules=("triage.testbed.train",), needs_gpu=False,
                      log_flag="--testbed-log", cwd="run",
                      dropped_flags=("--testbed-engine-dump", "--testbed-output-dir"))
