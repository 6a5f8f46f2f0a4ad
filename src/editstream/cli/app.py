"""The command group: global flags (``-v``, ``-q``, ``--debug``), logging, and how failures end.

Exit codes: 0 success, 1 a data or storage problem (missing data, no credentials, a failed
verification), 2 a usage error (an option or path that the command line must change), 130
Ctrl-C. Every failure is printed as one ``Error:`` line plus at most one line of advice;
``--debug`` lets the exception through with its traceback instead.
"""

from __future__ import annotations

import logging
import sys
import traceback
import warnings
from dataclasses import dataclass
from typing import Any

import click

from .errors import explain

RESUMABLE = {"convert"}
"""Commands whose re-run picks up where an interrupted run stopped."""


@dataclass
class Settings:
    """The global flags, for subcommands (progress bars follow ``quiet``)."""

    verbosity: int = 0
    quiet: bool = False
    debug: bool = False


SETTINGS = Settings()


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info and SETTINGS.debug:
            message += "\n" + self.formatException(record.exc_info)
        return f"{record.levelname.lower()}: {message}"


def setup_logging(verbosity: int, quiet: bool, debug: bool) -> None:
    """Log to stderr: warnings by default, errors only with ``-q``, info with ``-v``, debug with ``-vv``/``--debug``."""
    level = logging.WARNING
    if quiet:
        level = logging.ERROR
        warnings.simplefilter("ignore")  # -q promises no warnings, Python's (torch's, pyarrow's) included
    if verbosity == 1:
        level = logging.INFO
    if verbosity >= 2 or debug:
        level = logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    root = logging.getLogger("editstream")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


class EditstreamGroup(click.Group):
    """A click group whose failures end in one or two lines and whose Ctrl-C exits 130."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:
            if SETTINGS.debug:
                raise
            command = ctx.invoked_subcommand or ""
            advice = "; re-run the same command to resume" if command in RESUMABLE else ""
            click.echo(f"\ninterrupted{advice}", err=True)
            raise click.exceptions.Exit(130) from None
        except Exception as exc:
            if SETTINGS.debug:
                raise
            raise explain(exc) from None

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Run the command line; usage errors print the error and where help is, not the whole usage."""
        kwargs["standalone_mode"] = False
        try:
            code = super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.format_message(), err=True)  # the help itself, as click shows it
            sys.exit(exc.exit_code)
        except click.exceptions.UsageError as exc:
            click.echo(f"Error: {exc.format_message()}", err=True)
            if exc.ctx is not None:
                click.echo(f"Try '{exc.ctx.command_path} -h' for help.", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.ClickException as exc:
            if SETTINGS.debug:
                traceback.print_exception(exc)
            exc.show()
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("\ninterrupted", err=True)
            sys.exit(130)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=EditstreamGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="editstream")
@click.option("-v", "--verbose", "verbosity", count=True, help="More log lines (-v: info, -vv: debug).")
@click.option("-q", "--quiet", is_flag=True, help="Only errors: no warnings, no progress bars.")
@click.option("--debug", is_flag=True, help="Show the traceback of a failure (and debug log lines).")
def main(verbosity: int, quiet: bool, debug: bool) -> None:
    """editstream: parquet <-> WebDataset data pipelines for BAGEL-style training.

    Exit codes: 0 ok, 1 a data or storage problem, 2 a usage error, 130 interrupted.
    """
    SETTINGS.verbosity, SETTINGS.quiet, SETTINGS.debug = verbosity, quiet, debug
    setup_logging(verbosity, quiet, debug)
