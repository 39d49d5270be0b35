"""``python -m t2exp.report``: the command line is :mod:`t2exp.evaluation.report.cli`."""

import sys

from t2exp.evaluation.report.cli import main

if __name__ == "__main__":
    sys.exit(main())
