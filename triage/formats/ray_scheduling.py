"""Ray's own words for a resource request it cannot schedule, as they reach a job's log.

- the autoscaler, printed to the driver: `(autoscaler +13s) Warning: The following resource
  request cannot be scheduled right now: {'GPU': 1.0, 'CPU': 1.0}. This is likely due to all
  cluster resources being claimed by actors.` (ray-project/ray python/ray/autoscaler/_private,
  its report of pending resource demands; OpenRLHF/OpenRLHF#516) and, for a request no node type
  can ever hold, `Error: No available node types can fulfill resource request {…}`;
- the raylet, for one actor or task: `… cannot be scheduled right now. It requires {…} for
  placement, however the cluster currently cannot provide …` (or `but this node only has
  remaining {…}`).

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


def holds_request(text: str) -> bool:
    """Whether `text` holds one of Ray's reports of a request it cannot schedule."""
    if "resource request" not in text and "cannot be scheduled right now" not in text:
        return False
    return any(p.search(text) for p in (INFEASIBLE, PENDING, RAYLET))
