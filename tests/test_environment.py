"""The runner fingerprint and the msprof environment check.

npu-smi and msprof are the stand-ins in ``tests/bin``; the NPU device files live under a
temporary ``PERFGATE_DEV_ROOT``.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from perfgate.errors import PerfgateError
from perfgate.profilers.environment import (
    FINGERPRINT_KEYS,
    MSPROF_NOT_FOUND,
    cann_version,
    check_msprof_environment,
    fingerprint,
    npu_smi_chips,
    npu_smi_driver,
)

BIN = Path(__file__).resolve().parent / "bin"

# `npu-smi info` of a two-NPU, two-chips-per-NPU machine in the real 25.x layout (chip rows
# "NPU Name | Health | …" then "Chip Phy-ID | Bus-Id | …"; a dash for a chip's power).
FOUR_CHIPS = """\
+------------------------------------------------------------------------------------------------+
| npu-smi 25.2.0                   Version: 25.2.1                                               |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip  Phy-ID              | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     Ascend910           | OK            | 160.2       36                0    / 0             |
| 0     0                   | 0000:9C:00.0  | 0           0    / 0          3120 / 65536         |
+------------------------------------------------------------------------------------------------+
| 0     Ascend910           | OK            | -           36                0    / 0             |
| 1     1                   | 0000:9E:00.0  | 0           0    / 0          2870 / 65536         |
+===========================+===============+====================================================+
| 1     Ascend910           | OK            | 165.0       37                0    / 0             |
| 0     2                   | 0000:37:00.0  | 0           0    / 0          3100 / 65536         |
+------------------------------------------------------------------------------------------------+
| 1     Ascend910           | Warning       | -           38                0    / 0             |
| 1     3                   | 0000:39:00.0  | 0           0    / 0          10500/ 65536         |
+===========================+===============+====================================================+
+---------------------------+---------------+----------------------------------------------------+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| 1       1                 | 990711        | python                   | 7746                    |
+===========================+===============+====================================================+
"""


def runner_env(tmp_path: Path, *, devices: tuple[str, ...] = ("davinci0",)) -> dict[str, str]:
    dev = tmp_path / "dev"
    dev.mkdir(exist_ok=True)
    for name in devices:
        (dev / name).touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFGATE_")}
    env["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    env["PERFGATE_DEV_ROOT"] = str(dev)
    return env


def bare_path(tmp_path: Path, *tools: str) -> str:
    """A PATH with links to the named stand-ins and this Python (they run on ``python3``)."""
    folder = tmp_path / "path"
    folder.mkdir(exist_ok=True)
    for tool in tools:
        (folder / tool).symlink_to(BIN / tool)
    (folder / "python3").symlink_to(sys.executable)
    return str(folder)


# --------------------------------------------------------------------------- msprof check


def test_the_check_returns_the_msprof_on_path(tmp_path: Path) -> None:
    assert check_msprof_environment(runner_env(tmp_path)) == str(BIN / "msprof")


def test_msprof_missing_from_path_says_to_source_the_cann_environment(tmp_path: Path) -> None:
    env = {**runner_env(tmp_path), "PATH": bare_path(tmp_path, "npu-smi")}
    with pytest.raises(PerfgateError) as caught:
        check_msprof_environment(env)
    assert str(caught.value) == MSPROF_NOT_FOUND
    assert "source /usr/local/Ascend/ascend-toolkit/set_env.sh" in str(caught.value)
    assert "cann-env" in str(caught.value)


def test_msprof_is_checked_first_of_all(tmp_path: Path) -> None:
    env = {**runner_env(tmp_path, devices=()), "PATH": bare_path(tmp_path)}
    with pytest.raises(PerfgateError, match=r"^msprof not found on PATH"):
        check_msprof_environment(env)


def test_no_davinci_device_says_the_runner_needs_the_devices_mapped(tmp_path: Path) -> None:
    # davinci_manager is a control device, not an NPU.
    env = runner_env(tmp_path, devices=("davinci_manager",))
    with pytest.raises(PerfgateError) as caught:
        check_msprof_environment(env)
    message = str(caught.value)
    assert message.startswith(f"no NPU device: {tmp_path / 'dev'}/davinci<N> does not exist")
    assert "--device /dev/davinci0" in message


def test_the_device_root_defaults_to_dev(tmp_path: Path) -> None:
    env = runner_env(tmp_path)
    del env["PERFGATE_DEV_ROOT"]
    has_npu = any(re.fullmatch(r"davinci\d+", p.name) for p in Path("/dev").iterdir())
    if has_npu:
        pytest.skip("this machine has NPU devices in /dev")
    with pytest.raises(PerfgateError, match=r"^no NPU device: /dev/davinci<N> does not exist"):
        check_msprof_environment(env)


def test_a_device_this_user_cannot_open_is_named_with_the_group_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = runner_env(tmp_path, devices=("davinci0", "davinci1"))
    locked = tmp_path / "dev" / "davinci1"
    if os.geteuid() == 0:
        # root passes every permission check: take the kernel's answer for a locked file.
        real_access = os.access
        monkeypatch.setattr(
            "perfgate.profilers.environment.os.access",
            lambda path, mode: Path(path) != locked and real_access(path, mode),
        )
    else:
        locked.chmod(0)
    with pytest.raises(PerfgateError) as caught:
        check_msprof_environment(env)
    message = str(caught.value)
    assert message.startswith(f"{locked} is not readable and writable by user ")
    assert "usermod -aG HwHiAiUser" in message


def test_a_failing_npu_smi_is_reported_with_its_error_lines(tmp_path: Path) -> None:
    env = {**runner_env(tmp_path), "PERFGATE_FAKE_NPU_SMI_FAIL": "1"}
    with pytest.raises(PerfgateError) as caught:
        check_msprof_environment(env)
    message = str(caught.value)
    assert message.startswith("`npu-smi info` failed (exit code 255): ")
    assert "dcmi module initialize failed. ret is -8005" in message
    assert "driver is not loaded or does not match this CANN toolkit" in message
    assert "\n" not in message


def test_a_runner_without_npu_smi_is_not_refused_for_it(tmp_path: Path) -> None:
    env = {**runner_env(tmp_path), "PATH": bare_path(tmp_path, "msprof")}
    assert check_msprof_environment(env) == str(tmp_path / "path" / "msprof")


# --------------------------------------------------------------------------- fingerprint


def test_the_fingerprint_of_a_cpu_machine(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    env = {"PATH": bare_path(tmp_path), "ASCEND_TOOLKIT_HOME": str(tmp_path / "no-toolkit")}
    info = fingerprint(env)
    assert tuple(info) == FINGERPRINT_KEYS
    assert info["machine"] == platform.machine()
    assert info["python"] == platform.python_version()
    assert info["torch_version"] == str(torch.__version__)
    assert (info["device"], info["device_count"], info["cuda_device"]) == ("cpu", 1, None)
    assert info["driver"] is None
    if not Path("/usr/local/Ascend").exists():
        assert info["cann_version"] is None
    assert ("torch_npu" in sys.modules) or info["torch_npu_version"] is None


def test_the_fingerprint_names_the_cpu_model_from_proc_cpuinfo(tmp_path: Path) -> None:
    cpuinfo = Path("/proc/cpuinfo")
    models = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.MULTILINE)
    if not models:
        pytest.skip("/proc/cpuinfo has no model name here")
    assert fingerprint({"PATH": bare_path(tmp_path)})["cpu"] == models[0].strip()


def test_the_fingerprint_takes_the_npu_and_driver_from_npu_smi(tmp_path: Path) -> None:
    info = fingerprint({"PATH": bare_path(tmp_path, "npu-smi")})
    assert info["driver"] == "23.0.6"
    if info["torch_npu_version"] is None:  # no torch_npu: the device is npu-smi's
        assert (info["device"], info["device_count"]) == ("Ascend910B4", 1)


def test_npu_smi_output_gives_the_driver_and_every_chip() -> None:
    assert npu_smi_driver(FOUR_CHIPS) == "25.2.1"
    assert npu_smi_chips(FOUR_CHIPS) == ["Ascend910"] * 4
    assert npu_smi_driver("| npu-smi 23.0.0                                   |") == "23.0.0"
    assert npu_smi_chips("no table at all") == []


def test_the_cann_version_comes_from_the_toolkit_install_info(tmp_path: Path) -> None:
    home = tmp_path / "ascend-toolkit" / "latest"
    (home / "aarch64-linux").mkdir(parents=True)
    (home / "aarch64-linux" / "ascend_toolkit_install.info").write_text(
        "package_name=Ascend-cann-toolkit\nversion=8.3.RC1\n"
        "innerversion=V100R001C23SPC001B231\narch=aarch64\nos=linux\n",
        encoding="utf-8",
    )
    (home / "version.cfg").write_text(
        "# version: 1.0\ntoolkit_running_version=[7.6.0.1.220:8.0.0]\n", encoding="utf-8"
    )
    assert cann_version({"ASCEND_TOOLKIT_HOME": str(home)}) == "8.3.RC1"
    assert fingerprint({"PATH": bare_path(tmp_path), "ASCEND_HOME_PATH": str(home)})[
        "cann_version"
    ] == ("8.3.RC1")


def test_without_install_info_the_cann_version_comes_from_version_cfg(tmp_path: Path) -> None:
    home = tmp_path / "latest"
    home.mkdir()
    (home / "version.cfg").write_text(
        "# version: 1.0\nruntime_running_version=[7.6.0.1.220:8.0.0]\n"
        "toolkit_running_version=[7.6.0.1.220:8.0.0]\n",
        encoding="utf-8",
    )
    assert cann_version({"ASCEND_HOME_PATH": str(home)}) == "8.0.0"


FINGERPRINT_IN_A_FRESH_PROCESS = """
import json, sys
from perfgate.profilers.environment import fingerprint
info = fingerprint({"PATH": sys.argv[1], "PERFGATE_DEV_ROOT": sys.argv[2]})
print(json.dumps({"torch_imported": "torch" in sys.modules, **info}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="device files are Linux's")
def test_a_benchmark_without_torch_on_a_machine_without_gpu_does_not_import_torch(
    tmp_path: Path,
) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    dev = tmp_path / "dev"
    dev.mkdir()
    path = bare_path(tmp_path)

    def fresh_fingerprint() -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-c", FINGERPRINT_IN_A_FRESH_PROCESS, path, str(dev)],
            capture_output=True,
            text=True,
            check=True,
        )
        found: dict[str, Any] = json.loads(done.stdout)
        return found

    # No GPU device file: torch's version from its metadata, torch left unimported (it cost
    # 2-3 s of every torch-less benchmark's run), the same fingerprint as with torch.
    without = fresh_fingerprint()
    assert without.pop("torch_imported") is False
    assert without["torch_version"] == str(torch.__version__)
    assert (without["device"], without["device_count"], without["cuda_device"]) == ("cpu", 1, None)
    # A GPU's device file (NVIDIA's here): torch.cuda is asked, as before.
    (dev / "nvidiactl").touch()
    with_gpu = fresh_fingerprint()
    assert with_gpu.pop("torch_imported") is True
    assert with_gpu == without  # this machine's torch still sees no CUDA device
