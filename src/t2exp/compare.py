"""``python -m t2exp.compare``: the command line is :mod:`t2exp.evaluation.compare`."""

import sys

from t2exp.evaluation.compare import main

if __name__ == "__main__":
    sys.exit(main())
