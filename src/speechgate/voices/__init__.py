"""Cloned voices: turning an uploaded clip into a voice prompt, and the library that keeps them."""
