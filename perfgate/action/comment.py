"""The action's PR comment: one comment per pull request, created once and then updated in
place on every run (found again by a hidden marker), through the GitHub REST API.

Inputs (environment): ``PERFGATE_TOKEN`` (a token that may write PR comments),
``PERFGATE_COMMENT`` (``always``; ``quiet``: do not create a comment while everything passes,
but keep an existing one up to date; ``never``), ``PERFGATE_VERDICT`` and
``PERFGATE_SUMMARY_PATH`` (the benchmark step's outputs). Runner variables: ``GITHUB_API_URL``,
``GITHUB_REPOSITORY``, ``GITHUB_EVENT_PATH``, ``GITHUB_SERVER_URL``, ``GITHUB_RUN_ID``.

A comment that cannot be written (e.g. a read-only token on a fork's pull request) is a
warning, not a failure: the verdict, not the comment, decides the job.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from perfgate.action import (
    ERROR,
    PASS,
    REGRESSION,
    ActionError,
    annotate,
    choice_input,
    env_input,
    load_event,
    pull_request_number,
    run_main,
    set_output,
)

MARKER = "<!-- perfgate -->"
# GitHub refuses comment bodies over 65536 characters.
MAX_BODY = 65_000
PAGE_SIZE = 100
MAX_PAGES = 30
HEADLINES = {
    PASS: "✅ perfgate: no regression",
    REGRESSION: "❌ perfgate: performance regression",
    ERROR: "⚠️ perfgate: the benchmarks could not be gated",
}


class GitHub:
    """The few REST calls the comment needs, with urllib."""

    def __init__(self, api_url: str, repository: str, token: str) -> None:
        self.api_url = api_url.rstrip("/")
        self.repository = repository
        self.token = token

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One API call; returns the decoded JSON response."""
        data = json.dumps(body).encode("utf-8") if body is not None else None
        request = urllib.request.Request(f"{self.api_url}{path}", data=data, method=method)
        request.add_header("Accept", "application/vnd.github+json")
        request.add_header("X-GitHub-Api-Version", "2022-11-28")
        request.add_header("User-Agent", "perfgate-action")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=30) as response:
            payload = response.read()
        return json.loads(payload) if payload else None

    def find_comment(self, number: int) -> dict[str, Any] | None:
        """The pull request's comment that carries the marker, if there is one."""
        for page in range(1, MAX_PAGES + 1):
            comments = self.request(
                "GET",
                f"/repos/{self.repository}/issues/{number}/comments"
                f"?per_page={PAGE_SIZE}&page={page}",
            )
            if not isinstance(comments, list):
                return None
            for comment in comments:
                if isinstance(comment, dict) and MARKER in str(comment.get("body") or ""):
                    return comment
            if len(comments) < PAGE_SIZE:
                return None
        return None

    def create_comment(self, number: int, body: str) -> dict[str, Any]:
        """POST a new comment on the pull request."""
        path = f"/repos/{self.repository}/issues/{number}/comments"
        result: dict[str, Any] = self.request("POST", path, {"body": body})
        return result

    def update_comment(self, comment_id: int, body: str) -> dict[str, Any]:
        """PATCH an existing comment's body."""
        path = f"/repos/{self.repository}/issues/comments/{comment_id}"
        result: dict[str, Any] = self.request("PATCH", path, {"body": body})
        return result


def comment_body(verdict: str, report: str, commit: str, run_url: str) -> str:
    """The marker, a headline for the verdict, the report, and where it came from."""
    headline = HEADLINES.get(verdict, f"perfgate: {verdict or 'no verdict'}")
    footer = f"<sub>commit `{commit[:12]}`" if commit else "<sub>"
    footer += f" · [workflow run]({run_url})" if run_url else ""
    footer += " · this comment is updated in place on every run</sub>"
    report = report.strip()
    budget = MAX_BODY - len(MARKER) - len(headline) - len(footer) - 200
    if len(report) > budget:
        report = (
            report[:budget].rstrip()
            + "\n\n… the report is truncated here; the full one is in the job summary."
        )
    return f"{MARKER}\n### {headline}\n\n{report}\n\n{footer}\n"


def main() -> int:
    """Create or update the pull request's perfgate comment."""
    mode = choice_input("PERFGATE_COMMENT", ("always", "quiet", "never"), "always")
    event = load_event()
    number = pull_request_number(event)
    if mode == "never" or number is None:
        print(f"perfgate: no PR comment ({'disabled' if mode == 'never' else 'not a PR'})")
        return 0
    repository = env_input("GITHUB_REPOSITORY")
    if not repository:
        raise ActionError("GITHUB_REPOSITORY is not set: is this running in GitHub Actions?")
    token = env_input("PERFGATE_TOKEN")
    verdict = env_input("PERFGATE_VERDICT")
    summary_path = env_input("PERFGATE_SUMMARY_PATH")
    report = ""
    if summary_path and Path(summary_path).is_file():
        report = Path(summary_path).read_text(encoding="utf-8")
    pull = event.get("pull_request") or {}
    commit = str((pull.get("head") or {}).get("sha") or os.environ.get("GITHUB_SHA", ""))
    server, run_id = (
        env_input("GITHUB_SERVER_URL", "https://github.com"),
        env_input("GITHUB_RUN_ID"),
    )
    run_url = f"{server}/{repository}/actions/runs/{run_id}" if run_id else ""
    body = comment_body(verdict, report, commit, run_url)

    github = GitHub(env_input("GITHUB_API_URL", "https://api.github.com"), repository, token)
    try:
        existing = github.find_comment(number)
        if existing is not None:
            result = github.update_comment(int(existing["id"]), body)
            action = "updated"
        elif mode == "quiet" and verdict == PASS:
            print("perfgate: everything passes and comment is 'quiet': no comment created")
            return 0
        else:
            result = github.create_comment(number, body)
            action = "created"
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:300]
        annotate(
            "warning",
            f"perfgate: could not write the PR comment: HTTP {exc.code} {exc.reason}: {detail} "
            "(the token needs pull-requests: write; a fork's pull request gets a read-only one)",
        )
        return 0
    except (urllib.error.URLError, OSError) as exc:
        annotate("warning", f"perfgate: could not reach the GitHub API: {exc}")
        return 0
    url = str(result.get("html_url") or "")
    print(f"perfgate: {action} the PR comment {url}".rstrip())
    set_output("comment-url", url)
    return 0


if __name__ == "__main__":
    run_main(main)
