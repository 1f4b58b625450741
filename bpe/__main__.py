"""`python -m bpe ...` is the `bpe` command."""

from bpe.cli import main

raise SystemExit(main())
