"""Built-in probes, registered through the `triage.probes` entry-point group like any plugin."""
