"""Safe, race-free file primitives of the release format: no-replace publication of a
directory, stale temporary directories, bounded JSON reading, no-follow opening.

Publication (:func:`publish_directory`). A release is written into a temporary sibling
directory and then renamed onto the target. ``os.rename`` alone is not enough: on POSIX it
silently replaces an *empty* directory that appeared at the target, and the old code renamed
whatever was there aside and deleted it. Here the final step is one atomic system call that
cannot replace anything:

- Linux (glibc ≥ 2.28): ``renameat2(..., RENAME_NOREPLACE)``; it fails with ``EEXIST`` when
  anything exists at the target, atomically with respect to every other process (the check
  and the rename are one operation in the kernel — no window between them);
- macOS: ``renamex_np(..., RENAME_EXCL)``, the same guarantee;
- elsewhere, or on a file system that does not implement the flag (``EINVAL``): plain
  ``os.rename``, which still fails on a non-empty directory or a file at the target (a
  complete release is never replaced), and replaces only an empty directory that appeared in
  the instant between the last check and the rename (documented limitation).

Two writers racing for one target therefore cannot both succeed: exactly one rename wins,
every other gets :class:`~ppdp.errors.ReleaseError` (CLI exit 2) and deletes only its own
temporary directory. Replacing (``overwrite``) uses ``RENAME_EXCHANGE`` (Linux) /
``RENAME_SWAP`` (macOS): the new and the old directory swap in one step, so the target
always holds a complete release; the old one, now at the temporary name, is then deleted.
Without an exchange primitive the old release is renamed aside first, leaving an instant with
nothing at the target (documented fallback).

Temporary names are ``.NAME.tmp-<pid>-<token>-<host>``: the pid and host of the writer. A
later save to the same target removes those whose writer is gone (same host, pid no longer
running); a pid reused by an unrelated live process keeps its directory until that process
ends (the safe side: nothing live is ever removed).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import hashlib
import json
import math
import os
import re
import secrets
import shutil
import socket
import stat
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ReleaseError

#: largest manifest / custodian file read (bytes)
MAX_JSON_BYTES = 64 * 2**20
#: deepest JSON nesting accepted (a manifest nests about 6 levels)
MAX_JSON_DEPTH = 64

_RENAME_NOREPLACE = 1  # linux/fs.h
_RENAME_EXCHANGE = 2
_RENAME_SWAP = 0x2  # macOS sys/stdio.h
_RENAME_EXCL = 0x4
_AT_FDCWD = -100


def os_reason(e: OSError) -> str:
    """A one-line reason for an ``OSError`` (``strerror`` and the file it names)."""
    what = e.strerror or type(e).__name__
    return f"{what} ({e.filename})" if e.filename else what


# ------------------------------------------------------------------ atomic renames
def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:
        return None


_LIBC = _libc()


def _rename_flags(src: Path, dst: Path, flags_linux: int, flags_mac: int) -> bool:
    """Rename with a flag; True if done, False if the primitive is unavailable here; raises
    ``OSError`` (e.g. ``EEXIST``) when the kernel refuses."""
    if _LIBC is None:
        return False
    s, d = os.fsencode(src), os.fsencode(dst)
    if sys.platform.startswith("linux"):
        fn = getattr(_LIBC, "renameat2", None)
        if fn is None:
            return False
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        rc = fn(_AT_FDCWD, s, _AT_FDCWD, d, flags_linux)
    elif sys.platform == "darwin":
        fn = getattr(_LIBC, "renamex_np", None)
        if fn is None:
            return False
        fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint]
        rc = fn(s, d, flags_mac)
    else:
        return False
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False  # the file system does not implement the flag
    raise OSError(err, os.strerror(err), str(dst))


def rename_noreplace(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst``; ``FileExistsError`` if anything is at ``dst``."""
    try:
        if _rename_flags(src, dst, _RENAME_NOREPLACE, _RENAME_EXCL):
            return
    except OSError as e:
        if e.errno == errno.EEXIST:
            raise FileExistsError(errno.EEXIST, "exists", str(dst)) from None
        raise
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, "exists", str(dst))
    try:
        os.rename(src, dst)  # fails on a non-empty directory or a file at dst
    except OSError as e:
        if e.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
            raise FileExistsError(errno.EEXIST, "exists", str(dst)) from None
        raise


def exchange(src: Path, dst: Path) -> bool:
    """Swap ``src`` and ``dst`` atomically; False where no exchange primitive exists."""
    return _rename_flags(src, dst, _RENAME_EXCHANGE, _RENAME_SWAP)


def publish_directory(tmp: Path, target: Path, replace: bool = False) -> None:
    """Move the finished directory ``tmp`` to ``target`` (see the module docs).

    ``replace=False``: no-replace rename; :class:`ReleaseError` if anything is at ``target``.
    ``replace=True``: an existing release at ``target`` is exchanged with ``tmp`` and deleted."""
    if not replace or not os.path.lexists(target):
        try:
            rename_noreplace(tmp, target)
        except FileExistsError:
            raise ReleaseError(f"{str(target)!r} appeared while ppdp was writing the release; nothing was replaced "
                               "(another process publishes to the same place?)") from None
        return
    if exchange(tmp, target):
        old = tmp  # after the swap the old release sits at our temporary name
    else:  # no exchange primitive: rename aside, then into place (an instant with no release)
        old = tmp.with_name(tmp.name.replace(".tmp-", ".old-", 1))
        os.rename(target, old)
        rename_noreplace(tmp, target)
    if is_release_dir(old):
        shutil.rmtree(old, ignore_errors=True)
    else:  # something else was put there meanwhile: keep it, under a visible name
        keep = target.with_name(f"{target.name}.replaced-{os.getpid()}-{secrets.token_hex(4)}")
        os.rename(old, keep)
        raise ReleaseError(f"the release is at {str(target)!r}; what was there was not a release and is kept at {str(keep)!r}")


def is_release_dir(path: Path) -> bool:
    """A real (not symlinked) directory holding a regular ``manifest.json``."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode) and stat.S_ISREG(os.lstat(Path(path) / "manifest.json").st_mode)
    except OSError:
        return False


# ------------------------------------------------------------ temporary directories
def _host_id() -> str:
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def temp_path(target: Path, kind: str = "tmp") -> Path:
    """A fresh hidden sibling name of ``target`` recording this process's pid and host."""
    return target.with_name(f".{target.name}.{kind}-{os.getpid()}-{secrets.token_hex(6)}-{_host_id()}")


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    except OSError:
        return True
    return True


def stale_temps(target: Path) -> list[Path]:
    """Temporary siblings of ``target`` (directory or custodian file) written on this host by a
    process that no longer runs."""
    target = Path(target)
    names = [target.name, custodian_path(target).name]
    pat = re.compile(r"^\.(%s)\.(tmp|old)-(\d+)-[0-9a-f]+-([0-9a-f]{8})$" % "|".join(map(re.escape, names)))
    out = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return []
    host = _host_id()
    for e in entries:
        m = pat.match(e.name)
        if m and m.group(4) == host and not _pid_alive(int(m.group(3))):
            out.append(Path(e.path))
    return out


def remove_stale_temps(target: Path) -> int:
    """Remove :func:`stale_temps` of ``target``; returns how many were removed."""
    n = 0
    for p in stale_temps(target):
        try:
            if stat.S_ISDIR(os.lstat(p).st_mode):
                shutil.rmtree(p)  # never follows symlinks inside
            else:
                os.unlink(p)
            n += 1
        except OSError:
            pass
    return n


def fsync_path(path: Path) -> None:
    """fsync a file or directory (best effort: some platforms cannot open directories)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def lies_within(path: str | os.PathLike, directory: str | os.PathLike) -> bool:
    """Is ``path`` the directory itself or inside it (symbolic links resolved)?"""
    p, d = Path(path).resolve(), Path(directory).resolve()
    return p == d or d in p.parents


def custodian_path(directory: str | os.PathLike) -> Path:
    """Where ``Release.save(directory)`` keeps the custodian-side file: ``<directory>.custodian.json``,
    a sibling of the release directory, never inside it (it is not handed out)."""
    d = Path(directory)
    return d.with_name(d.name + ".custodian.json")


def write_custodian(path: Path, text: str, replace: bool = False) -> None:
    """Write the custodian file atomically: a synced temporary file, then ``os.link`` (creates,
    never replaces) or, with ``replace``, ``os.replace``."""
    tmp = temp_path(path)
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise ReleaseError(f"the custodian file {str(path)!r} appeared while ppdp was writing; not replaced") from None
            finally:
                if os.path.lexists(tmp):
                    os.unlink(tmp)
    except OSError as e:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise ReleaseError(f"cannot write the custodian file {str(path)!r}: {os_reason(e)}") from None


# ------------------------------------------------------------------ bounded reading
def open_parquet(f, size: int, label: str, max_footer: int):
    """A ``pyarrow.parquet.ParquetFile`` over the open binary file ``f`` of ``size`` bytes, once its
    tail shows a Parquet file whose footer is at most ``max_footer`` bytes (checked before
    pyarrow reads the footer); ``ReleaseError`` naming ``label`` otherwise."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if size < 12:
        raise ReleaseError(f"{label}: not a Parquet file ({size} bytes)")
    f.seek(size - 8)
    tail = f.read(8)
    footer = int.from_bytes(tail[:4], "little")
    if tail[4:] != b"PAR1" or footer > min(size - 12, max_footer):
        raise ReleaseError(f"{label}: not a Parquet file, or its footer exceeds {max_footer:,} bytes")
    f.seek(0)
    try:
        pf = pq.ParquetFile(f)
        pf.schema_arrow  # noqa: B018 - decoded here, so that a bad schema is this error
    except (OSError, pa.ArrowException, ValueError) as e:
        raise ReleaseError(f"{label}: unreadable Parquet ({e})") from None
    return pf


def open_regular(path: Path, what: str) -> int:
    """Open ``path`` read-only without following a symlink; ``ReleaseError`` unless it is a
    regular file. Returns the descriptor."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ReleaseError(f"{str(path)!r}: no {what} there") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ReleaseError(f"{str(path)!r}: {what} is a symbolic link (not followed)") from None
        raise ReleaseError(f"{str(path)!r}: cannot open the {what}: {os_reason(e)}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ReleaseError(f"{str(path)!r}: the {what} is not a regular file")
    return fd


def json_default(o):
    """``json.dumps(default=...)`` for NumPy scalars and arrays (manifests, custodian files)."""
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def json_depth(text: str) -> int:
    """Deepest nesting of objects/arrays in a JSON text (strings skipped), without parsing."""
    depth = best = 0
    for m in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        tok = m.group()
        if tok in "[{":
            depth += 1
            best = max(best, depth)
        elif tok in "]}":
            depth -= 1
    return best


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(s: str) -> float:
    v = float(s)
    if not math.isfinite(v):
        raise ValueError(f"the number {s[:20]} overflows a float")
    return v


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def read_bounded(path: Path, what: str, max_bytes: int) -> bytes:
    """The bytes of a regular file (no symlink) of at most ``max_bytes``; one ReleaseError otherwise."""
    fd = open_regular(path, what)
    with os.fdopen(fd, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ReleaseError(f"{str(path)!r}: the {what} exceeds {max_bytes:,} bytes")
    return data


def read_json(path: Path, what: str, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse a JSON file strictly and within bounds: a regular file (no symlink) of at most
    ``max_bytes``, UTF-8, nested at most ``max_depth`` deep, no NaN/Infinity, no overflowing
    number, no duplicate key. Any violation is one :class:`ReleaseError`."""
    data = read_bounded(path, what, max_bytes)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ReleaseError(f"{str(path)!r}: the {what} is not UTF-8 text") from None
    depth = json_depth(text)
    if depth > max_depth:
        raise ReleaseError(f"{str(path)!r}: the {what} nests {depth} levels deep (at most {max_depth})")
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float,
                          object_pairs_hook=_no_duplicates)
    except RecursionError:
        raise ReleaseError(f"{str(path)!r}: the {what} nests too deep") from None
    except ValueError as e:  # JSONDecodeError, NaN, overflow, duplicate keys, over-long integers
        raise ReleaseError(f"{str(path)!r}: malformed {what} ({e})") from None


# ------------------------------------------------------------------ CSV outputs
#: a text cell starting with one of these is run as a formula by spreadsheet programs
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
_FORMULA = r"^[=+\-@\t\r]"
_NUMBER_RE = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"
_NUMBER = re.compile(_NUMBER_RE)


def csv_safe_text(value: Any) -> Any:
    """``value`` unchanged unless it is text a spreadsheet would run as a formula (it starts
    with ``=``, ``+``, ``-``, ``@``, tab or CR and is not a plain number such as ``-5``): then
    it is prefixed with ``'``, which spreadsheets show as text (OWASP, "CSV injection")."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def csv_safe_array(col):
    """An Arrow column ready for CSV: dictionary columns decoded, text cells made safe with
    :func:`csv_safe_text` (vectorised)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        return col
    risky = pc.and_(pc.match_substring_regex(col, _FORMULA), pc.invert(pc.match_substring_regex(col, _NUMBER_RE)))
    return pc.if_else(risky, pc.binary_join_element_wise(pa.scalar("'", col.type), col, pa.scalar("", col.type)), col)


def csv_safe_frame(df):
    """A copy of a pandas DataFrame whose text cells pass :func:`csv_safe_text`."""
    import pandas as pd

    out = df.copy()
    for c in out.columns:
        col = out[c]
        if not (pd.api.types.is_numeric_dtype(col.dtype) or pd.api.types.is_bool_dtype(col.dtype)
                or pd.api.types.is_datetime64_any_dtype(col.dtype)):
            out[c] = col.astype(object).map(csv_safe_text)
    return out
