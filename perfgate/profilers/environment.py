"""The runner environment: its fingerprint, and whether msprof can run here.

:func:`fingerprint` is read at run time, from the machine itself: ``/proc/cpuinfo``, torch /
torch_npu when installed (imported lazily; torch not at all on a Linux machine without a GPU
device file when the benchmark did not import it), the CANN toolkit's version files and
``npu-smi info``. :func:`check_msprof_environment` says, as one
:class:`~perfgate.errors.PerfgateError`, the first thing that stops msprof from profiling on
this machine and how to fix it.

Environment variables read:

``ASCEND_TOOLKIT_HOME`` / ``ASCEND_HOME_PATH``
    The CANN toolkit (``set_env.sh`` exports both); its version is read from
    ``<home>/<arch>-linux/ascend_toolkit_install.info`` (``version=8.3.RC1``) or else
    ``<home>/version.cfg`` (``toolkit_running_version=[7.6.0.1.220:8.0.0]``).
``PERFGATE_DEV_ROOT``
    Where the NPU device files are (default ``/dev``): for containers that mount them
    elsewhere, and for tests.
"""

from __future__ import annotations

import contextlib
import getpass
import importlib.metadata
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfgate.errors import PerfgateError

DEV_ROOT_ENV = "PERFGATE_DEV_ROOT"
DEFAULT_DEV_ROOT = "/dev"
TOOLKIT_HOME_ENVS = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH")
DEFAULT_TOOLKIT_HOME = "/usr/local/Ascend/ascend-toolkit/latest"
NPU_SMI_TIMEOUT_S = 30.0

FINGERPRINT_KEYS = (
    "machine",
    "cpu",
    "python",
    "torch_version",
    "cuda_device",
    "device",
    "device_count",
    "torch_npu_version",
    "cann_version",
    "driver",
)

CANN_NOT_SET_UP = (
    "source the CANN environment first, e.g. `source "
    "/usr/local/Ascend/ascend-toolkit/set_env.sh` (or set the action's cann-env input)"
)
MSPROF_NOT_FOUND = f"msprof not found on PATH: {CANN_NOT_SET_UP}"
# The device files a container needs besides the NPUs themselves (Ascend container guides).
CONTAINER_DEVICES = "--device /dev/davinci0 --device /dev/davinci_manager " + (
    "--device /dev/devmm_svm --device /dev/hisi_hdc"
)

_DAVINCI = re.compile(r"^davinci\d+$")
# `npu-smi info` header: "| npu-smi 23.0.6                   Version: 23.0.6      |"; the
# first number is the tool's version, the one after "Version:" the driver's.
_NPU_SMI_HEADER = re.compile(r"npu-smi\s+(?P<tool>\S+)(?:\s+Version:\s*(?P<driver>\S+))?")
# First row of a chip in the device table: "| 0     910B4     | OK     | 95.9   39 ... |".
_NPU_SMI_CHIP = re.compile(r"^\|\s*\d+\s+(?P<name>[A-Za-z0-9_-]*[A-Za-z][A-Za-z0-9_-]*)\s*\|")


# --------------------------------------------------------------------------- fingerprint


def fingerprint(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The runner's environment, read now.

    Keys (:data:`FINGERPRINT_KEYS`; ``None`` when unknown): ``machine``, ``cpu`` (model
    name), ``python``, ``torch_version``, ``cuda_device`` (name of CUDA device 0),
    ``device`` (the NPU's name, else the CUDA device's, else ``"cpu"``), ``device_count``,
    ``torch_npu_version``, ``cann_version``, ``driver`` (NPU driver, from ``npu-smi info``).

    Args:
        env: the environment to read (``PATH`` for npu-smi, the toolkit variables);
            default ``os.environ``.
    """
    env = os.environ if env is None else env
    info: dict[str, Any] = dict.fromkeys(FINGERPRINT_KEYS)
    info["machine"] = platform.machine() or None
    info["cpu"] = cpu_model()
    info["python"] = platform.python_version()
    info["cann_version"] = cann_version(env)
    smi = _npu_smi_info(env)
    info["driver"] = npu_smi_driver(smi) if smi else None
    npu_name, npu_count = _torch_npu_devices(info)
    if npu_name is None and smi:
        # A non-PyTorch workload on an NPU runner (msprof profiles any process).
        chips = npu_smi_chips(smi)
        if chips:
            npu_name, npu_count = chips[0], len(chips)
    cuda_name, cuda_count = _torch_cuda_devices(info, env)
    if npu_name is not None:
        info["device"], info["device_count"] = npu_name, npu_count
    elif cuda_name is not None:
        info["device"], info["device_count"] = cuda_name, cuda_count
    else:
        # One CPU "device", as a CPU-only profile counts one rank.
        info["device"], info["device_count"] = "cpu", 1
    return info


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The CPU model name (``/proc/cpuinfo``), or what :mod:`platform` knows."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    # x86 writes "model name"; Arm servers (Kunpeng) often only "Hardware"/"CPU part".
    for key in ("model name", "Hardware", "cpu model"):
        match = re.search(rf"^{key}\s*:\s*(.+)$", text, re.MULTILINE)
        if match and match.group(1).strip():
            return match.group(1).strip()
    return platform.processor() or None


def cann_version(env: Mapping[str, str] | None = None) -> str | None:
    """The CANN toolkit version from the toolkit's own version files, if installed."""
    env = os.environ if env is None else env
    homes = [env[name] for name in TOOLKIT_HOME_ENVS if env.get(name)]
    homes.append(DEFAULT_TOOLKIT_HOME)
    for home in dict.fromkeys(homes):
        root = Path(home)
        for info in sorted(root.glob("*-linux/ascend_toolkit_install.info")):
            version = _key_value(info, "version")
            if version:
                return version
        cfg = _key_value(root / "version.cfg", "toolkit_running_version")
        if cfg:
            # "[7.6.0.1.220:8.0.0]": inner build number, then the CANN version.
            return cfg.strip("[]").split(":")[-1] or None
    return None


def _key_value(path: Path, key: str) -> str | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = re.search(rf"^{re.escape(key)}\s*=\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else None


def npu_smi_driver(output: str) -> str | None:
    """The driver version in ``npu-smi info`` output (the header's ``Version:``)."""
    for line in output.splitlines():
        match = _NPU_SMI_HEADER.search(line)
        if match:
            return match.group("driver") or match.group("tool")
    return None


def npu_smi_chips(output: str) -> list[str]:
    """One name per NPU chip in ``npu-smi info``'s device table, as ``Ascend<Name>``.

    npu-smi prints the bare chip name (``910B4``); torch_npu and the SoC version prefix it
    with ``Ascend``, so the two sources name a device the same way.
    """
    names = []
    for line in output.splitlines():
        match = _NPU_SMI_CHIP.match(line.strip())
        if match and match.group("name") not in ("NPU", "Chip"):
            name = match.group("name")
            names.append(name if name.lower().startswith("ascend") else f"Ascend{name}")
    return names


def _run_npu_smi_info(npu_smi: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """``npu-smi info``, bounded in time (a wedged driver can hang it)."""
    return subprocess.run(
        [npu_smi, "info"],
        capture_output=True,
        text=True,
        timeout=NPU_SMI_TIMEOUT_S,
        env=dict(env),
        check=False,
    )


def _npu_smi_info(env: Mapping[str, str]) -> str | None:
    """``npu-smi info`` output, or None when npu-smi is absent or fails."""
    npu_smi = shutil.which("npu-smi", path=env.get("PATH"))
    if npu_smi is None:
        return None
    try:
        done = _run_npu_smi_info(npu_smi, env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _torch_npu_devices(info: dict[str, Any]) -> tuple[str | None, int | None]:
    if importlib.util.find_spec("torch_npu") is None:
        return None, None
    try:
        import torch
        import torch_npu
    except Exception:  # a broken torch_npu install must not break the fingerprint
        return None, None
    info["torch_version"] = str(torch.__version__)
    info["torch_npu_version"] = str(getattr(torch_npu, "__version__", "")) or None
    npu = getattr(torch, "npu", None)  # added to torch by importing torch_npu
    try:
        if npu is not None and npu.is_available() and npu.device_count() > 0:
            return str(npu.get_device_name(0)), int(npu.device_count())
    except Exception:  # driver trouble: check_msprof_environment says what is wrong
        return None, None
    return None, None


# The device files through which torch.cuda reaches a GPU on Linux: NVIDIA's, ROCm's (torch's
# HIP build answers as torch.cuda) and WSL's. Without any of them torch.cuda sees no device.
_GPU_DEVICE_FILES = ("nvidiactl", "nvidia0", "kfd", "dxg")


def _torch_cuda_devices(
    info: dict[str, Any], env: Mapping[str, str]
) -> tuple[str | None, int | None]:
    if importlib.util.find_spec("torch") is None:
        return None, None
    if "torch" not in sys.modules and sys.platform.startswith("linux"):
        root = _device_root(env)
        if not any((root / name).exists() for name in _GPU_DEVICE_FILES):
            # A benchmark that did not import torch, on a machine without a GPU: importing
            # torch to hear "no CUDA" took 2-3 s of a 6 s run on a CI runner. The installed
            # version is read from its metadata instead.
            with contextlib.suppress(importlib.metadata.PackageNotFoundError):
                info["torch_version"] = importlib.metadata.version("torch")
            return None, None
    try:
        import torch
    except Exception:
        return None, None
    info["torch_version"] = str(torch.__version__)
    try:
        if torch.cuda.is_available() and torch.cuda.device_count() > 0:
            name = str(torch.cuda.get_device_name(0))
            info["cuda_device"] = name
            return name, int(torch.cuda.device_count())
    except Exception:
        return None, None
    return None, None


# --------------------------------------------------------------------------- msprof check


def check_msprof_environment(env: Mapping[str, str] | None = None) -> str:
    """The msprof executable to run, once everything msprof needs is in place.

    Checked in this order, each failure one :class:`PerfgateError` that says how to fix it:
    msprof on ``PATH``; an NPU device file ``davinci<N>`` under the device root
    (``PERFGATE_DEV_ROOT``, default ``/dev``); every such device readable and writable by
    this user; ``npu-smi info`` (when npu-smi is on ``PATH``) succeeding, i.e. the driver
    loaded and matching the toolkit.
    """
    env = os.environ if env is None else env
    msprof = shutil.which("msprof", path=env.get("PATH"))
    if msprof is None:
        raise PerfgateError(MSPROF_NOT_FOUND)
    devices = ascend_devices(env)
    if not devices:
        root = _device_root(env)
        raise PerfgateError(
            f"no NPU device: {root}/davinci<N> does not exist; the runner needs the NPU "
            f"devices mapped into it (containers: {CONTAINER_DEVICES} …)"
        )
    for device in devices:
        if not os.access(device, os.R_OK | os.W_OK):
            user = _user()
            raise PerfgateError(
                f"{device} is not readable and writable by user {user}: add the user to the "
                f"device's group (`sudo usermod -aG HwHiAiUser {user}`, then log in again) or "
                "run the job as a user of the HwHiAiUser group"
            )
    _check_npu_smi(env)
    return msprof


def ascend_devices(env: Mapping[str, str] | None = None) -> list[Path]:
    """The NPU device files ``davinci<N>`` under the device root (``PERFGATE_DEV_ROOT``,
    default ``/dev``), in order of N."""
    return sorted(
        (p for p in _list_dir(_device_root(env)) if _DAVINCI.match(p.name)),
        key=lambda p: int(p.name[len("davinci") :]),
    )


def _device_root(env: Mapping[str, str] | None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get(DEV_ROOT_ENV) or DEFAULT_DEV_ROOT)


def torch_npu_import_error(exc: BaseException) -> PerfgateError:
    """The error for a torch_npu that is installed but fails to import (``exc``)."""
    said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return PerfgateError(
        f"torch_npu is installed but does not import ({said}): {CANN_NOT_SET_UP}; "
        "or --perfgate-profiler=torch to measure without it"
    )


def _list_dir(root: Path) -> list[Path]:
    try:
        return list(root.iterdir())
    except OSError:
        return []


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry (containers with arbitrary uids)
        return str(os.getuid())


def _check_npu_smi(env: Mapping[str, str]) -> None:
    npu_smi = shutil.which("npu-smi", path=env.get("PATH"))
    if npu_smi is None:
        return  # containers often lack npu-smi; msprof itself reports driver trouble
    fix = (
        "the NPU driver is not loaded or does not match this CANN toolkit: check `npu-smi "
        "info` on the runner, install the driver and firmware this CANN version needs, and "
        "reboot after a firmware upgrade"
    )
    try:
        done = _run_npu_smi_info(npu_smi, env)
    except subprocess.TimeoutExpired:
        raise PerfgateError(
            f"`npu-smi info` did not answer within {NPU_SMI_TIMEOUT_S:g} s: {fix}"
        ) from None
    except OSError as exc:
        raise PerfgateError(f"`npu-smi info` cannot run ({exc.strerror or exc}): {fix}") from None
    if done.returncode != 0:
        # npu-smi's first line is often "DrvMngGetConsoleLogLevel failed. (...)" and the
        # cause ("dcmi module initialize failed. ret is -8005") the next: keep a few.
        lines = [ln.strip() for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
        said = "; ".join(lines[:3]) or "no output"
        raise PerfgateError(f"`npu-smi info` failed (exit code {done.returncode}): {said}: {fix}")


__all__ = [
    "CANN_NOT_SET_UP",
    "FINGERPRINT_KEYS",
    "MSPROF_NOT_FOUND",
    "ascend_devices",
    "cann_version",
    "check_msprof_environment",
    "cpu_model",
    "fingerprint",
    "npu_smi_chips",
    "npu_smi_driver",
    "torch_npu_import_error",
]
