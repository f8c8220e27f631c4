"""The deploy's HTTP side: fetch what a served target (or a served Dev copy) answers, with urllib3 `Retry`.

The seed asks for `Retry(total=2, backoff_factor=5)` (a node can set both, `url_retry`); only GETs are
made, and 429 and 5xx answers are retried like connection errors (a server that is still starting or
reloading). A URL is the base URL joined with the file's path under the target, each segment quoted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote, urljoin

from slotrelay.chain.errors import NodeError
from slotrelay.chain.executors.deploy.errors import URL_UNREACHABLE
from slotrelay.chain.models import UrlRetry

if TYPE_CHECKING:
    import requests

URL_TIMEOUT_SECONDS = 10
RETRIED_STATUSES = (429, 500, 502, 503, 504)


@dataclass(frozen=True)
class Served:
    """What a URL answered with 200: the URL, the status, the body and the headers (case-insensitive)."""

    url: str
    status: int
    body: bytes
    headers: Mapping[str, str]


def url_of(base_url: str, relative: str) -> str:
    """The URL of a file under a served folder: `base_url` joined with its quoted relative path."""
    return urljoin(base_url if base_url.endswith("/") else base_url + "/", quote(relative))


def session_for(retry: UrlRetry) -> requests.Session:
    """A session whose GETs are retried as `retry` says (the caller closes it)."""
    # requests loads here, not with the module: a deploy without a served target never needs it.
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.util import Retry

    session = requests.Session()
    adapter = HTTPAdapter(max_retries=Retry(
        total=retry.total, backoff_factor=retry.backoff_factor,
        status_forcelist=RETRIED_STATUSES, allowed_methods=("GET",),
    ))
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def fetch(session: requests.Session, url: str, *, side: str) -> Served:
    """GET a URL that must answer 200.

    Parameters:
        session: from `session_for`.
        url: what to fetch.
        side: who serves it, for the message (`target C`, `Dev`).

    Raises:
        NodeError: `deploy_url_unreachable` when there is no answer after the retries, or not a 200.
    """
    import requests

    try:
        answer = session.get(url, timeout=URL_TIMEOUT_SECONDS)
    except requests.RequestException as failed:
        raise NodeError(URL_UNREACHABLE, f"{side}: GET {url} failed after retries: {failed}") from failed
    if answer.status_code != 200:
        raise NodeError(URL_UNREACHABLE, f"{side}: GET {url} answered {answer.status_code}, expected 200")
    return Served(url=url, status=answer.status_code, body=answer.content, headers=answer.headers)
