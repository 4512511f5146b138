"""Rendering a Report: terminal (rich), JSON, Markdown."""
