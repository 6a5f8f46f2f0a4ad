"""The command group: global flags (``-v``, ``-q``, ``--debug``, also after the subcommand), logging, and how
failures end: an ``Error:`` line and at most one of advice; exit 0 ok, 1 data, 2 usage, 130 Ctrl-C, 141 pipe closed."""

from __future__ import annotations

import contextlib
import logging
import os
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


EXIT_PIPE_CLOSED = 141
"""Exit code when stdout's reader went away: 128 + SIGPIPE, what a shell reports for ``cat``."""

_VERBOSE_HELP = "More log lines (-v: info, -vv: debug)."
_QUIET_HELP = "Only errors: no warnings, no progress bars."
_DEBUG_HELP = "Show the traceback of a failure (and debug log lines)."


def _late_flag(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """A global flag given after the subcommand: add it to the group's settings and log again."""
    if not value:
        return
    if param.name == "verbosity":
        SETTINGS.verbosity += int(value)
    else:  # quiet, debug
        setattr(SETTINGS, str(param.name), True)
    setup_logging(SETTINGS.verbosity, SETTINGS.quiet, SETTINGS.debug)


def _late_flags() -> list[click.Option]:
    """The global flags as a subcommand's own options (fresh objects for each subcommand)."""
    common: dict[str, Any] = {"expose_value": False, "is_eager": True, "callback": _late_flag}
    return [
        click.Option(["-v", "--verbose", "verbosity"], count=True, help=_VERBOSE_HELP, **common),
        click.Option(["-q", "--quiet", "quiet"], is_flag=True, help=_QUIET_HELP, **common),
        click.Option(["--debug", "debug"], is_flag=True, help=_DEBUG_HELP, **common),
    ]


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has closed it (a ``BrokenPipeError`` from elsewhere, a
    worker's pipe or a socket, is a real failure and is reported as one)."""
    try:
        import select

        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll() on this platform, or no real stdout
        return True


def _end_quietly_on_closed_stdout() -> None:
    """Exit :data:`EXIT_PIPE_CLOSED` without a word; stdout is pointed at /dev/null first so the
    interpreter's own final flush does not print "Exception ignored ... BrokenPipeError"."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(EXIT_PIPE_CLOSED)


class EditstreamGroup(click.Group):
    """A click group whose failures end in one or two lines and whose subcommands take the global flags."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        """Register ``cmd`` with ``-v``/``-q``/``--debug`` among its options (placed last in its help)."""
        taken = {opt for param in cmd.params for opt in getattr(param, "opts", [])}
        cmd.params.extend(o for o in _late_flags() if not taken & set(o.opts))
        super().add_command(cmd, name)

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
            if isinstance(exc, BrokenPipeError) and _stdout_closed():
                _end_quietly_on_closed_stdout()
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
        try:
            sys.stdout.flush()  # here, not in the interpreter's exit, so a closed pipe ends quietly
        except BrokenPipeError:
            _end_quietly_on_closed_stdout()
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=EditstreamGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="editstream")
@click.option("-v", "--verbose", "verbosity", count=True, help=_VERBOSE_HELP)
@click.option("-q", "--quiet", is_flag=True, help=_QUIET_HELP)
@click.option("--debug", is_flag=True, help=_DEBUG_HELP)
def main(verbosity: int, quiet: bool, debug: bool) -> None:
    """editstream: parquet <-> WebDataset data pipelines for BAGEL-style training.

    Exit codes: 0 ok, 1 a data or storage problem, 2 a usage error, 130 interrupted, 141 stdout
    closed early (as for cat). -v, -q and --debug go before or after the subcommand.
    """
    SETTINGS.verbosity, SETTINGS.quiet, SETTINGS.debug = verbosity, quiet, debug
    setup_logging(verbosity, quiet, debug)
