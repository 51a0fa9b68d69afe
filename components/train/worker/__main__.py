"""`python -m components.train.worker`: one training worker (main.py)."""
import sys

from components.train.worker.main import main

sys.exit(main())
