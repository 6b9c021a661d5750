"""Progress on stderr for steps that run longer than about two seconds.

The library marks its stages (``with stage("publish fprivacy"):`` …); nothing is printed
unless progress is enabled — the ``ppdp`` command enables it when stderr is a terminal (or
when ``PPDP_PROGRESS=1``; ``PPDP_PROGRESS=0`` silences it). A stage that ends within
:data:`DELAY` seconds prints nothing. A longer one shows its name and the elapsed seconds (on a
terminal, one line rewritten in place every half second; otherwise one line when it starts
showing and one when it ends), then ``name: done in T s``. Nested stages show as
``outer › inner``. A daemon thread does the printing; the stages cost a lock and a clock
read each.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator, TextIO

#: seconds a stage runs before it is shown
DELAY = 2.0
#: seconds between two updates on a terminal
TICK = 0.5

_state: dict = {"on": False, "stream": None}
_lock = threading.Lock()
_stack: list[tuple[str, float]] = []
_shown: dict[int, bool] = {}
_ticker: list[threading.Thread] = []
_wake = threading.Event()


def enable(on: bool = True, stream: TextIO | None = None) -> None:
    """Turn progress output on (to ``stream``, default stderr) or off."""
    _state["on"] = bool(on)
    _state["stream"] = stream


def enable_from_environment(stream: TextIO | None = None) -> bool:
    """On when ``PPDP_PROGRESS=1``, off when ``=0``, else on exactly when the stream (stderr)
    is a terminal. Returns the choice."""
    s = stream or sys.stderr
    env = os.environ.get("PPDP_PROGRESS", "").strip()
    if env in ("0", "1"):
        on = env == "1"
    else:
        try:
            on = bool(s.isatty())
        except (AttributeError, ValueError):
            on = False
    enable(on, stream)
    return on


def enabled() -> bool:
    return bool(_state["on"])


def _out() -> TextIO:
    return _state["stream"] or sys.stderr


def _tty() -> bool:
    try:
        return bool(_out().isatty())
    except (AttributeError, ValueError):
        return False


def _write(text: str) -> None:
    try:
        _out().write(text)
        _out().flush()
    except (OSError, ValueError):  # a closed or broken stderr never stops the work
        pass


def _label() -> str:
    return " › ".join(name for name, _ in _stack)


def _other_bar() -> bool:
    """Is a tqdm progress bar on screen (e.g. ``ppdp evaluate``'s)? Then the stages inside it
    stay quiet rather than write over it."""
    tq = sys.modules.get("tqdm")
    bars = getattr(getattr(tq, "tqdm", None), "_instances", None)
    try:
        return any(not getattr(b, "disable", False) for b in list(bars or ()))
    except TypeError:
        return False


def _run_ticker() -> None:
    while True:
        _wake.wait(TICK)
        _wake.clear()
        with _lock:
            if not _stack:
                _ticker.clear()
                return
            now = time.monotonic()
            showable = [d for d, (_, t) in enumerate(_stack, 1) if now - t >= DELAY]
            if not showable or _other_bar():
                continue
            if _tty():
                _write(f"\r\x1b[K{_label()} … {now - _stack[0][1]:.0f} s")
                _shown.update((d, True) for d in showable)
            else:
                for d in showable:
                    if not _shown.get(d):
                        _write(" › ".join(n for n, _ in _stack[:d]) + " …\n")
                        _shown[d] = True


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Mark a stage of the work (shown if it runs longer than :data:`DELAY` and progress is on)."""
    if not _state["on"]:
        yield
        return
    t0 = time.monotonic()
    with _lock:
        _stack.append((name, t0))
        depth = len(_stack)
        _shown.pop(depth, None)
        if not _ticker:
            th = threading.Thread(target=_run_ticker, name="ppdp-progress", daemon=True)
            _ticker.append(th)
            th.start()
    try:
        yield
    finally:
        with _lock:
            label = _label()
            _stack.pop()
            elapsed = time.monotonic() - t0
            if _shown.pop(depth, False) or (elapsed >= DELAY and not _other_bar()):
                _write(f"\r\x1b[K{label}: done in {elapsed:.1f} s\n" if _tty() else f"{label}: done in {elapsed:.1f} s\n")
        _wake.set()
