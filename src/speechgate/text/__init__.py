"""Text handling: splitting input into segments an engine can speak one after another."""
