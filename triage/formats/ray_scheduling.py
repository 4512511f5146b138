"""Ray's own words for a resource request it cannot schedule, as they reach a job's log.

- the autoscaler, printed to the driver: `(autoscaler +13s) Warning: The following resource
  request cannot be scheduled right now: {'GPU': 1.0, 'CPU': 1.0}. This is likely due to all
  cluster resources being claimed by actors.` (ray-project/ray python/ray/autoscaler/_private,
  its report of pending resource demands; OpenRLHF/OpenRLHF#516) and, for a request no node type
  can ever hold, `Error: No available node types can fulfill resource request {…}`;
- the raylet, for one actor or task: `… cannot be scheduled right now. It requires {…} for
  placement, however the cluster currently cannot provide …` (or `but this node only has
  remaining {…}`).

- `ray status`, pasted: a pending placement group under `Demands:` (`{'GPU': 1.0} * 2 (PACK): 1+
  pending placement groups`, python/ray/autoscaler/_private/util.py; gpustack/gpustack#5509,
  ray-project/ray#47792);
- vLLM's Ray executor waiting for its engine's placement group: `Waiting for creating a placement
  group of specs for 150 seconds. specs=[{'GPU': 1.0}, {'GPU': 1.0}]. Check `ray status` …`
  (vllm/v1/executor/ray_utils.py _wait_until_pg_ready; vllm-project/aibrix#927).

`probes.config_rule` weighs each request against the cluster's resources; the symptom and the
run check only ask whether a text holds one.
"""

from __future__ import annotations

import re

INFEASIBLE = re.compile(r"No available node types can fulfill resource request (?P<req>\{[^}]*\})")
PENDING = re.compile(r"The following resource request cannot be scheduled right now: (?P<req>\{[^}]*\})")
RAYLET = re.compile(
    r"cannot be scheduled right now\. It requires (?P<req>\{[^}]*\}) for placement, "
    r"(?:however the cluster currently cannot provide|but this node only has remaining (?P<node>\{[^}]*\}))"
)


STATUS_DEMAND = re.compile(
    r"^\s*(?P<req>\{[^}]*\})\s*\*\s*(?P<n>\d+)\s*\((?P<strategy>[A-Z_]+)\):\s*\d+\+ pending placement groups", re.M)
VLLM_WAIT = re.compile(r"Waiting for creating a placement group of specs for (?P<s>\d+) seconds\. specs=(?P<specs>\[[^\]]*\])")


def holds_request(text: str) -> bool:
    """Whether `text` holds one of Ray's reports of a request it cannot schedule."""
    if "pending placement groups" in text and STATUS_DEMAND.search(text):
        return True
    if "Waiting for creating a placement group" in text and VLLM_WAIT.search(text):
        return True
    if "resource request" not in text and "cannot be scheduled right now" not in text:
        return False
    return any(p.search(text) for p in (INFEASIBLE, PENDING, RAYLET))
