"""Root-cause triage for LLM reinforcement-learning post-training runs."""

__version__ = "0.1.0"
