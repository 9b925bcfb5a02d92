"""Electronic Data Sheets (EDS, CiA 306): a drive's object dictionary from its INI file.

Two readers of the same files. :func:`read_eds` is a light one: each object's index,
sub-index, name, size, access and default value, so that loading a bus file can refuse a drive
that lacks an object its mapping or bring-up needs (:func:`check_required`). :func:`load_od`
gives the canopen library's full object dictionary (data types, limits, PDO mappability,
``[DeviceInfo]``): bring-up's SDO client and the emulated drive's SDO server use it.
:data:`DEFAULT_EDS` is the emulated drive's own EDS, used for a drive whose bus file names
none.
"""

from __future__ import annotations

import configparser
import functools
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from exo_rt.errors import ConfigError, Where
from exo_rt.yamlio import check_size

DEFAULT_EDS = Path(__file__).with_name("exo_drive.eds")
STRING_TYPES = (0x0009, 0x000A, 0x000B, 0x000F)  # visible/octet/unicode string, domain

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
    check_size(path, "EDS", ConfigError)  # refused before it is parsed (docs/config.md)
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
            datatype = _int(sec["datatype"])
            size = DATA_TYPES.get(datatype, 4)
            default = (_int(sec.get("defaultvalue", "0"))
                       if sec.get("defaultvalue") and datatype not in STRING_TYPES else 0)
        except ValueError:
            raise ConfigError(f"object {section} has an unreadable DataType or DefaultValue",
                              Where(str(path), 0, section),
                              "fix the value (hex 0x… or decimal)") from None
        out[(index, sub)] = Entry(sec.get("parametername", section), size,
                                  sec.get("accesstype", "rw").lower(), default)
    return out


def check_required(objects: dict[tuple[int, int], Entry], path: str | Path,
                   required=REQUIRED) -> None:
    """Refuse a drive whose EDS lacks an object the CST mapping (or its bring-up) needs."""
    missing = [f"{i:04X}h/{s}" for i, s in required if (i, s) not in objects]
    if missing:
        raise ConfigError(f"the drive's EDS has no {', '.join(missing)}", Where(str(path)),
                          "this drive cannot run cyclic synchronous torque with the default "
                          "mapping; check the EDS or the drive model")


@functools.lru_cache(maxsize=32)
def _import_od(path: str, node: int, stamp: tuple[int, int]):
    import canopen

    logging.getLogger("canopen.objectdictionary.eds").setLevel(logging.ERROR)
    return canopen.import_od(path, node)


def load_od(path: str | Path, node: int):
    """The canopen object dictionary of an EDS/DCF for node ``node`` ($NODEID resolved),
    parsed once per file version; ConfigError for a file canopen cannot read."""
    path = str(path)
    try:
        st = os.stat(path)
        return _import_od(path, node, (st.st_mtime_ns, st.st_size))
    except OSError:
        raise ConfigError("EDS file not found", Where(path), "check the path") from None
    except Exception as exc:  # canopen raises what its parser meets (ValueError, KeyError …)
        raise ConfigError(f"the canopen library cannot read this EDS ({exc})", Where(path),
                          "give the drive's .eds (or .dcf) file from its vendor") from None


def variable(od, index: int, sub: int = 0):
    """The object (index, sub) of a canopen object dictionary, or None if it has none."""
    import canopen

    try:
        obj = od[index]
    except KeyError:
        return None
    if isinstance(obj, canopen.objectdictionary.ODVariable):
        return obj if sub == 0 else None
    return obj.subindices.get(sub)
