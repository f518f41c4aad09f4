"""What git says about the checkout: its commit, refs, and the commits that may serve as baseline.

Everything here goes through gitpython, which has no type stubs; its objects stay inside this
module, and only plain strings, ints and the dataclasses below come out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfgate.errors import PerfgateError


@dataclass(frozen=True)
class CommitInfo:
    """The commit a measurement was taken at.

    ``branch`` is ``None`` on a detached HEAD (the usual state in CI). ``dirty`` is true when
    tracked files differ from the commit, staged or not; untracked files do not count, so
    profiles and freshly written baselines in the work tree do not make every run dirty, and
    nor do changes in the baseline store (:func:`current_commit`'s ``store``).
    ``time`` is the committer date in ISO 8601 with its UTC offset.
    """

    sha: str
    branch: str | None
    dirty: bool
    time: str


@dataclass(frozen=True)
class Walk:
    """The commits whose baselines may serve HEAD (:func:`baseline_walk`), and what the
    lookup needs to explain an empty result.

    ``shallow`` is true when the repository is a shallow clone and the walk may have ended
    at its history's edge instead of at ``max_depth`` (or found no merge-base in it): then
    "no baseline" says nothing about the baselines of earlier commits.
    """

    head: str
    branch: str
    candidates: list[Candidate]
    shallow: bool


@dataclass(frozen=True)
class Candidate:
    """A commit whose baseline may serve HEAD.

    ``distance`` counts first-parent hops from the start of the walk; ``how`` says how the
    start was chosen, in words fit for the report ("merge-base of HEAD and main").
    """

    sha: str
    distance: int
    how: str


def _git_module() -> Any:
    # gitpython runs `git --version` at import time and raises ImportError when git is
    # missing; import it only when git is really needed, and say what to do.
    try:
        import git
    except ImportError as exc:
        raise PerfgateError(
            "cannot run git: the git executable was not found "
            "(install git, or set GIT_PYTHON_GIT_EXECUTABLE to its path)"
        ) from exc
    return git


def _open(repo_dir: Path) -> Any:
    """The repository that contains ``repo_dir``; use it as a context manager to close it."""
    git = _git_module()
    try:
        repo = git.Repo(repo_dir, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
        raise PerfgateError(
            f"{repo_dir}: not inside a git repository "
            "(run perfgate from a git checkout, or `git init` and commit first)"
        ) from exc
    if not repo.head.is_valid():
        refused = _git_refusal(repo)
        try:  # HEAD on a branch with no commits (git checkout --orphan) in a repository that
            # has commits is not "no commits yet"
            unborn = repo.head.reference.name if repo.refs else None
        except (TypeError, ValueError):
            unborn = None
        repo.close()
        if refused:  # e.g. "detected dubious ownership": the commits are there
            raise PerfgateError(f"{repo_dir}: git cannot read the repository: {refused}")
        if unborn:
            raise PerfgateError(
                f"{repo_dir}: HEAD is on branch {unborn!r}, which has no commits yet (commit "
                "first: baselines are keyed by commit)"
            )
        raise PerfgateError(
            f"{repo_dir}: the git repository has no commits yet (commit first: baselines are "
            "keyed by commit)"
        )
    return repo


def _git_refusal(repo: Any) -> str | None:
    """git's own words when it refuses to read ``repo`` (an owner other than the user, a
    damaged repository …); None when HEAD is only unborn (no commits yet)."""
    git = _git_module()
    try:
        repo.git.rev_parse("--verify", "--quiet", "HEAD")
    except git.GitCommandError as exc:
        said = " ".join(str(exc.stderr or "").replace("stderr:", "").split()).strip(" '")
        return said or None  # --quiet: an unborn HEAD says nothing
    except OSError as exc:
        return f"cannot run git ({exc.strerror or exc})"
    return None


def _rev_parse(repo: Any, ref: str) -> str | None:
    """The full sha of the commit ``ref`` names, or ``None`` when git does not know it."""
    # A leading '-' would be read as an option by git.
    if not ref or ref.startswith("-"):
        return None
    git = _git_module()
    try:
        return str(repo.git.rev_parse("--verify", "--quiet", f"{ref}^{{commit}}"))
    except git.GitCommandError:
        return None


def _resolve(repo: Any, repo_dir: Path, ref: str) -> str:
    sha = _rev_parse(repo, ref)
    if sha is None:
        raise PerfgateError(
            f"{repo_dir}: unknown git ref {ref!r} (expected a branch, tag or commit of this "
            "repository; in a shallow CI clone, fetch it first)"
        )
    return sha


def _branch_ref(repo: Any, branch: str) -> str | None:
    """``branch`` when it exists locally, else ``origin/<branch>`` when that does, else None."""
    # CI checkouts often have no local copy of the target branch, only the remote one.
    if _rev_parse(repo, f"refs/heads/{branch}"):
        return branch
    if _rev_parse(repo, f"refs/remotes/origin/{branch}"):
        return f"origin/{branch}"
    return None


def _first_parents(repo: Any, start: str, max_count: int | None) -> list[str]:
    args = ["--first-parent"]
    if max_count is not None:
        args.append(f"--max-count={max_count}")
    # rev-list stops by itself at a shallow clone's graft boundary: no error, just fewer commits.
    out = str(repo.git.rev_list(*args, start, "--"))
    return out.split()


def _is_shallow(repo: Any) -> bool:
    return str(repo.git.rev_parse("--is-shallow-repository")).strip() == "true"


def is_shallow(repo_dir: Path) -> bool:
    """Whether the repository is a shallow clone (``git clone --depth N``, the default of
    ``actions/checkout``): its history ends early, so older baselines cannot be found."""
    with _open(repo_dir) as repo:
        return _is_shallow(repo)


def work_tree(folder: Path) -> Path | None:
    """The top folder of the git work tree that holds ``folder`` (commits or not), or None
    outside git or without a git executable."""
    try:
        git = _git_module()
    except PerfgateError:
        return None
    try:
        with git.Repo(folder, search_parent_directories=True) as repo:
            top = repo.working_tree_dir
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    return Path(top).resolve() if top else None


def stores_holding(folder: Path, benchmark: str) -> list[Path]:
    """The folders of the repository holding ``folder`` whose committed files include
    baselines of ``benchmark`` (``<store>/<benchmark>/<env>/<sha>.json``): where a store
    kept beside another perfgate.yaml is. Empty outside git or when git cannot say."""
    existing = folder.resolve()
    while not existing.exists() and existing != existing.parent:  # a store not made yet
        existing = existing.parent
    top = work_tree(existing)
    if top is None:
        return []
    try:
        with _git_module().Repo(top) as repo:
            listed = str(repo.git.ls_files("-z", "--", f":(glob)**/{benchmark}/*/*.json"))
    except Exception:  # a hint, never a failure of its own
        return []
    stores = {(top / name).parent.parent.parent for name in listed.split("\0") if name}
    return sorted(stores)


# Where the default branch is looked for, in order, after origin/HEAD.
_USUAL_DEFAULTS = ("main", "master")


def _default_branch(repo: Any) -> str:
    # One git call: origin/HEAD (set by `git clone`, or by the action from the event) and
    # the usual names, local or remote-tracking.
    refs = ["refs/remotes/origin/HEAD"]
    for name in _USUAL_DEFAULTS:
        refs += [f"refs/heads/{name}", f"refs/remotes/origin/{name}"]
    out = str(repo.git.for_each_ref("--format=%(refname) %(symref)", *refs))
    found: dict[str, str] = {}
    for line in out.splitlines():
        name, _, target = line.partition(" ")
        found[name] = target.strip()
    origin_head = found.get("refs/remotes/origin/HEAD", "")
    if origin_head.startswith("refs/remotes/origin/"):
        return origin_head.removeprefix("refs/remotes/origin/")
    for name in _USUAL_DEFAULTS:
        if f"refs/heads/{name}" in found or f"refs/remotes/origin/{name}" in found:
            return name
    return _USUAL_DEFAULTS[0]


def default_branch(repo_dir: Path) -> str:
    """The repository's default branch: what ``origin/HEAD`` points to (a clone sets it),
    else ``main`` or ``master``, whichever exists (locally or on origin, in that order),
    else ``main``. The baseline branch when the configuration names none."""
    with _open(repo_dir) as repo:
        return _default_branch(repo)


def current_commit(repo_dir: Path, *, store: Path | None = None) -> CommitInfo:
    """The commit checked out in ``repo_dir`` (or the repository that contains it).

    ``store``: the baseline directory, whose changes do not make the tree dirty. Baselines
    are no code that was measured, and git need not look at their files: with 100,000 of
    them, `git diff` over the whole tree takes 0.15 s on a quiet machine, 0.03 s without.
    """
    with _open(repo_dir) as repo:
        commit = repo.head.commit
        branch = None if repo.head.is_detached else str(repo.active_branch.name)
        return CommitInfo(
            sha=str(commit.hexsha),
            branch=branch,
            dirty=_dirty(repo, store),
            time=str(commit.committed_datetime.isoformat()),
        )


def _dirty(repo: Any, store: Path | None) -> bool:
    """Whether tracked files (staged or not) differ from HEAD, the ``store`` left out."""
    pathspec = []
    top = Path(str(repo.working_tree_dir)).resolve()
    where = store.resolve() if store is not None else None
    if where is not None and where.is_relative_to(top):
        inside = where.relative_to(top).as_posix()
        if inside != ".":
            # Only a pathspec that excludes: git takes it as "everything but".
            pathspec = ["--", f":(top,exclude,literal){inside}"]
    git = _git_module()
    try:
        repo.git.diff("--quiet", "HEAD", *pathspec)
    except git.GitCommandError as exc:
        if exc.status == 1:  # --quiet: 1 is "differences", anything else a failure
            return True
        said = " ".join(str(exc.stderr or "").split()).removeprefix("stderr: ").strip("'")
        raise PerfgateError(
            f"{top}: git cannot compare the work tree with HEAD ({said or exc.status})"
        ) from exc
    return False


def in_head(path: Path, top: Path) -> bool | None:
    """Whether HEAD of the work tree at ``top`` holds the file ``path``; None when git cannot
    say."""
    try:
        with _git_module().Repo(top) as repo:
            relative = path.resolve().relative_to(top).as_posix()
            listed = str(repo.git.ls_tree("--name-only", "HEAD", "--", f":(literal){relative}"))
    except Exception:  # a check of convenience: git's silence is not a refusal
        return None
    return bool(listed.strip())


def resolve(repo_dir: Path, ref: str) -> str:
    """The full sha of the commit that ``ref`` (branch, tag, sha, ``HEAD~2``…) names."""
    with _open(repo_dir) as repo:
        return _resolve(repo, repo_dir, ref)


def main_line(repo_dir: Path, baseline_branch: str | None = None) -> list[str]:
    """The first-parent history of the baseline branch (default: the repository's default
    branch), newest first (full shas).

    Uses the local branch, or ``origin/<branch>`` when there is no local one. This is the
    ``main_line`` that :func:`perfgate.store.baselines.prune` expects.
    """
    with _open(repo_dir) as repo:
        branch = baseline_branch or _default_branch(repo)
        ref = _branch_ref(repo, branch)
        if ref is None:
            raise PerfgateError(_no_branch(repo_dir, branch))
        return _first_parents(repo, _resolve(repo, repo_dir, ref), None)


def reachable_commits(repo_dir: Path) -> set[str]:
    """Every commit that HEAD or a ref of this clone (branches, remote branches, tags)
    reaches, as full shas: what :func:`perfgate.store.baselines.prune` keeps with
    ``reachable``. Refused in a shallow clone, whose history ends early: every commit before
    its boundary would look gone."""
    with _open(repo_dir) as repo:
        if _is_shallow(repo):
            raise PerfgateError(
                f"{Path(repo_dir).resolve()}: a shallow clone does not know which commits are "
                "gone (its history ends early); fetch the whole history first: git fetch "
                "--unshallow"
            )
        return set(str(repo.git.rev_list("--all", "--")).split())


def _no_branch(repo_dir: Path, branch: str) -> str:
    return (
        f"{Path(repo_dir).resolve()}: no branch {branch!r} (looked for {branch} and "
        f"origin/{branch}; fetch it, or set baseline.branch in the configuration)"
    )


def baseline_candidates(
    repo_dir: Path,
    *,
    baseline_branch: str | None = None,
    start_ref: str | None = None,
    max_depth: int = 50,
    exclude_head: bool = False,
) -> list[Candidate]:
    """The commits whose baselines may serve HEAD, nearest first: the ``candidates`` of
    :func:`baseline_walk`."""
    return baseline_walk(
        repo_dir,
        baseline_branch=baseline_branch,
        start_ref=start_ref,
        max_depth=max_depth,
        exclude_head=exclude_head,
    ).candidates


def baseline_walk(
    repo_dir: Path,
    *,
    baseline_branch: str | None = None,
    start_ref: str | None = None,
    max_depth: int = 50,
    exclude_head: bool = False,
    head_ref: str | None = None,
) -> Walk:
    """The commits whose baselines may serve HEAD, nearest first.

    The baseline branch is ``baseline_branch``, else the repository's default branch
    (:func:`default_branch`). The walk starts at:

    - ``start_ref`` when given (``how`` is ``"--baseline-ref <ref>"``);
    - else the merge-base of HEAD and the baseline branch (local, else ``origin/<branch>``);
      when HEAD is on that branch the merge-base is HEAD itself;
    - HEAD when the branch does not exist or shares no history with HEAD.

    From the start it follows first parents only (a merge commit's side branch is never
    entered), the start included at distance 0, and returns at most ``max_depth`` commits:
    one ``git rev-list``, whatever the depth. A shallow clone ends the walk where its
    history ends; :attr:`Walk.shallow` says so.

    ``exclude_head`` drops HEAD's own commit from the list. The gate sets it: on the baseline
    branch a push is compared with its first parent (distance 1), not with a baseline that
    was just recorded for the very commit being checked.

    ``head_ref``: the commit to walk for instead of the one checked out — a results file's,
    measured at another commit: the walk is the one the plugin took when it measured there.
    """
    if max_depth < 1:
        raise PerfgateError(f"baseline max_depth must be at least 1, got {max_depth}")
    with _open(repo_dir) as repo:
        head = str(repo.head.commit.hexsha)
        name = "HEAD"
        if head_ref is not None and head_ref != head and start_ref is None:
            sha = _rev_parse(repo, head_ref)
            if sha is None:  # rebased away, or beyond a shallow clone: HEAD, saying so
                name = f"HEAD (the measured {head_ref[:12]} is not in this repository)"
            else:
                head, name = sha, f"{sha[:12]} (measured)"
        branch = baseline_branch or _default_branch(repo)
        if baseline_branch is not None and _branch_ref(repo, baseline_branch) is None:
            # A branch named in the configuration (or the action's input) that is not there
            # is a typo or a missing fetch: walking HEAD instead judged against the branch's
            # own baselines, calling them the main line's.
            raise PerfgateError(_no_branch(repo_dir, baseline_branch))
        if start_ref is not None:
            start, how = _resolve(repo, repo_dir, start_ref), f"--baseline-ref {start_ref}"
        else:
            start, how = _default_start(repo, head, branch)
            how = how.replace("HEAD", name, 1)
        # One extra commit so that dropping HEAD still leaves max_depth candidates.
        wanted = max_depth + 1 if exclude_head else max_depth
        walk = _first_parents(repo, start, wanted)
        # Cut short by the clone's depth, not by max_depth (or no merge-base found in it).
        shallow = (len(walk) < wanted or how.startswith("HEAD")) and _is_shallow(repo)
    candidates = [
        Candidate(sha=sha, distance=distance, how=how)
        for distance, sha in enumerate(walk)
        if not (exclude_head and sha == head)
    ]
    return Walk(head=head, branch=branch, candidates=candidates[:max_depth], shallow=shallow)


def _default_start(repo: Any, head: str, branch: str) -> tuple[str, str]:
    ref = _branch_ref(repo, branch)
    if ref is None:
        return head, f"HEAD (no branch {branch} or origin/{branch})"
    bases = repo.merge_base(head, ref)
    if not bases:
        where = " in this shallow clone" if _is_shallow(repo) else ""
        return head, f"HEAD (no merge-base with {ref}{where})"
    base = str(bases[0].hexsha)
    if base == head:
        return head, f"first parents of HEAD on {ref}"
    return base, f"merge-base of HEAD and {ref}"
