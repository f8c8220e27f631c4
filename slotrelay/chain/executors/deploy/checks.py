"""The deploy's checks on a served target: every file answers 200 with its bytes, then 紧追-L3.

A target is checked where its new release is served: at its preview URL before the switch
(`<preview_url>/<release>/<path>`), or at its base URL right after it (deploy.node switches
it back when a check fails there). Dev pages are read once for all targets; every feature-point
difference is collected before the check fails, so the message names them all.

This module (requests, BeautifulSoup) is imported only by a deploy that has a served target.
"""

from __future__ import annotations

import hashlib
from typing import Any

from slotrelay.chain.errors import NodeError
from slotrelay.chain.executors.deploy.errors import FEATURE_POINTS_DIFFER, URL_MISMATCH
from slotrelay.chain.executors.deploy.feature_points import PageView, describe, read_points
from slotrelay.chain.executors.deploy.http import Served, fetch, session_for, url_of
from slotrelay.chain.executors.deploy.sources import Upload
from slotrelay.chain.models import FeaturePoints, UrlRetry


class ServedChecks:
    """The URL check and 紧追-L3 of one deploy, over one HTTP session (the caller closes it).

    Parameters:
        retry: the node's `url_retry`.
        points: the node's feature points (None: no comparison).
        pages: the uploads whose points are compared.
    """

    def __init__(self, retry: UrlRetry, points: FeaturePoints | None, pages: list[Upload]) -> None:
        self.session = session_for(retry)
        self.points = points
        self.pages = {u.relative for u in pages}
        self.dev: dict[str, list[str | None]] = {}
        self.compared: list[dict[str, Any]] = []
        self.checked: list[str] = []

    def close(self) -> None:
        """Close the HTTP session."""
        self.session.close()

    def _dev_values(self, upload: Upload) -> list[str | None]:
        assert self.points is not None  # compared only with feature points
        if upload.relative not in self.dev:
            if self.points.dev_url is None:
                with upload.open() as source:
                    view = PageView(body=source.read(), headers=None)
            else:
                served = fetch(self.session, url_of(self.points.dev_url, upload.relative), side="Dev")
                view = PageView(body=served.body, headers=served.headers)
            self.dev[upload.relative] = read_points(view, self.points.points)
        return self.dev[upload.relative]

    def _compare(self, target: str, upload: Upload, served: Served, differences: list[str]) -> None:
        assert self.points is not None
        values = read_points(PageView(body=served.body, headers=served.headers), self.points.points)
        for point, value, dev in zip(self.points.points, values, self._dev_values(upload), strict=True):
            self.compared.append({"target": target, "page": upload.relative, "url": served.url,
                                  "point": describe(point), "served": value, "dev": dev,
                                  "equal": value == dev})
            if value != dev:
                differences.append(f"page {upload.relative} on target {target} ({served.url}): "
                                   f"{describe(point)} is {value!r} served, {dev!r} on Dev")

    def check(self, target: str, base_url: str, uploads: list[Upload]) -> dict[str, tuple[str, int]]:
        """GET every upload under `base_url` (200, same sha256), then compare the pages' feature points.

        Returns:
            The URL and status each upload answered with, by its path.

        Raises:
            NodeError: deploy_url_unreachable, deploy_url_mismatch, deploy_feature_points_differ.
        """
        answered: dict[str, tuple[str, int]] = {}
        differences: list[str] = []
        for upload in uploads:
            served = fetch(self.session, url_of(base_url, upload.relative), side=f"target {target}")
            digest = hashlib.sha256(served.body).hexdigest()
            if digest != upload.sha256:
                raise NodeError(URL_MISMATCH, f"target {target}: GET {served.url} served sha256 {digest}, "
                                              f"the source {upload.source} has sha256 {upload.sha256}")
            answered[upload.relative] = (served.url, served.status)
            self.checked.append(served.url)
            if self.points is not None and upload.relative in self.pages:
                self._compare(target, upload, served, differences)
        if differences:
            raise NodeError(FEATURE_POINTS_DIFFER,
                            "the served site differs from Dev: " + "; ".join(differences))
        return answered
