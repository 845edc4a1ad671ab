"""Cross-compile the generated controller for the Crazyflie's STM32F405 and check its size.

Each generated source is compiled with ``arm-none-eabi-gcc`` and the flags of a ``cf2`` build
of the pinned crazyflie-firmware release (:data:`deploy.crazyflie.firmware.FIRMWARE_CFLAGS`:
``-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -fno-math-errno -std=gnu11
-ffunction-sections -fdata-sections ... -Os -Werror``), plus stricter warnings, against our
firmware header stubs and an ``autoconf.h`` made from the project's app-config, and
``arm-none-eabi-size -A`` gives the sections:

- flash = text + rodata + data (initial values of .data are stored in flash),
- RAM = data + bss,
- stack: ``-fstack-usage`` frames; the estimate is the sum of all frames (an upper bound of
  the deepest call chain, since nothing recurses) of our code only, not libm's expf/tanhf.

libm's expf/tanhf/sqrtf are linked by the firmware anyway and are not counted.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from deploy.crazyflie.codegen import STUB_DIR, GeneratedProject
from deploy.crazyflie.errors import BudgetError, ToolchainError
from deploy.crazyflie.firmware import FIRMWARE_CFLAGS, write_test_autoconf

ARM_GCC = "arm-none-eabi-gcc"
ARM_SIZE = "arm-none-eabi-size"
ARM_CFLAGS: tuple[str, ...] = FIRMWARE_CFLAGS
"""The flags crazyflie-firmware compiles every source of a cf2 build with (STM32F405, Cortex-M4F, -Os -Werror)."""
EXTRA_CFLAGS: tuple[str, ...] = ("-Wextra", "-Wshadow", "-Wmissing-prototypes", "-Wstrict-prototypes", "-Wundef",
                                 "-Wconversion", "-Wno-sign-conversion", "-fstack-usage")
"""Stricter than the firmware's own warnings (its -Werror applies): generated code must compile clean anywhere."""
DEFAULT_FLASH_BUDGET_KB = 128.0
DEFAULT_RAM_BUDGET_KB = 16.0
STM32F405_FLASH_KB = 1024
STM32F405_RAM_KB = 192


@dataclass
class SizeReport:
    """Sizes in bytes of the generated controller's objects for the Cortex-M4F."""

    sections: dict[str, dict[str, int]]
    """Per source file: text, rodata, data, bss."""
    stack_frames: dict[str, int] = field(default_factory=dict)
    """Function -> stack frame in bytes (-fstack-usage)."""
    frame_files: dict[str, str] = field(default_factory=dict)
    """Function -> the source it is in."""

    def subset(self, files) -> "SizeReport":
        """The report of some of the sources (e.g. one level's: ``nav_model.c``, ``nav_io.c``)."""
        files = set(files)
        return SizeReport(sections={k: v for k, v in self.sections.items() if k in files},
                          stack_frames={f: n for f, n in self.stack_frames.items()
                                        if f in self.frame_files and self.frame_files[f] in files})

    def total(self, kind: str) -> int:
        return sum(s[kind] for s in self.sections.values())

    @property
    def text(self) -> int:
        return self.total("text")

    @property
    def rodata(self) -> int:
        return self.total("rodata")

    @property
    def data(self) -> int:
        return self.total("data")

    @property
    def bss(self) -> int:
        return self.total("bss")

    @property
    def flash(self) -> int:
        return self.text + self.rodata + self.data

    @property
    def ram(self) -> int:
        return self.data + self.bss

    @property
    def stack_upper_bound(self) -> int:
        return sum(self.stack_frames.values())

    def as_dict(self) -> dict:
        return {"text": self.text, "rodata": self.rodata, "data": self.data, "bss": self.bss, "flash": self.flash,
                "ram": self.ram, "stack_upper_bound": self.stack_upper_bound, "files": self.sections,
                "stack_frames": self.stack_frames}

    def summary(self) -> str:
        return (f"flash {self.flash} B ({self.flash / 1024:.1f} KiB: text {self.text}, rodata {self.rodata}, "
                f"data {self.data}), RAM {self.ram} B ({self.ram / 1024:.2f} KiB: data {self.data}, bss {self.bss}), "
                f"stack <= {self.stack_upper_bound} B")


def find_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ToolchainError(
            f"{name} is not installed; install the ARM GNU toolchain (Debian/Ubuntu: "
            "`apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi`) or pass --no-size-check")
    return path


def _classify(section: str) -> str | None:
    if section.startswith(".text"):
        return "text"
    if section.startswith(".rodata"):
        return "rodata"
    if section.startswith(".data"):
        return "data"
    if section.startswith(".bss") or section == "COMMON":
        return "bss"
    return None


def parse_size_a(text: str) -> dict[str, int]:
    """Sum ``arm-none-eabi-size -A`` output of one object into text/rodata/data/bss."""
    out = {"text": 0, "rodata": 0, "data": 0, "bss": 0}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith((".", "COMMON")) and parts[1].isdigit():
            kind = _classify(parts[0])
            if kind:
                out[kind] += int(parts[1])
    return out


def parse_stack_usage(text: str) -> dict[str, int]:
    """``file.c:12:6:function\t48\tstatic`` lines -> {function: bytes}."""
    frames = {}
    for line in text.splitlines():
        m = re.match(r"^.*:(?P<fn>[^:\s]+)\s+(?P<n>\d+)\s+\S+", line)
        if m:
            frames[m.group("fn")] = int(m.group("n"))
    return frames


def stub_includes(project: GeneratedProject, build_dir: str | Path) -> list[str]:
    """-I flags of a test build: the generated src/, autoconf.h from its app-config, our firmware stubs."""
    autoconf_dir = Path(write_test_autoconf(build_dir, project.app_config)).resolve()
    return [f"-I{Path(project.src_dir).resolve()}", f"-I{autoconf_dir}", f"-I{Path(STUB_DIR).resolve()}"]


PROBE_STUB_SOURCES: tuple[str, ...] = ("controller_pid_stub.c", "estimator_stub.c")
"""Stand-ins of the firmware functions the controller calls, linked into the probe image."""


def arm_size_report(project: GeneratedProject, build_dir: str | Path | None = None) -> SizeReport:
    """Compile the generated sources for the Cortex-M4F and measure them."""
    gcc, size = find_tool(ARM_GCC), find_tool(ARM_SIZE)
    # absolute paths: gcc runs in the build folder (its .su stack files land there), so a relative
    # --out (robot-hrl export-c --out build/x) must not be read relative to it
    build = (Path(build_dir) if build_dir else Path(project.out_dir) / "build_size").resolve()
    build.mkdir(parents=True, exist_ok=True)
    sections: dict[str, dict[str, int]] = {}
    frames: dict[str, int] = {}
    files: dict[str, str] = {}
    includes = stub_includes(project, build)
    for src in project.sources:
        obj = build / (src.stem + ".o")
        cmd = [gcc, *ARM_CFLAGS, *EXTRA_CFLAGS, *includes, "-c", str(Path(src).resolve()), "-o", str(obj)]
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=build)
        if res.returncode != 0:
            raise ToolchainError(f"arm-none-eabi-gcc failed on {src.name}:\n{res.stderr.strip()[-3000:]}")
        res = subprocess.run([size, "-A", str(obj)], capture_output=True, text=True)
        if res.returncode != 0:
            raise ToolchainError(f"arm-none-eabi-size failed on {obj}: {res.stderr.strip()}")
        sections[src.name] = parse_size_a(res.stdout)
        su = build / (src.stem + ".su")
        if su.exists():
            own = parse_stack_usage(su.read_text())
            frames.update(own)
            files.update({f: src.name for f in own})
    return SizeReport(sections=sections, stack_frames=frames, frame_files=files)


def check_budget(report: SizeReport, flash_budget_kb: float = DEFAULT_FLASH_BUDGET_KB,
                 ram_budget_kb: float = DEFAULT_RAM_BUDGET_KB) -> None:
    """Raise :class:`BudgetError` when the controller is over its flash or RAM budget."""
    problems = []
    if report.flash > flash_budget_kb * 1024:
        problems.append(f"flash {report.flash} B ({report.flash / 1024:.1f} KiB) > budget {flash_budget_kb:g} KiB")
    if report.ram > ram_budget_kb * 1024:
        problems.append(f"RAM {report.ram} B ({report.ram / 1024:.1f} KiB) > budget {ram_budget_kb:g} KiB")
    if problems:
        raise BudgetError(
            "the generated controller is over budget: " + "; ".join(problems) + ". Train a smaller network "
            f"(the weights are {report.rodata} B of rodata), or raise the budget with --flash-budget-kb / "
            f"--ram-budget-kb (the STM32F405 has {STM32F405_FLASH_KB} KiB flash and {STM32F405_RAM_KB} KiB RAM, "
            "shared with the rest of the firmware)")


# ---- a linked probe image --------------------------------------------------------------------------
_PROBE_LD = """/* robot_hrl probe image: the generated controller linked alone for the STM32F405, after the
 * Crazyflie's 16 KiB bootloader. Not a flyable firmware; it measures the linked size (with libm)
 * and gives the flashing checks a real Cortex-M image. */
MEMORY
{
  FLASH (rx) : ORIGIN = 0x08004000, LENGTH = 1008K
  RAM (rwx)  : ORIGIN = 0x20000000, LENGTH = 128K
}
ENTRY(probe_reset)
SECTIONS
{
  .isr_vector : { KEEP(*(.isr_vector)) } > FLASH
  .text : { *(.text*) *(.rodata*) } > FLASH
  .ARM.exidx : { *(.ARM.exidx*) } > FLASH
  .data : { *(.data*) } > RAM AT > FLASH
  .bss : { *(.bss*) *(COMMON) } > RAM
  _probe_estack = ORIGIN(RAM) + LENGTH(RAM);
}
"""

_PROBE_C = r"""/* robot_hrl probe image entry: calls the controller once per loop so that nothing is dropped. */
#include <string.h>
#include "autoconf.h"
#include "stabilizer_types.h"
#include "controller.h"

extern unsigned int _probe_estack;
static state_t probeState;
static sensorData_t probeSensors;
static setpoint_t probeSetpoint;
static control_t probeControl;

void probe_reset(void);
void probe_reset(void)
{
  controllerOutOfTreeInit();
  for (stabilizerStep_t tick = 0;; ++tick) {
    controllerOutOfTree(&probeControl, &probeSetpoint, &probeSensors, &probeState, tick);
  }
}

__attribute__((section(".isr_vector"), used)) const void *const probeVectors[2] = {&_probe_estack, probe_reset};
"""

_PROBE_NAV_CALLS = r"""    if (tick % 100u == 0u) {  /* both levels: a step of the navigate level's task (appMain's loop body) */
      navTaskStep();
    }
"""


@dataclass
class ProbeImage:
    elf: Path
    bin: Path
    flash: int
    """text + rodata + data of the linked image, libm's expf/tanhf and the stand-in PID and estimator included."""
    ram: int


def link_probe_image(project: GeneratedProject, build_dir: str | Path) -> ProbeImage:
    """Link the generated controller (with libm and the stand-in PID) into cf2.elf / cf2.bin."""
    gcc, size = find_tool(ARM_GCC), find_tool(ARM_SIZE)
    objcopy = find_tool("arm-none-eabi-objcopy")
    build = Path(build_dir)
    build.mkdir(parents=True, exist_ok=True)
    (build / "probe.ld").write_text(_PROBE_LD)
    probe_c = _PROBE_C
    if project.navigate is not None:  # link the level too, or --gc-sections drops it
        probe_c = probe_c.replace('#include "controller.h"\n', '#include "controller.h"\nvoid navTaskStep(void);\n')
        probe_c = probe_c.replace("    controllerOutOfTree(&probeControl, &probeSetpoint, &probeSensors, &probeState, tick);\n",
                                  "    controllerOutOfTree(&probeControl, &probeSetpoint, &probeSensors, &probeState, tick);\n"
                                  + _PROBE_NAV_CALLS)
    (build / "probe_main.c").write_text(probe_c)
    elf, binary = build / "cf2.elf", build / "cf2.bin"
    cmd = [gcc, *ARM_CFLAGS, *stub_includes(project, build), *map(str, project.sources),
           *(str(STUB_DIR / s) for s in PROBE_STUB_SOURCES + (("nav_task_stub.c",) if project.navigate else ())),
           str(build / "probe_main.c"), "-nostartfiles", "--specs=nano.specs", "--specs=nosys.specs",
           "-Wl,--gc-sections", f"-Wl,-T,{build / 'probe.ld'}", "-o", str(elf), "-lm"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise ToolchainError(f"linking the probe image failed:\n{res.stderr.strip()[-3000:]}")
    res = subprocess.run([objcopy, "-O", "binary", str(elf), str(binary)], capture_output=True, text=True)
    if res.returncode != 0:
        raise ToolchainError(f"arm-none-eabi-objcopy failed: {res.stderr.strip()}")
    res = subprocess.run([size, "-A", str(elf)], capture_output=True, text=True)
    s = parse_size_a(res.stdout)
    vec = 0
    for line in res.stdout.splitlines():
        parts = line.split()
        if parts and parts[0] in (".isr_vector", ".ARM.exidx") and parts[1].isdigit():
            vec += int(parts[1])
    return ProbeImage(elf=elf, bin=binary, flash=s["text"] + s["rodata"] + s["data"] + vec, ram=s["data"] + s["bss"])
