"""Adapters that plug the memory service into agent frameworks (each needs its framework's optional extra)."""
