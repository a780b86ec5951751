"""`python -m speechgate.cli`: the same command as the `speechgate` script."""

from speechgate.cli import app

app()
