"""The `speechgate` command: one module per command group, assembled here (in the order
`--help` lists them)."""

from __future__ import annotations

import typer

from speechgate.cli import (
    bench_command,
    chat_command,
    keys_command,
    lexicons_command,
    routing_command,
    say_command,
    serve_command,
    voices_command,
)

app = typer.Typer(help="OpenAI-compatible speech server for local text-to-speech engines.")
app.add_typer(keys_command.keys_app, name="keys")
app.command()(keys_command.usage)
app.add_typer(lexicons_command.app, name="lexicons")
app.command()(serve_command.serve)
app.command()(say_command.say)
app.add_typer(voices_command.app, name="voices")
app.command()(bench_command.bench)
app.command()(chat_command.chat)
app.add_typer(routing_command.app, name="routing")
