"""The PSMR human view: a web page over a PSMR store, on 127.0.0.1 (`slotrelay psmr view`).

The human view and the AI view are two projections of one semantic state
(CONTRACTS.md#one-state-two-projections). Every page is assembled from answers of
`slotrelay.psmr.api.call`, the operators the MCP server calls, over the same store: no index of its
own, nothing cached between requests. Proposed deltas are shown as recorded (delta.list,
delta.describe, which write nothing); validating, previewing and applying them stay an agent's or
the CLI's acts.
`reader` calls the operators for one page, `paging` turns continuation tokens into links, `links`
makes every URL, `graph_svg` lays a slice out with graphviz, `source` shows the lines behind
evidence, `pages` builds each page, `errors` says why one cannot be shown, `guard` keeps the server
on loopback, `app` wires them into a Starlette application and `serve` runs it under uvicorn.
"""

from psmr_view.app import create_app

__all__ = ["create_app"]
