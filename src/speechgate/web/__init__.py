"""The browser playground and live operator view served at `/`: plain HTML, CSS and JS.

No build step: the files in `static/` are served as they are.
"""

from pathlib import Path

STATIC_DIR = Path(__file__).parent / "static"
