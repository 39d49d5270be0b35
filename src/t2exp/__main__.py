"""``t2exp`` / ``python -m t2exp``: a command of :mod:`t2exp.cli`, the help or a mistyped command's one
line, from the standard library alone (they answer at once); else the experiment app (:mod:`t2exp.cli.app`)."""

from __future__ import annotations

import os
import sys

from t2exp.cli import COMMANDS, run_command
from t2exp.cli.argv import is_override, unknown_command, usage
from t2exp.errors import exit_with
from t2exp.infra import collector
from t2exp.infra.redaction import redact_text


def main() -> None:
    """Console entry point. Output into a closed pipe (``t2exp --help | head -1``) ends quietly: the
    reader has what it wanted (the Python docs' "Note on SIGPIPE")."""
    collector.collect_less_often()
    argv = sys.argv[1:]
    try:
        if argv and argv[0] in COMMANDS:
            sys.exit(run_command(argv[0], argv[1:]))
        elif argv and not is_override(argv[0]):
            exit_with(redact_text(str(unknown_command(argv[0], list(COMMANDS)))))
        elif "-h" in argv or "--help" in argv:
            print(usage(COMMANDS))
        else:
            from t2exp.cli.app import main as app

            app()
    except BrokenPipeError:
        pass
    finally:
        try:
            sys.stdout.flush()  # here, not at exit, where a closed pipe is a message on stderr
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    main()
