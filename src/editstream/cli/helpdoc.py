"""The CLI reference as markdown from the commands' own ``--help``: ``python -m editstream.cli.helpdoc > docs/cli.md``
(a test checks the committed file against the commands)."""

from __future__ import annotations

import click

from . import main

WIDTH = 100


def _help(command: click.Command, name: str, parent: click.Context | None = None) -> tuple[str, click.Context]:
    ctx = click.Context(
        command,
        info_name=name,
        parent=parent,
        terminal_width=WIDTH,
        max_content_width=WIDTH,
        help_option_names=["-h", "--help"],
    )
    return command.get_help(ctx), ctx


def render() -> str:
    """Markdown with the help of ``editstream`` and of each subcommand, in a fixed width."""
    text, root = _help(main, "editstream")
    parts = [
        "# editstream command line\n",
        "Generated from `--help` by `python -m editstream.cli.helpdoc` (`make cli-doc`); do not edit.\n",
        f"```text\n$ editstream --help\n{text}\n```\n",
    ]
    assert isinstance(main, click.Group)
    for name in sorted(main.commands):
        sub, _ = _help(main.commands[name], name, root)
        parts.append(f"## editstream {name}\n\n```text\n$ editstream {name} --help\n{sub}\n```\n")
    return "\n".join(parts)


if __name__ == "__main__":  # pragma: no cover
    print(render(), end="")
