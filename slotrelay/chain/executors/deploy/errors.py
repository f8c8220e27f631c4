"""The deploy node's error types, in one place: every deploy module raises `NodeError` with one of these.

A chain declares them in its `error_types` to choose retry / skip / fail (CONTRACTS.md#deploy-node):

    deploy_source_missing         a file to deploy does not exist, is a symlink (or lies under one) or
                                  is not a regular file; `files_from` names nothing in the input slot
    deploy_config_invalid         a remote's variables are missing or wrong, a path leaves the chain's
                                  folder, a required check cannot run
    deploy_host_unreachable       the SSH host does not answer, or the connection broke
    deploy_auth_refused           the SSH host refused the key
    deploy_host_key_unknown       the SSH host's key is not in the known_hosts file
    write_denied                  a target refused a write (permissions at any level of a folder):
                                  declare it `fail`, a retry cannot change a permission (the seed's type)
    deploy_target_unwritable      a target failed otherwise (a file where a folder should be, a
                                  `current` that is not the deploy's link, disk full)
    deploy_hash_mismatch          a copy's sha256 differs from its source's
    deploy_proof_failed           the remote host could not hash the copies (no `sha256sum`)
    deploy_url_unreachable        a URL did not answer 200 after the retries
    deploy_url_mismatch           a URL answered 200 with bytes that differ from the source
    deploy_sitemap_invalid        the Dev sitemap does not parse or breaks the protocol
    deploy_feature_points_differ  a served page's feature point differs from Dev's
"""

from __future__ import annotations

import errno
from pathlib import PurePath

from slotrelay.chain.errors import NodeError

SOURCE_MISSING = "deploy_source_missing"
CONFIG_INVALID = "deploy_config_invalid"
HOST_UNREACHABLE = "deploy_host_unreachable"
AUTH_REFUSED = "deploy_auth_refused"
HOST_KEY_UNKNOWN = "deploy_host_key_unknown"
WRITE_DENIED = "write_denied"
TARGET_UNWRITABLE = "deploy_target_unwritable"
HASH_MISMATCH = "deploy_hash_mismatch"
PROOF_FAILED = "deploy_proof_failed"
URL_UNREACHABLE = "deploy_url_unreachable"
URL_MISMATCH = "deploy_url_mismatch"
SITEMAP_INVALID = "deploy_sitemap_invalid"
FEATURE_POINTS_DIFFER = "deploy_feature_points_differ"

_REFUSALS = (errno.EACCES, errno.EPERM, errno.EROFS)


def folder_error(path: PurePath | str, failure: OSError, *, doing: str = "write") -> NodeError:
    """A local file system failure as the deploy's type: a refusal is `write_denied`, the rest unwritable."""
    error_type = WRITE_DENIED if failure.errno in _REFUSALS else TARGET_UNWRITABLE
    reason = failure.strerror or str(failure)
    return NodeError(error_type, f"cannot {doing} {path}: {reason}")
