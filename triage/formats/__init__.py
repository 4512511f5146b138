"""Readers for the real artifact formats of slime / miles / Relax / Megatron / SGLang / HF Trainer."""
