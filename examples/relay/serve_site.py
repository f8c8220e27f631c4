"""Serve the example's `public/` folder (the seed's C side) on http://127.0.0.1:8765/ until Ctrl-C.

The deploy node keeps releases there: the live site is `/current/`, and a new release is checked at
`/releases/<id>/` before `current` switches to it.
"""

from __future__ import annotations

import functools
import sys
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PUBLIC = Path(__file__).resolve().parent / "public"

if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8765
    PUBLIC.mkdir(exist_ok=True)
    server = ThreadingHTTPServer(("127.0.0.1", port),
                                 functools.partial(SimpleHTTPRequestHandler, directory=str(PUBLIC)))
    print(f"serving {PUBLIC} at http://127.0.0.1:{port}/")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
