"""Flash a firmware image built from the generated out-of-tree controller, through cflib.

``make CRAZYFLIE_BASE=...`` in the generated folder writes ``build/cf2.bin`` (and ``cf2.elf``).
:func:`check_image` validates it before anything touches the radio: it exists, its size fits
the STM32F405's application area, and its vector table looks like a Cortex-M image linked
for the Crazyflie (initial stack pointer in SRAM/CCM, reset handler a Thumb address in flash
after the 16 KiB bootloader). When ``cf2.elf`` lies next to it, its symbols must contain the
out-of-tree controller. :func:`flash_image` then hands the file to cflib's bootloader
(``cflib.bootloader.Bootloader.flash_full``, the same call as ``cfloader flash``).
"""

from __future__ import annotations

import hashlib
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from deploy.crazyflie.errors import FlashError

DEFAULT_IMAGE = Path("build/crazyflie/build/cf2.bin")
"""Where ``make`` in the default ``export-c`` output folder writes the firmware."""
FLASH_BASE = 0x08000000
BOOTLOADER_BYTES = 16 * 1024
"""The Crazyflie 2.x bootloader occupies the first 16 KiB sector; the firmware starts after it."""
FLASH_BYTES = 1024 * 1024
MAX_IMAGE_BYTES = FLASH_BYTES - BOOTLOADER_BYTES
SRAM = (0x20000000, 0x20000000 + 128 * 1024)
CCM = (0x10000000, 0x10000000 + 64 * 1024)
REQUIRED_SYMBOLS = ("controllerOutOfTree", "policy_forward")


@dataclass
class ImageCheck:
    path: Path
    size: int
    sha256: str
    initial_sp: int
    reset_handler: int
    symbols_checked: bool = False
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        lines = [f"image   {self.path} ({self.size} B = {self.size / 1024:.1f} KiB of {MAX_IMAGE_BYTES // 1024} KiB)",
                 f"sha256  {self.sha256}",
                 f"vectors initial SP 0x{self.initial_sp:08x}, reset handler 0x{self.reset_handler:08x}"]
        lines += [f"note    {n}" for n in self.notes]
        return "\n".join(lines)


def build_instructions(project_dir: Path) -> str:
    return (f"build it first: `robot-hrl export-c models/crazyflie_goto.onnx --out {project_dir}` then "
            f"`make -C {project_dir} CRAZYFLIE_BASE=/path/to/crazyflie-firmware` (see docs/deploy_hardware.md)")


def check_image(path: str | Path) -> ImageCheck:
    """Validate a Crazyflie 2.x STM32 firmware image; :class:`FlashError` says what is wrong."""
    path = Path(path)
    project_dir = path.parent.parent if path.parent.name == "build" else path.parent
    if not path.is_file():
        raise FlashError(f"firmware image {path} does not exist; {build_instructions(project_dir)}")
    if path.suffix != ".bin":
        raise FlashError(f"{path} is not a .bin image; flash the cf2.bin that `make` writes next to cf2.elf "
                         "(the bootloader takes raw binaries)")
    data = path.read_bytes()
    if len(data) < 8:
        raise FlashError(f"{path} is {len(data)} B, too small to be a firmware image; rebuild it")
    if len(data) > MAX_IMAGE_BYTES:
        raise FlashError(f"{path} is {len(data)} B; the STM32F405 application area holds {MAX_IMAGE_BYTES} B "
                         "(1 MiB minus the 16 KiB bootloader). Shrink the policy or the firmware configuration")
    sp, reset = struct.unpack_from("<II", data, 0)
    in_ram = SRAM[0] <= sp <= SRAM[1] or CCM[0] <= sp <= CCM[1]
    if not in_ram:
        raise FlashError(f"{path}: initial stack pointer 0x{sp:08x} is not in the STM32F405's RAM; this is not a "
                         "Cortex-M firmware image for the Crazyflie (use build/cf2.bin of the out-of-tree build)")
    if not (reset & 1) or not (FLASH_BASE + BOOTLOADER_BYTES <= reset < FLASH_BASE + FLASH_BYTES):
        raise FlashError(f"{path}: reset handler 0x{reset:08x} is not a Thumb address in flash after the bootloader "
                         f"(0x{FLASH_BASE + BOOTLOADER_BYTES:08x}...); the image is not linked for the Crazyflie 2.x")
    check = ImageCheck(path=path, size=len(data), sha256=hashlib.sha256(data).hexdigest(), initial_sp=sp,
                       reset_handler=reset)
    elf = path.with_suffix(".elf")
    nm = shutil.which("arm-none-eabi-nm")
    if elf.is_file() and nm:
        res = subprocess.run([nm, str(elf)], capture_output=True, text=True)
        names = {line.split()[-1] for line in res.stdout.splitlines() if line.strip()}
        missing = [s for s in REQUIRED_SYMBOLS if s not in names]
        if res.returncode != 0 or missing:
            raise FlashError(f"{elf} does not contain {missing}: this firmware was not built from the generated "
                             "out-of-tree controller (check CONFIG_CONTROLLER_OOT=y in app-config)")
        check.symbols_checked = True
        check.notes.append(f"{elf.name} contains {', '.join(REQUIRED_SYMBOLS)}")
    else:
        check.notes.append(f"{elf.name} not found next to the image: the policy symbols were not checked")
    return check


def require_link(uri: str) -> None:
    """Fail early, with the fix, when the URI's link (Crazyradio or USB) is not present."""
    try:
        import cflib.crtp  # noqa: F401
    except ImportError as exc:
        raise FlashError(f"cflib is not installed ({exc}); pip install cflib (or pip install -e '.[deploy]')") from exc
    if uri.startswith("radio://"):
        from cflib.drivers.crazyradio import get_serials

        try:
            serials = get_serials()
        except Exception as exc:  # pyusb/libusb errors
            raise FlashError(f"cannot look for a Crazyradio ({type(exc).__name__}: {exc}); install libusb and the "
                             "udev rules (docs/deploy_hardware.md)") from exc
        if not serials:
            raise FlashError(f"no Crazyradio found on USB, so {uri} cannot be reached. Plug in a Crazyradio "
                             "(PA or 2.0) and check the udev rules (docs/deploy_hardware.md), or connect the "
                             "Crazyflie by USB and use --uri usb://0")
    elif uri.startswith("usb://"):
        import cflib.crtp

        cflib.crtp.init_drivers()
        found = [u for u, _ in cflib.crtp.scan_interfaces() if u.startswith("usb://")]
        if not found:
            raise FlashError(f"no Crazyflie found on USB for {uri}; connect it with a data cable, or use a "
                             "Crazyradio with --uri radio://0/80/2M")
    else:
        raise FlashError(f"URI {uri!r} is neither radio://... nor usb://...; e.g. radio://0/80/2M")


def flash_image(path: str | Path, uri: str, progress=None) -> ImageCheck:
    """Check ``path`` and flash it to the STM32 of the Crazyflie at ``uri`` through cflib's bootloader."""
    check = check_image(path)
    require_link(uri)
    import cflib.crtp
    from cflib.bootloader import Bootloader, Target

    cflib.crtp.init_drivers()
    loader = Bootloader(uri)
    try:
        loader.flash_full(cf=None, filename=str(check.path), warm=True,
                          targets=[Target("cf2", "stm32", "fw", [], [])], progress_cb=progress)
    except Exception as exc:  # cflib raises bare Exceptions
        raise FlashError(f"flashing {check.path} to {uri} failed: {exc}. Power-cycle the Crazyflie into its "
                         "bootloader (hold the power button 3 s) and try again") from exc
    finally:
        loader.close()
    return check
