"""Registry review of a shared pen: shared -> reviewed -> accepted | rejected | observation.

`check` runs the static screen under the pen's own sandbox options, then, when the screen passes,
the manifest's test_examples in the sandbox (comparing each result with `expected`); it checks that
the code file is still the code whose hash the audit log holds, writes `review.json` beside the
manifest, and moves the pen to `reviewed`. `verdict` records the reviewer's answer and moves the
folder to `factory/module-registry/{accepted,rejected,observation}/`. A rejection is sent to the
persona as MPP-E006 (`.github/persona-brain/{persona_id}/pen-notices/{pen_id}.json`). A tool whose
checks failed cannot be accepted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from slotrelay.audit_log import AuditLog, sha256_text
from slotrelay.pen import store
from slotrelay.pen.code_screen import screen_code
from slotrelay.pen.errors import InvalidPenRequest, SandboxStartFailed, ShareRejected
from slotrelay.pen.ids import parse_pen_id
from slotrelay.pen.manifest import validate_manifest
from slotrelay.pen.models import FILE_SUFFIX, PenRequest
from slotrelay.pen.states import require_state, transition
from slotrelay.pen.terms import Verdict
from slotrelay.pen.writer import program_result, sandbox_limits_for
from slotrelay.timestamps import now_iso

if TYPE_CHECKING:
    from slotrelay.effect_screen import EffectScreen
    from slotrelay.sandbox.settings import SandboxSettings

VERDICT_STATE: dict[Verdict, Literal["accepted", "rejected", "observation"]] = {
    Verdict.accept: "accepted",
    Verdict.reject: "rejected",
    Verdict.observation: "observation",
}


@dataclass
class ReviewReport:
    """What the checks found: one entry per test example and the static screen's findings."""

    pen_id: str
    tests: list[dict[str, Any]] = field(default_factory=list)
    static_findings: list[dict[str, Any]] = field(default_factory=list)
    checked_at: str = ""

    @property
    def passed(self) -> bool:
        """True when every example gave its expected result and the screen found nothing."""
        return all(test["passed"] for test in self.tests) and not self.static_findings

    def to_json(self) -> dict[str, Any]:
        """The report as written to review.json and printed by the CLI."""
        return {
            "pen_id": self.pen_id,
            "passed": self.passed,
            "tests": self.tests,
            "static_findings": self.static_findings,
            "checked_at": self.checked_at,
        }


@dataclass
class ReviewOutcome:
    """The reviewer's verdict and where the tool went."""

    pen_id: str
    state: str
    location: str
    report: ReviewReport
    error: ShareRejected | None = None

    def to_json(self) -> dict[str, Any]:
        """The outcome as `slotrelay pen review --json` prints it."""
        body: dict[str, Any] = {
            "pen_id": self.pen_id,
            "state": self.state,
            "location": self.location,
            "review": self.report.to_json(),
        }
        if self.error is not None:
            body.update(self.error.to_json())
        return body


def _inbox(root: str | Path, pen_id: str) -> Path:
    return store.registry_dir(root, "inbox", pen_id)


def check(
    root: str | Path,
    pen_id: str,
    *,
    effect_screen: EffectScreen,
    backend: str | None = None,
    settings: SandboxSettings | None = None,
) -> ReviewReport:
    """Run a shared pen's test examples and static screen, and move it to `reviewed`.

    Parameters:
        root: the pen's root folder.
        pen_id: a pen in state `shared`.
        effect_screen: the effects of Python code, for the static screen (PSMR's
            `slotrelay.psmr.analysis.effects.effects`).
        backend: the sandbox backend (None: the sandbox's default).
        settings: the operator's sandbox policy (daemon, images, egress allow-list, pool size).

    Returns:
        The report (also written to `review.json` in the inbox folder).

    Raises:
        PenNotFound: no such pen or its inbox folder is incomplete.
        IllegalTransition: the pen is not `shared`.
        InvalidPenRequest: the manifest is not JSON or does not satisfy its schema (naming the file),
            or the backend named does not exist.
        SandboxStartFailed: (MPP-E002) the sandbox could not run the examples.
    """
    from slotrelay import sandbox
    from slotrelay.sandbox.errors import SandboxError, SandboxRequestError

    log = AuditLog(root)
    state = require_state(log, pen_id)
    if state != "shared":
        transition(log, pen_id, "reviewed")  # raises IllegalTransition naming the state
    folder = _inbox(root, pen_id)
    manifest_path = folder / "manifest.json"
    manifest = store.read_json(root, manifest_path)
    validate_manifest(manifest, source=str(manifest_path))
    request = PenRequest.model_validate(store.read_json(root, folder / "request.json"))
    options = request.options.sandbox
    # The code under review is the file that will be accepted; it must still be the audited code.
    code = store.read_text(root, folder / f"code.{FILE_SUFFIX[options.lang]}")
    audited_hash = store.read_json(root, folder / "output.json")["audit"]["code_hash"]
    report = ReviewReport(pen_id=pen_id, checked_at=now_iso())
    if sha256_text(code) != audited_hash:
        report.static_findings.append(
            {
                "kind": "integrity",
                "detail": "the code differs from the audited code (sha256 mismatch)",
                "line": None,
            }
        )
    # The screen comes first, as in pen.write: code it refuses (say, edited so it no longer parses)
    # is not run at all, and its examples are reported as not run.
    findings = [finding.to_json() for finding in screen_code(code, options.lang, options, effect_screen)]
    report.static_findings += findings
    limits = sandbox_limits_for(request)
    for index, example in enumerate(manifest["test_examples"]):
        if findings:
            report.tests.append(
                {
                    "index": index,
                    "status": "not_run",
                    "expected": example["expected"],
                    "got": None,
                    "passed": False,
                    "violations": [],
                }
            )
            continue
        try:
            result = sandbox.run(
                code, lang=options.lang, limits=limits, inputs=example["input"], backend=backend,
                settings=settings
            )
        except SandboxRequestError as exc:
            raise InvalidPenRequest(f"sandbox: {exc.message}") from exc
        except SandboxError as exc:
            raise SandboxStartFailed(
                f"the sandbox could not run test example {index}: {exc.message}"
            ) from exc
        got = program_result(options.lang, result.result, result.stdout)
        report.tests.append(
            {
                "index": index,
                "status": result.status,
                "expected": example["expected"],
                "got": got,
                "passed": result.status == "success" and got == example["expected"],
                "violations": [violation.model_dump() for violation in result.violations],
            }
        )
    store.write_json(root, folder / "review.json", report.to_json())
    transition(log, pen_id, "reviewed", persona_id=manifest["persona_id"], passed=report.passed)
    return report


def verdict(root: str | Path, pen_id: str, answer: Verdict, *, reviewer: str = "reviewer") -> ReviewOutcome:
    """Record a reviewer's verdict on a reviewed pen and move its folder.

    Parameters:
        root: the pen's root folder.
        pen_id: a pen in state `reviewed`.
        answer: accept, reject or observation.
        reviewer: who decided (recorded).

    Returns:
        The outcome; on reject, `error` is the MPP-E006 sent to the persona.

    Raises:
        IllegalTransition: the pen is not `reviewed`.
        InvalidPenRequest: an unknown verdict, or accept of a tool whose checks failed.
    """
    if answer not in VERDICT_STATE:
        raise InvalidPenRequest(f"verdict {answer!r} is not one of {', '.join(Verdict)}")
    answer = Verdict(answer)
    persona_id, _, _ = parse_pen_id(pen_id)
    log = AuditLog(root)
    target = VERDICT_STATE[answer]
    with log.locked():
        state = require_state(log, pen_id)
        if state != "reviewed":
            transition(log, pen_id, target)  # raises IllegalTransition naming the state
        folder = _inbox(root, pen_id)
        report_json = store.read_json(root, folder / "review.json")
        report = ReviewReport(
            pen_id=pen_id,
            tests=report_json["tests"],
            static_findings=report_json["static_findings"],
            checked_at=report_json["checked_at"],
        )
        if answer == Verdict.accept and not report.passed:
            raise InvalidPenRequest(
                f"pen {pen_id} cannot be accepted: its review checks failed (see {folder / 'review.json'})"
            )
        location = store.move_dir(root, folder, store.registry_dir(root, target, pen_id))
        record = transition(
            log,
            pen_id,
            target,
            persona_id=persona_id,
            reviewer=reviewer,
            location=str(location),
            error_code=ShareRejected.code if answer == Verdict.reject else None,
        )
        error: ShareRejected | None = None
        if answer == Verdict.reject:
            error = ShareRejected(
                f"the registry review rejected {pen_id} (checks {'passed' if report.passed else 'failed'})",
                details={"reviewer": reviewer, "review": str(location / "review.json")},
            )
            error.audit = {"syslog_id": record["syslog_id"], "pen_id": pen_id}
            store.write_json(
                root, store.notice_path(root, persona_id, pen_id), {**error.to_json(), "at": now_iso()}
            )
    return ReviewOutcome(pen_id=pen_id, state=target, location=str(location), report=report, error=error)


def review(
    root: str | Path,
    pen_id: str,
    answer: Verdict,
    *,
    effect_screen: EffectScreen,
    reviewer: str = "reviewer",
    backend: str | None = None,
) -> ReviewOutcome:
    """Check a shared pen (if not checked yet) and apply the verdict, as `slotrelay pen review` does.

    `effect_screen` is `check`'s: the effects of Python code (PSMR's
    `slotrelay.psmr.analysis.effects.effects`).

    Raises:
        PenNotFound, IllegalTransition, InvalidPenRequest, SandboxStartFailed: as `check` and `verdict`.
    """
    if require_state(AuditLog(root), pen_id) == "shared":
        check(root, pen_id, effect_screen=effect_screen, backend=backend)
    return verdict(root, pen_id, answer, reviewer=reviewer)
