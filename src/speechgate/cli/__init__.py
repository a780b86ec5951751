"""The `speechgate` command: one module per command group, assembled here (in the order
`--help` lists them)."""

from __future__ import annotations

import typer

from speechgate.cli import bench, chat, keys, lexicons, routing, say, serve, voices

app = typer.Typer(help="OpenAI-compatible speech server for local text-to-speech engines.")
app.add_typer(keys.keys_app, name="keys")
app.command()(keys.usage)
app.add_typer(lexicons.app, name="lexicons")
app.command()(serve.serve)
app.command()(say.say)
app.add_typer(voices.app, name="voices")
app.command()(bench.bench)
app.command()(chat.chat)
app.add_typer(routing.app, name="routing")
