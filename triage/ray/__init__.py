"""Ray: runs read from Ray jobs, probes placed on a Ray cluster, and a watcher of failed jobs.

- `jobs_api`: the Ray dashboard's Job REST API over httpx (list, status, logs).
- `source`: a Ray job materialised into a run directory (`open_ray_run`).
- `executor`: `RayExecutor`, each probe a Ray task with the resources it declares.
- `watch`: `triage watch`, which triages every job that fails, once.

Importing this package imports nothing from Ray; only the executor needs `ray` itself.
"""
