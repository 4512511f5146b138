"""Declarative decision graphs (YAML) and the verdict catalog."""
