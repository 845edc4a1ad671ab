"""``robot-hrl flash``: image checks, dry run, and the clear error when no Crazyradio is present.

The valid image is a real Cortex-M4 binary: the generated controller linked with
arm-none-eabi-gcc after the Crazyflie's 16 KiB bootloader (``link_probe_image``).
"""

from __future__ import annotations

import shutil
import struct

import pytest

from deploy.crazyflie.codegen import generate_project
from deploy.crazyflie.errors import FlashError
from deploy.crazyflie.example_model import build_mlp_onnx
from deploy.crazyflie.flash import MAX_IMAGE_BYTES, check_image, flash_image
from deploy.crazyflie.size import link_probe_image
from robot_hrl.cli import main

needs_arm = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="needs arm-none-eabi-gcc")


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("needs arm-none-eabi-gcc")
    tmp = tmp_path_factory.mktemp("flash")
    project = generate_project(build_mlp_onnx(tmp / "m.onnx", hidden=(16, 16)), tmp / "cf")
    return link_probe_image(project, tmp / "cf" / "build")


def _image(tmp_path, sp=0x20020000, reset=0x08004101, size=4096, name="cf2.bin"):
    path = tmp_path / name
    path.write_bytes(struct.pack("<II", sp, reset) + bytes(size - 8))
    return path


def test_dry_run_checks_a_real_image(probe, capsys):
    check = check_image(probe.bin)
    assert check.symbols_checked and check.size == probe.bin.stat().st_size
    assert main(["flash", "--uri", "radio://0/80/2M", "--image", str(probe.bin), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "nothing is flashed" in out and check.sha256 in out and "flash_full" in out
    assert "link    " in out  # found, or why not (no Crazyradio here)


def test_missing_image_explains_how_to_build_it(tmp_path, capsys):
    assert main(["flash", "--dry-run", "--image", str(tmp_path / "build" / "cf2.bin")]) == 1
    err = capsys.readouterr().err
    assert "does not exist" in err and "robot-hrl export-c" in err and "CRAZYFLIE_BASE" in err


@pytest.mark.parametrize("kwargs, message", [
    ({"sp": 0x08000000}, "initial stack pointer"),
    ({"reset": 0x08004100}, "reset handler"),          # not a Thumb address
    ({"reset": 0x08000101}, "reset handler"),          # inside the bootloader
    ({"size": 4}, "too small"),
    ({"size": MAX_IMAGE_BYTES + 8}, "application area"),
    ({"name": "cf2.hex"}, "not a .bin"),
])
def test_bad_images_are_refused(tmp_path, kwargs, message):
    if kwargs.get("size", 8) < 8:
        path = tmp_path / "cf2.bin"
        path.write_bytes(bytes(kwargs["size"]))
    else:
        path = _image(tmp_path, **kwargs)
    with pytest.raises(FlashError, match=message):
        check_image(path)


@needs_arm
def test_elf_without_the_controller_is_refused(tmp_path):
    src = tmp_path / "other.c"
    src.write_text("void Reset(void) { for (;;) {} }\n")
    elf = tmp_path / "cf2.elf"
    import subprocess

    subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", "-nostdlib", "-Wl,-e,Reset",
                    "-Wl,-Ttext=0x08004000", str(src), "-o", str(elf)], check=True, capture_output=True)
    _image(tmp_path)
    with pytest.raises(FlashError, match="not built from the generated"):
        check_image(tmp_path / "cf2.bin")


def test_flashing_without_a_crazyradio_is_a_clear_error(probe):
    pytest.importorskip("cflib")
    from cflib.drivers.crazyradio import get_serials

    if get_serials():
        pytest.skip("a Crazyradio is plugged in: this test needs none")
    with pytest.raises(FlashError, match="no Crazyradio found"):
        flash_image(probe.bin, "radio://0/80/2M")
    assert main(["flash", "--uri", "radio://0/80/2M", "--image", str(probe.bin)]) == 1


def test_unknown_uri_scheme_is_refused(probe):
    pytest.importorskip("cflib")
    with pytest.raises(FlashError, match="neither radio"):
        flash_image(probe.bin, "tcp://192.168.0.1")


def test_usb_uri_without_a_crazyflie_is_a_clear_error(probe):
    pytest.importorskip("cflib")
    import cflib.crtp

    cflib.crtp.init_drivers()
    if any(uri.startswith("usb://") for uri, _ in cflib.crtp.scan_interfaces()):
        pytest.skip("a Crazyflie is on USB: this test must not flash it")
    with pytest.raises(FlashError, match="no Crazyflie found on USB"):
        flash_image(probe.bin, "usb://0")
