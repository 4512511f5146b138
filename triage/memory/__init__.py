"""A team's memory of its runs.

- `diff`, `divergence`, `baseline`: what changed since the last good run of the same job
  (arguments, package versions, data / checkpoint paths, the first metric that left the
  baseline's trajectory, new error lines), and where that baseline is found.
- `bearing`: which catalog verdicts a changed argument or package bears on.
- `store`: every triage's verdict and error signature, and the causes users confirmed,
  in SQLite (`$TRIAGE_DB`).
- `enrich`: the report's "Changed since the last good run" section and "seen before" line.
- `known`, `stats`: listing, export / import of confirmed causes; verdict quality.
- `cli`, `slack`: the `triage diff / confirm / known / stats` commands and the Slack buttons.
"""
