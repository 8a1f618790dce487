"""One check for every `sapbert` command that writes a file: an existing output is replaced only with
`--overwrite`, and a file the command reads never is (`spacy_sapbert.util.atomic.check_new_file`)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Optional, Sequence

from typer.testing import CliRunner


def sapbert_app():
    """The `sapbert` app with the training commands, which come through the ``sapbert.cli`` entry points."""
    from spacy_sapbert.cli import app
    from spacy_sapbert.training.cli import register

    register(app)
    return app


def assert_output_guarded(args: Callable[[Path], List[str]], output: Path, reads: Sequence[Path] = (),
                          option: Optional[str] = None) -> None:
    """``args(path)``: the command's arguments writing ``path``. Over an existing ``output`` it is refused without
    ``--overwrite`` (the file left as it was; the error names ``option`` when given) and runs with it; over each
    file of ``reads`` it is refused even with ``--overwrite``, the file left as it was. What the run wrote is the
    caller's to check."""
    app, runner = sapbert_app(), CliRunner()
    output.write_text("mine\n", encoding="utf-8")
    refused = runner.invoke(app, args(output))
    assert refused.exit_code == 2 and "exists" in refused.output and "--overwrite" in refused.output, refused.output
    assert option is None or option in refused.output, refused.output
    assert output.read_text(encoding="utf-8") == "mine\n"
    done = runner.invoke(app, args(output) + ["--overwrite"])
    assert done.exit_code == 0, done.output
    for read in reads:
        before = read.read_bytes()
        refused = runner.invoke(app, args(read) + ["--overwrite"])
        assert refused.exit_code == 2 and "one of the files read" in refused.output, refused.output
        assert read.read_bytes() == before
