"""`python -m components.train.k8s rbac`: see cli.py."""
from components.train.k8s.cli import main

raise SystemExit(main())
