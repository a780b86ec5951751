"""Cloned voices, beside the service: turning an uploaded clip into a voice prompt (`cloner`),
and the library that keeps them (`library`)."""
