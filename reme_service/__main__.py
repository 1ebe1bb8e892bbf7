"""`python -m reme_service` is the `reme` command."""

from reme_service.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
