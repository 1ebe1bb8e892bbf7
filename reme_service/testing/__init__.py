"""Test kits shipped with the service: what a backend's or an extension's own tests build on (uses pytest)."""
