"""Electronic Data Sheets (EDS, CiA 306): a drive's object dictionary from its INI file.

Only what start-up needs: each object's index, sub-index, name, data type (size), access and
default value, so that the host can check before bring-up that a drive has every object the
cyclic synchronous torque mapping uses, and the emulated drive can serve the same dictionary.
"""

from __future__ import annotations

import configparser
from dataclasses import dataclass
from pathlib import Path

from exo_rt.errors import ConfigError, Where

# CiA 301 data types → size in bytes
DATA_TYPES = {0x0001: 1, 0x0002: 1, 0x0003: 2, 0x0004: 4, 0x0005: 1, 0x0006: 2, 0x0007: 4,
              0x0008: 4, 0x0010: 3, 0x0015: 8, 0x0016: 3, 0x001B: 8}
REQUIRED = ((0x6040, 0), (0x6041, 0), (0x6060, 0), (0x6061, 0), (0x6064, 0), (0x6071, 0),
            (0x6078, 0), (0x6075, 0), (0x6076, 0), (0x1600, 1), (0x1600, 2), (0x1A00, 1),
            (0x1A00, 2), (0x1A00, 3), (0x1017, 0))


@dataclass(frozen=True)
class Entry:
    name: str
    size: int  # bytes
    access: str  # ro | wo | rw | rwr | rww | const
    default: int


def _int(text: str) -> int:
    text = text.strip().split()[0] if text.strip() else "0"
    text = text.replace("$NODEID+", "").replace("$NODEID", "0")
    return int(text, 0)


def read_eds(path: str | Path) -> dict[tuple[int, int], Entry]:
    """The object dictionary of an EDS file; ConfigError naming the file and section."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            parser.read_file(f)
    except OSError:
        raise ConfigError("EDS file not found", Where(str(path)), "check the path") from None
    except configparser.Error as exc:
        raise ConfigError(f"not an EDS (INI) file: {exc.message.splitlines()[0]}",
                          Where(str(path), getattr(exc, "lineno", 0) or 0),
                          "give the drive's .eds file from its vendor") from None
    out: dict[tuple[int, int], Entry] = {}
    for section in parser.sections():
        name = section.lower()
        try:
            if "sub" in name:
                head, _, tail = name.partition("sub")
                index, sub = int(head, 16), int(tail, 16)
            else:
                index, sub = int(name, 16), 0
        except ValueError:
            continue  # [FileInfo], [DeviceInfo], [MandatoryObjects] …
        sec = parser[section]
        if "datatype" not in sec:
            continue  # a record's header
        try:
            size = DATA_TYPES.get(_int(sec["datatype"]), 4)
            default = _int(sec.get("defaultvalue", "0")) if sec.get("defaultvalue") else 0
        except ValueError:
            raise ConfigError(f"object {section} has an unreadable DataType or DefaultValue",
                              Where(str(path), 0, section),
                              "fix the value (hex 0x… or decimal)") from None
        out[(index, sub)] = Entry(sec.get("parametername", section), size,
                                  sec.get("accesstype", "rw").lower(), default)
    return out


def check_required(objects: dict[tuple[int, int], Entry], path: str | Path) -> None:
    """Refuse a drive whose EDS lacks an object the CST mapping needs."""
    missing = [f"{i:04X}h/{s}" for i, s in REQUIRED if (i, s) not in objects]
    if missing:
        raise ConfigError(f"the drive's EDS has no {', '.join(missing)}", Where(str(path)),
                          "this drive cannot run cyclic synchronous torque with the default "
                          "mapping; check the EDS or the drive model")
