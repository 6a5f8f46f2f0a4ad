"""The file NeMo's launcher runs for ``recipe: editstream.nemo.PretrainRecipeForMultimodal``.

``automodel CFG --nproc-per-node N`` starts torchrun on ``<site-packages>/editstream/nemo.py`` (the
recipe's module as a path). Imports never load this file: the package ``editstream/nemo/`` beside it
wins. Run as a script, it takes its own directory off ``sys.path`` (where ``editstream``'s
subpackages would shadow top-level names) and runs :func:`editstream.nemo.recipes.main`.
"""

import os
import sys


def _drop_own_directory() -> None:
    """Remove this file's directory, which Python put first on ``sys.path``, from ``sys.path``."""
    own = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:] = [entry for entry in sys.path if os.path.realpath(entry or os.curdir) != own]


def _run() -> None:
    _drop_own_directory()
    from editstream.nemo.recipes import main

    main()


if __name__ == "__main__":
    _run()
