"""``python -m perfgate`` runs the CLI."""

from __future__ import annotations

import sys

from perfgate.cli import main

sys.exit(main())
