"""The action's PR comment: one comment per pull request and job, created once and then
updated in place on every run, through the GitHub REST API. The comment to update is found
again by a hidden marker *and* its author, which must be the token's own identity (GraphQL
``viewer``): a marker pasted into someone else's comment is never followed. A second marker
names the job (workflow, job id, artifact name), so that two jobs that both comment (a CUDA
and an Ascend runner) keep a comment each instead of replacing each other's.

Inputs (environment): ``PERFGATE_TOKEN`` (a token that may write PR comments),
``PERFGATE_COMMENT`` (``always``; ``quiet``: do not create a comment while everything passes,
but keep an existing one up to date; ``never``), ``PERFGATE_VERDICT`` and
``PERFGATE_SUMMARY_PATH`` (the benchmark step's outputs), ``PERFGATE_ARTIFACT_NAME`` (the
action's ``artifact-name``, unique per matrix leg). Runner variables: ``GITHUB_API_URL``,
``GITHUB_REPOSITORY``, ``GITHUB_EVENT_PATH``, ``GITHUB_SERVER_URL``, ``GITHUB_RUN_ID``,
``GITHUB_WORKFLOW``, ``GITHUB_JOB``.

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
from perfgate.report import markdown as md

MARKER = "<!-- perfgate -->"
# The job's own marker: ``<!-- perfgate-job: workflow / job / artifact -->``. A comment with
# MARKER and none of these was written before comments were kept per job.
JOB_MARKER_PREFIX = "<!-- perfgate-job: "
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
        """One API call (``path`` under the API URL, or a full URL); returns the decoded JSON
        response."""
        data = json.dumps(body).encode("utf-8") if body is not None else None
        url = path if path.startswith(("https://", "http://")) else f"{self.api_url}{path}"
        request = urllib.request.Request(url, data=data, method=method)
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

    def identity(self, graphql_url: str) -> str | None:
        """The login the token acts as, which is the author of the comments it writes.

        GraphQL's ``viewer`` answers for every kind of token: a personal access token (the
        user), the workflow's ``GITHUB_TOKEN`` (``github-actions[bot]``) and a GitHub App's
        installation token (``<app-slug>[bot]``). ``GET /user`` answers for user tokens
        only; it is the fallback where GraphQL is unavailable. None when neither answers.
        """
        try:
            answer = self.request("POST", graphql_url, {"query": "query { viewer { login } }"})
            login = ((answer or {}).get("data") or {}).get("viewer", {}).get("login")
            if isinstance(login, str) and login:
                return login
        except (urllib.error.URLError, OSError, ValueError, AttributeError):
            pass
        try:
            user = self.request("GET", "/user")
        except (urllib.error.URLError, OSError, ValueError):
            return None
        login = user.get("login") if isinstance(user, dict) else None
        return login if isinstance(login, str) and login else None

    def find_comment(self, number: int, author: str, job: str) -> dict[str, Any] | None:
        """The pull request's comment that carries the marker *and* was written by
        ``author`` (the token's own identity) for ``job`` (:func:`job_key`), if there is one;
        else such a comment written before comments were kept per job (it names no job), which
        this job then takes over. Anyone can paste the marker into a comment; only the
        action's own comment is ever edited."""
        own_job = job_marker(job)
        older: dict[str, Any] | None = None
        for page in range(1, MAX_PAGES + 1):
            comments = self.request(
                "GET",
                f"/repos/{self.repository}/issues/{number}/comments"
                f"?per_page={PAGE_SIZE}&page={page}",
            )
            if not isinstance(comments, list):
                break
            for comment in comments:
                body = str(comment.get("body") or "") if isinstance(comment, dict) else ""
                if MARKER not in body:
                    continue
                user = comment.get("user")
                login = user.get("login") if isinstance(user, dict) else None
                if not isinstance(login, str) or login.casefold() != author.casefold():
                    continue
                if own_job in body:
                    return comment
                if older is None and JOB_MARKER_PREFIX not in body:
                    older = comment
            if len(comments) < PAGE_SIZE:
                break
        return older

    def newer_head(self, number: int, head: str) -> str | None:
        """The pull request's head commit when it is no longer ``head`` (the event's), else
        None; None too when the API does not say (the comment is then written, as before)."""
        if not head:
            return None
        try:
            pull = self.request("GET", f"/repos/{self.repository}/pulls/{number}")
        except (urllib.error.URLError, OSError, ValueError):
            return None
        now = (pull.get("head") or {}).get("sha") if isinstance(pull, dict) else None
        return now if isinstance(now, str) and now and now != head else None

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


def _why(status: int, detail: str) -> str:
    """What a failed API call most likely means, for the warning."""
    if status == 429 or (status == 403 and "rate limit" in detail.lower()):
        return "the API's rate limit: the next run writes the comment"
    if status in (401, 403):
        return "the token needs pull-requests: write; a fork's pull request gets a read-only one"
    if status == 404:
        return "the token cannot see this pull request or repository"
    if status >= 500:
        return "GitHub's API failed: the next run writes the comment"
    return "GitHub refused the request"


def job_key(workflow: str, job: str, artifact: str) -> str:
    """Which job writes the comment: the workflow's name, the job's id and the artifact name
    (matrix legs share the job id; their artifact names must differ to upload), without
    what could end the HTML comment that carries it."""
    key = " / ".join(part.strip() for part in (workflow, job, artifact) if part.strip())
    return " ".join(key.replace("--", "- -").replace(">", "").replace("<", "").split())


def job_marker(key: str) -> str:
    """The hidden line that says which job a comment is for."""
    return f"{JOB_MARKER_PREFIX}{key} -->"


def comment_body(verdict: str, report: str, commit: str, run_url: str, job: str = "") -> str:
    """The markers, a headline for the verdict, the report, and where it came from."""
    headline = HEADLINES.get(verdict, f"perfgate: {verdict or 'no verdict'}")
    markers = f"{MARKER}\n{job_marker(job)}"
    parts = [
        f"job {md.code(job)}" if job else "",
        f"commit {md.code(commit[:12])}" if commit else "",
        f"[workflow run]({run_url})" if run_url else "",
        "this comment is updated in place on every run of this job",
    ]
    footer = "<sub>" + " · ".join(part for part in parts if part) + "</sub>"
    budget = MAX_BODY - len(markers) - len(headline) - len(footer) - 20
    report = md.fit_report(report.strip(), budget, "the whole report is in the job summary")
    return f"{markers}\n### {headline}\n\n{report}\n\n{footer}\n"


def main() -> int:
    """Create or update the pull request's perfgate comment."""
    mode = choice_input("PERFGATE_COMMENT", ("always", "quiet", "never"), "always")
    event = load_event()
    number = pull_request_number(event)
    event_name = os.environ.get("GITHUB_EVENT_NAME", "")
    if mode != "never" and number is None and event_name.startswith("pull_request"):
        # A pull request whose payload holds no number: the comment is lost, say so.
        annotate(
            "warning",
            f"perfgate: a '{event_name}' run, but its event payload (GITHUB_EVENT_PATH) names "
            "no pull request: no PR comment",
        )
        return 0
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
        # perfgate wrote it as UTF-8; a damaged byte must not cost the comment.
        report = Path(summary_path).read_text(encoding="utf-8", errors="replace")
    if not verdict:
        # The benchmark step ended before a verdict (an input error, shards that could not
        # be merged …): the job is red, and an earlier run's comment must not stay green.
        verdict = ERROR
        report = report or (
            "The benchmark step ended before it had a verdict; the job log says why. No "
            "benchmark of this commit was judged."
        )
    pull = event.get("pull_request")
    head = pull.get("head") if isinstance(pull, dict) else None
    sha = head.get("sha") if isinstance(head, dict) else None
    commit = str(sha or os.environ.get("GITHUB_SHA", ""))
    server, run_id = (
        env_input("GITHUB_SERVER_URL", "https://github.com"),
        env_input("GITHUB_RUN_ID"),
    )
    run_url = f"{server}/{repository}/actions/runs/{run_id}" if run_id else ""
    job = job_key(
        env_input("GITHUB_WORKFLOW"), env_input("GITHUB_JOB"), env_input("PERFGATE_ARTIFACT_NAME")
    )
    body = comment_body(verdict, report, commit, run_url, job)

    api_url = env_input("GITHUB_API_URL", "https://api.github.com")
    github = GitHub(api_url, repository, token)
    newer = github.newer_head(number, str(sha or ""))
    if newer is not None:
        # A re-run of an older commit's job: its verdict is no longer the pull request's.
        print(
            f"perfgate: the pull request's head is now {newer[:12]}, not {commit[:12]}: this "
            "run of an older commit leaves the comment as it is"
        )
        return 0
    author = github.identity(env_input("GITHUB_GRAPHQL_URL", f"{api_url.rstrip('/')}/graphql"))
    if author is None:
        annotate(
            "warning",
            "perfgate: could not learn which account the token acts as (GraphQL viewer and "
            "GET /user both failed), so no earlier comment can be proven to be ours: "
            "creating a new comment instead of updating one",
        )
    try:
        existing = github.find_comment(number, author, job) if author else None
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
            f"({_why(exc.code, detail)})",
        )
        return 0
    except (urllib.error.URLError, OSError) as exc:
        annotate("warning", f"perfgate: could not reach the GitHub API: {exc}")
        return 0
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        # A proxy's HTML page, or JSON of another shape: the comment is lost, not the job.
        annotate(
            "warning",
            "perfgate: could not write the PR comment: the GitHub API answered something "
            f"unexpected ({type(exc).__name__}: {exc})"[:500],
        )
        return 0
    url = str(result.get("html_url") or "") if isinstance(result, dict) else ""
    print(f"perfgate: {action} the PR comment {url}".rstrip())
    set_output("comment-url", url)
    return 0


if __name__ == "__main__":
    run_main(main)
