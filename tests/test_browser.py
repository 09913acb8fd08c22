"""The notebooks in a real JupyterLab, in a real browser: the widgets must come alive.

For the whole module one JupyterLab server runs on a free localhost port (random token, no
browser, isolated Jupyter config/data/settings dirs, serving a temporary *copy* of
``notebooks/`` so the committed notebooks are never touched), with the notebook windowing
mode set to ``"none"`` so off-screen cells are rendered too. Playwright drives Debian's
Chromium (``/usr/bin/chromium``; Playwright's own browser download is not used).

For each notebook: open it, wait for the kernel to be idle, Run → Run All Cells, wait until
every code cell has an execution count and the kernel is idle again, then assert

- no cell shows an error (a traceback, or stderr mentioning an error);
- every widget output is a live widget (no ``VBox(children=...)`` text fallback, no
  "Error displaying widget", nothing stuck at "Loading widget..."), and every cell that
  ends in a ``player(...)`` call shows one;
- moving the first slider (keyboard, on its handle) changes the picture beside it.

Screenshots go to ``test-artifacts/browser/``: ``<notebook>.png`` (the whole notebook,
taken also when the test fails; ``<notebook>-2.png``, ... continue a notebook taller than
16000 px) and ``<notebook>-player.png`` (the first player after its slider moved).
Every wait is on a selector or a page condition, never a fixed sleep.

Needs the ``playwright`` Python package (the ``test`` extra) and Chromium
(``apt-get install chromium``; ``.ci/run`` installs it). Without them the tests skip
locally and fail in CI (when ``CI`` is set). Set ``MICROTORCH_CHROMIUM`` to use another
Chromium binary.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
ARTIFACTS = ROOT / "test-artifacts" / "browser"

CHROMIUM = os.environ.get("MICROTORCH_CHROMIUM", "/usr/bin/chromium")
# Without the background-networking flags Chromium keeps calling home, which on a closed
# network means a flood of failing connections.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]

SERVER_START_S = 90       # JupyterLab answering on its port
KERNEL_READY_MS = 60_000  # the notebook open, its kernel idle
RUN_ALL_MS = 120_000      # all cells executed
STEP_MS = 20_000          # one RISE step (a key press acted on, its cell run)
WIDGET_MS = 30_000        # a moved slider redrawn by the kernel
MAX_SCREENSHOT_PX = 16_000  # tallest full-notebook screenshot (Chromium's texture limit ~16k)

# JupyterLab settings for the run: render every cell (windowing off), no blank page after
# the last cell (it would pad the screenshots), and no news/update toasts (they would ask
# the network and cover part of the screenshot).
LAB_OVERRIDES = {
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none", "scrollPastEnd": False},
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false",
                                                   "checkForUpdates": False},
}

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _unavailable(reason: str):
    """Missing tools skip the test on a laptop, but fail it in CI, which installs them."""
    if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
        pytest.fail(f"{reason} (CI is set: CI must install it; see .ci/run)", pytrace=False)
    pytest.skip(reason)


# ---------------------------------------------------------------------------------------------
# JupyterLab
# ---------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A running JupyterLab: ``url``, ``token``, ``root`` (the served copy of notebooks/)."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.root = tmp / "notebooks"
        shutil.copytree(ROOT / "notebooks", self.root,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        self.token = secrets.token_hex(16)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp / "jupyterlab.log"

        settings = tmp / "lab-settings"  # overrides.json lives in the app settings dir
        settings.mkdir()
        (settings / "overrides.json").write_text(json.dumps(LAB_OVERRIDES, indent=1))
        env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
        env.update(
            JUPYTER_CONFIG_DIR=str(tmp / "jupyter-config"),  # no user config or user settings
            JUPYTER_DATA_DIR=str(tmp / "jupyter-data"),      # no user kernels or extensions
            JUPYTER_RUNTIME_DIR=str(tmp / "jupyter-runtime"),
            IPYTHONDIR=str(tmp / "ipython"),                 # no user startup scripts
            JUPYTER_PREFER_ENV_PATH="1",                     # this venv's kernel and extensions
            PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in os.environ.get(
                "PYTHONPATH", "").split(os.pathsep) if p]),
        )
        env.pop("MPLBACKEND", None)  # the kernel picks the inline backend itself
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser",
               "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}",
               "--ServerApp.port_retries=0",  # our port or fail, never a surprise one
               f"--IdentityProvider.token={self.token}",
               f"--ServerApp.root_dir={self.root}",
               f"--LabApp.app_settings_dir={settings}",
               f"--LabApp.user_settings_dir={tmp / 'lab-user-settings'}",
               f"--LabApp.workspaces_dir={tmp / 'lab-workspaces'}"]
        if hasattr(os, "getuid") and os.getuid() == 0:
            cmd.append("--allow-root")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, cwd=self.root, env=env, stdin=subprocess.DEVNULL,
                                     stdout=self._log, stderr=subprocess.STDOUT)

    def log_tail(self, n: int = 40) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])

    def api(self, path: str, method: str = "GET", timeout: float = 5):
        req = urllib.request.Request(f"{self.url}{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read()
        return json.loads(body) if body else None

    def wait_ready(self, timeout: float = SERVER_START_S) -> None:
        """Poll /api/status until the server answers; fail early if it exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.api("/api/status", timeout=2)
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            try:  # the poll interval doubles as "did the server die?"
                rc = self.proc.wait(timeout=0.25)
            except subprocess.TimeoutExpired:
                continue
            raise RuntimeError(f"JupyterLab exited with code {rc}:\n{self.log_tail()}")
        raise RuntimeError(f"JupyterLab did not answer within {timeout} s:\n{self.log_tail()}")

    def shutdown_kernels(self) -> None:
        for s in self.api("/api/sessions") or []:
            self.api(f"/api/sessions/{s['id']}", method="DELETE", timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    server = Lab(tmp_path_factory.mktemp("lab"))
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """A Chromium context with a fresh profile, for the whole module."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright Python package is not installed "
                     "(`.venv/bin/pip install -e '.[test]'`)")
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        _unavailable(f"no Chromium at {CHROMIUM} (`apt-get install chromium`, "
                     "or set MICROTORCH_CHROMIUM)")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM,
            headless=True, args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1000})
        try:
            yield context
        finally:
            context.close()


# ---------------------------------------------------------------------------------------------
# what the page is asked
# ---------------------------------------------------------------------------------------------
NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden)"
OUTPUT = ".jp-OutputArea-output"
STDERR = '[data-mime-type="application/vnd.jupyter.stderr"]'  # tracebacks render as stderr

# The open notebook's kernel is connected and idle. The toolbar's execution indicator says
# "idle" already while the notebook has no kernel yet, so the kernel name must be there too.
KERNEL_IDLE_JS = """(nb) => {
  const status = nb.querySelector('.jp-Notebook-ExecutionIndicator')?.getAttribute('data-status');
  const kernel = nb.querySelector('[data-jp-item-name="kernelName"]')?.textContent.trim() ?? '';
  return status === 'idle' && kernel !== '' && !/no kernel/i.test(kernel);
}"""

# Run All has finished (every code cell numbered, kernel idle), or stopped at an error.
RUN_STATE_JS = """([sel, stderr]) => {
  const nb = document.querySelector(sel);
  if (!nb || !(%s)(nb)) return null;
  const prompts = [...nb.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
      .map(p => p.textContent.trim());
  if (prompts.length && prompts.every(p => /^\\[\\d+\\]:?$/.test(p))) return 'done';
  if (nb.querySelector(stderr) && !prompts.some(p => p.includes('*'))) return 'stopped';
  return null;
}""" % KERNEL_IDLE_JS

# Per code cell, in order: its prompt and what each output shows.
CELLS_JS = """(nb) => [...nb.querySelectorAll('.jp-CodeCell')].map(cell => ({
  prompt: cell.querySelector('.jp-InputPrompt')?.textContent.trim() ?? '',
  outputs: [...cell.querySelectorAll('.jp-OutputArea-output')].map(o => ({
    mime: o.getAttribute('data-mime-type') || '',
    text: o.innerText.slice(0, 2000),
    // the widget renderer sets no data-mime-type on its output
    widget: !o.hasAttribute('data-mime-type') || o.matches('[data-mime-type*="widget"]'),
    live: !!o.querySelector('.jupyter-widgets'),
  })),
}))"""

# The picture(s) beside a slider: the HTML panels holding an SVG (or <img>) in the player box
# around it, with ids stripped (every redraw gets fresh, unique SVG ids even when the picture
# itself is the same).
PICTURE_JS = """(slider) => {
  const box = slider.closest('.widget-vbox') || slider.parentElement;
  return [...box.querySelectorAll('.widget-html-content')]
    .filter(p => p.querySelector('svg, img'))
    .map(p => p.innerHTML.replace(/\\b(id|href|xlink:href)="[^"]*"/g, '')
                         .replace(/url\\(#[^)]*\\)/g, ''))
    .join('\\n<!-- panel -->\\n');
}"""

# What ipywidgets shows instead of a widget: the model's repr (no widget manager in the
# page), or its own error/loading placeholders.
WIDGET_REPR = re.compile(r"^\s*\w+\((children|value|description|layout)=")
WIDGET_TROUBLE = ("Loading widget", "Error displaying widget", "Failed to load model",
                  "Failed to create view", "Could not create")


def _error_outputs(cells) -> list[str]:
    found = []
    for i, cell in enumerate(cells):
        for out in cell["outputs"]:
            if out["mime"] == "application/vnd.jupyter.stderr" and any(
                    w in out["text"] for w in ("Traceback", "Error", "Exception")):
                found.append(f"code cell {i} {cell['prompt']}:\n{out['text'][:1500]}")
    return found


def _fallback_outputs(cells) -> list[str]:
    found = []
    for i, cell in enumerate(cells):
        for out in cell["outputs"]:
            where = f"code cell {i} {cell['prompt']} ({out['mime']})"
            if out["widget"] and not out["live"]:
                found.append(f"{where}: widget output not rendered: {out['text'][:300]!r}")
            elif not out["widget"] and WIDGET_REPR.match(out["text"]):
                found.append(f"{where}: the text fallback instead of a widget: "
                             f"{out['text'][:300]!r}")
            elif any(t in out["text"] for t in WIDGET_TROUBLE):
                found.append(f"{where}: {out['text'][:300]!r}")
    return found


# A cell whose last line is a bare ``...player(...)`` call displays a player.
PLAYER_CALL = re.compile(r"^[\w.]*\bplayer\(")


def _player_cells(path: Path) -> list[int]:
    """Indexes (among code cells) of the cells that display a player."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    found = []
    for i, cell in enumerate(code):
        lines = [ln for ln in "".join(cell["source"]).splitlines()
                 if ln.strip() and not ln.lstrip().startswith("#")]
        if lines and PLAYER_CALL.match(lines[-1]):
            found.append(i)
    return found


def _step_the_player(page, slider, what: str, action=None) -> tuple[str, str]:
    """Move a player one step and wait until its slider's value and then the picture beside it
    change: ``action()`` if given (a key press, a click), else ArrowRight on the slider's
    handle (ArrowLeft at the last step). Fails saying ``what`` moved it if the picture stays
    the same; returns the slider's value before and after."""
    handle = slider.locator(".noUi-handle").first
    value, pic = handle.get_attribute("aria-valuenow"), slider.evaluate(PICTURE_JS)
    assert "<svg" in pic or "<img" in pic, f"{what}: no picture (svg/img) beside the slider"
    if action is None:
        handle.focus()
        page.keyboard.press("ArrowLeft" if value == handle.get_attribute("aria-valuemax") else "ArrowRight")
    else:
        action()
    page.wait_for_function("([h, v]) => h.getAttribute('aria-valuenow') !== v",
                           arg=[handle.element_handle(), value], timeout=WIDGET_MS)
    try:
        page.wait_for_function(f"([s, before]) => ({PICTURE_JS})(s) !== before",
                               arg=[slider.element_handle(), pic], timeout=WIDGET_MS, polling=100)
    except Exception:
        pytest.fail(f"{what}: moved the step from {value} to {handle.get_attribute('aria-valuenow')}, "
                    f"but the picture beside it did not change within {WIDGET_MS // 1000} s")
    return value, handle.get_attribute("aria-valuenow")


def _screenshot_element(page, locator, path: Path) -> None:
    """Screenshot one element whole: the notebook scrolls inside a fixed-size page, so a
    player taller than the window needs a taller window first."""
    size = page.viewport_size
    need = min(int(locator.bounding_box()["height"]) + 300, MAX_SCREENSHOT_PX)
    if need > size["height"]:
        page.set_viewport_size({"width": size["width"], "height": need})
        page.wait_for_function("(h) => window.innerHeight === h", arg=need)
    try:
        locator.scroll_into_view_if_needed()
        locator.screenshot(path=str(path))
    finally:
        page.set_viewport_size(size)


def _screenshot_whole_notebook(page, stem: str) -> list[Path]:
    """Grow the viewport so the notebook shows whole, and screenshot it from the top:
    ``<stem>.png``, plus ``<stem>-2.png``, ... when it is taller than MAX_SCREENSHOT_PX."""
    scroller = f"{NOTEBOOK} .jp-WindowedPanel-outer"  # the notebook's scrolling element
    size = page.viewport_size
    extra = page.evaluate(f"""() => {{ const s = document.querySelector('{scroller}');
        return s ? s.scrollHeight - s.clientHeight : 0; }}""")
    height = min(size["height"] + max(extra, 0), MAX_SCREENSHOT_PX)
    page.set_viewport_size({"width": size["width"], "height": height})
    shots = []
    try:
        top, part = 0, 1
        while True:
            # scroll to `top`, once the panel has taken the new height; returns where it got
            got = page.wait_for_function(f"""([h, top]) => {{
                const s = document.querySelector('{scroller}');
                if (!s) return window.innerHeight === h ? -1 : null;
                if (window.innerHeight !== h || s.clientHeight <= h - {size["height"]}) return null;
                s.scrollTop = top;
                return Math.abs(s.scrollTop - Math.min(top, s.scrollHeight - s.clientHeight)) < 2
                    ? {{top: s.scrollTop, rest: s.scrollHeight - s.clientHeight - s.scrollTop,
                        view: s.clientHeight}} : null; }}""", arg=[height, top]).json_value()
            path = ARTIFACTS / (f"{stem}.png" if part == 1 else f"{stem}-{part}.png")
            page.screenshot(path=str(path))
            shots.append(path)
            if got == -1 or got["rest"] <= 0:
                return shots
            top, part = got["top"] + got["view"], part + 1
    finally:
        page.set_viewport_size(size)


# ---------------------------------------------------------------------------------------------
# the test
# ---------------------------------------------------------------------------------------------
@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_widgets_live_in_jupyterlab(path, browser, lab):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page()
    page_errors: list[str] = []
    page.on("pageerror", lambda exc: page_errors.append(str(exc)))
    passed = False
    try:
        # ?reset: a clean workspace, so the notebook opened before is not restored too.
        page.goto(f"{lab.url}/lab/tree/{path.name}?reset&token={lab.token}")
        try:
            page.wait_for_function(f"() => {{ const nb = document.querySelector('{NOTEBOOK}');"
                                   f" return !!nb && ({KERNEL_IDLE_JS})(nb); }}",
                                   timeout=KERNEL_READY_MS, polling=100)
        except Exception:
            pytest.fail(f"{path.name}: the notebook did not open with an idle kernel within "
                        f"{KERNEL_READY_MS // 1000} s\nJupyterLab log:\n{lab.log_tail()}")

        # Run → Run All Cells, through the menu bar (Lumino tags menu items by command id).
        page.locator("#jp-MainMenu .lm-MenuBar-item",
                     has_text=re.compile(r"^\s*Run\s*$")).click()
        page.locator('#jp-mainmenu-run .lm-Menu-item[data-command="runmenu:run-all"]').click()
        state = page.wait_for_function(
            RUN_STATE_JS, arg=[NOTEBOOK, STDERR], timeout=RUN_ALL_MS, polling=250).json_value()

        notebook = page.locator(NOTEBOOK)
        cells = notebook.evaluate(CELLS_JS)
        errors = _error_outputs(cells)
        assert not errors, f"{path.name}: error output:\n" + "\n\n".join(errors)
        assert state == "done", (f"{path.name}: Run All stopped early; prompts: "
                                 f"{[c['prompt'] for c in cells]}")

        # Widgets: live, never the text fallback; every player cell shows one.
        fallback = _fallback_outputs(cells)
        assert not fallback, f"{path.name}:\n" + "\n".join(fallback)
        for i in _player_cells(path):
            live = [o for o in cells[i]["outputs"] if o["widget"] and o["live"]]
            assert live, (f"{path.name}: code cell {i} displays a player but shows no live "
                          f"widget: {cells[i]['outputs']}")
        assert not page_errors, f"{path.name}: JavaScript errors: {page_errors}"

        # Move the first slider one step; the picture beside it must change.
        sliders = notebook.locator(f"{OUTPUT} .widget-slider")
        if sliders.count():
            slider = sliders.first
            slider.locator(".noUi-handle").first.scroll_into_view_if_needed()
            _step_the_player(page, slider, f"{path.name}, the first slider")
            box = slider.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]")
            _screenshot_element(page, box, ARTIFACTS / f"{path.stem}-player.png")
        passed = True
    finally:
        try:
            for old in ARTIFACTS.glob(f"{path.stem}-[0-9]*.png"):  # parts of an older run
                old.unlink()
            _screenshot_whole_notebook(page, path.stem)
        except Exception as exc:
            if passed:
                raise
            # the test has already failed: keep its error, not the screenshot's
            print(f"(no screenshot of {path.name}: {type(exc).__name__}: {exc})")
        finally:
            page.close()
            lab.shutdown_kernels()


# ---------------------------------------------------------------------------------------------
# lecture mode: a notebook as a RISE slideshow
# ---------------------------------------------------------------------------------------------
SLIDESHOW = "00_start_here.ipynb"  # the lecture opener: its player comes a few code cells in
DECK = ".jp-NotebookPanel.reveal.ready"  # RISE's reveal.js deck, laid out
# The slide on screen: the innermost present <section> (a vertical stack holds subslides).
PRESENT_JS = "() => [...document.querySelectorAll('.reveal .slides section.present')].pop()"


@pytest.mark.timeout(300)
def test_rise_slideshow_runs_a_player(browser, lab):
    """Open a notebook as RISE presents it (the /rise/<path> page jupyterlab-rise serves),
    step through it with Shift+Enter (RISE's smart-exec: run the cell, go on to the next)
    until the first player has run, and move that player's slider on the slide.

    jupyterlab-rise 0.43.1 does not render ipywidgets 8 in its slideshow page (upstream
    jupyterlab-contrib/rise#119): while that holds the test stops there as xfail, after
    checking that the slides were made and every cell up to the player ran without error.
    Lecture slides with live players go through Voilà instead: test_slideshow_runs_a_player."""
    try:
        import jupyterlab_rise  # noqa: F401  (the server extension behind /rise/)
    except ImportError:
        _unavailable("jupyterlab-rise is not installed (`.venv/bin/pip install -e '.[lab]'`)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = lab.root / SLIDESHOW
    player = _player_cells(path)[0]
    page = browser.new_page()
    try:
        page.goto(f"{lab.url}/rise/{SLIDESHOW}?token={lab.token}")
        try:
            page.wait_for_function(f"() => {{ const nb = document.querySelector('{DECK}');"
                                   f" return !!nb && ({KERNEL_IDLE_JS})(nb); }}",
                                   timeout=KERNEL_READY_MS, polling=100)
        except Exception:
            pytest.fail(f"{SLIDESHOW}: the slideshow did not open with an idle kernel within "
                        f"{KERNEL_READY_MS // 1000} s\nJupyterLab log:\n{lab.log_tail()}")
        slides = page.locator(".reveal .slides section:not(.stack)").count()  # slides + subslides
        assert slides > 5, f"{SLIDESHOW}: RISE made {slides} slides; is the slide metadata there?"

        prompt = f"document.querySelectorAll('{DECK} .jp-CodeCell .jp-InputPrompt')[{player}]"
        deck = page.locator(f"{DECK} .jp-Notebook").first
        deck.focus()
        cells = len(json.loads(path.read_text(encoding="utf-8"))["cells"])
        # The active cell: a code cell not yet run? One with a number or a star ("[*]": queued or
        # running) in its prompt is not run again: Shift+Enter on a queued cell would run it twice.
        unran_js = (f"() => {{ const a = document.querySelector('{DECK} .jp-mod-active');"
                    f" return !!a && a.matches('.jp-CodeCell') &&"
                    f" !/[\\d*]/.test(a.querySelector('.jp-InputPrompt').textContent); }}")
        ran_js = ("(a) => a.matches('.jp-CodeCell') &&"
                  " /[\\d*]/.test(a.querySelector('.jp-InputPrompt').textContent)")
        idle_js = f"() => ({KERNEL_IDLE_JS})(document.querySelector('{DECK}'))"
        for _ in range(3 * cells):  # at most three presses a cell; Escape: back to command mode
            if page.evaluate(f"() => /\\d/.test({prompt}.textContent)"):
                break
            active = page.evaluate_handle(f"() => document.querySelector('{DECK} .jp-mod-active')")
            page.keyboard.press("Escape")
            # Shift+Enter runs a code cell not yet run and moves on; any other cell (markdown, or a
            # code cell RISE stayed on after running it) is left with J (next cell): no cell runs twice.
            page.keyboard.press("Shift+Enter" if page.evaluate(unran_js) else "j")
            try:
                page.wait_for_function(f"(a) => (document.querySelector('{DECK} .jp-mod-active') !== a"
                                       f" || ({ran_js})(a)) && ({idle_js})()", arg=active, timeout=STEP_MS,
                                       polling=100)
            except Exception:
                # Nothing moved or ran within STEP_MS: a long cell (let the kernel finish), or a key press
                # the deck did not act on (CI once left J on a markdown cell unanswered for 120 s); the
                # next round looks at the active cell again and presses again.
                page.wait_for_function(idle_js, timeout=RUN_ALL_MS, polling=100)
                deck.focus()
        else:
            pytest.fail(f"{SLIDESHOW}: Shift+Enter through {cells} cells never ran code cell "
                        f"{player} (the first player)")
        errors = _error_outputs(page.locator(DECK).evaluate(CELLS_JS))
        assert not errors, f"{SLIDESHOW} as slides: error output:\n" + "\n\n".join(errors)

        # The player is on the slide on screen, alive, and its slider moves its picture.
        # (smart-exec has gone on to the next slide: go back one, up, as the lecturer would)
        slider = page.locator(f"{DECK} .jp-CodeCell").nth(player).locator(".widget-slider").first
        try:
            slider.wait_for(state="attached", timeout=WIDGET_MS)
        except Exception:
            shown = page.locator(DECK).evaluate(CELLS_JS)[player]["outputs"]
            if any(WIDGET_REPR.match(o["text"]) for o in shown):
                # Known upstream: RISE's slideshow page shows ipywidgets 8 as the model's repr
                # (jupyterlab-contrib/rise#119, #126). Everything before this point was checked.
                pytest.xfail("jupyterlab-rise 0.43.1 shows the player as text in the slideshow "
                             "(ipywidgets 8 not rendered: jupyterlab-contrib/rise#119)")
            pytest.fail(f"{SLIDESHOW} as slides: code cell {player} ran but shows no slider: {shown}")
        on_slide_js = f"(el) => ({PRESENT_JS})().contains(el)"
        for _ in range(3):
            if slider.evaluate(on_slide_js):
                break
            page.keyboard.press("Escape")
            page.keyboard.press("ArrowUp")
            try:
                page.wait_for_function(on_slide_js, arg=slider.element_handle(), timeout=5_000)
            except Exception:
                pass
        assert slider.evaluate(on_slide_js), (
            f"{SLIDESHOW}: the player's cell ran but its slide could not be brought on screen")
        slider.wait_for(state="visible", timeout=WIDGET_MS)
        _step_the_player(page, slider, f"{SLIDESHOW} as slides, the slider")
    finally:
        try:
            page.screenshot(path=str(ARTIFACTS / "slideshow-00_start_here.png"))
        finally:
            page.close()
            lab.shutdown_kernels()


# ---------------------------------------------------------------------------------------------
# `make demo`: the memory explorer served by Voilà
# ---------------------------------------------------------------------------------------------
EXPLORER = ROOT / "demo" / "explorer.ipynb"


@contextlib.contextmanager
def _voila(tmp_path: Path, notebook: Path, *args: str, env_extra: dict | None = None):
    """Voilà serving one notebook (from its own folder) on a free localhost port, with
    isolated Jupyter dirs; yields its URL."""
    try:
        import voila as _  # noqa: F401
    except ImportError:
        _unavailable("voila is not installed (`.venv/bin/pip install -e '.[demo]'`)")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env.update(JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
               JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"),
               IPYTHONDIR=str(tmp_path / "ipython"), JUPYTER_PREFER_ENV_PATH="1",
               PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in os.environ.get(
                   "PYTHONPATH", "").split(os.pathsep) if p]), **(env_extra or {}))
    env.pop("MPLBACKEND", None)
    log_path = tmp_path / "voila.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "voila", notebook.name, "--no-browser",
                                 f"--port={port}", "--Voila.ip=127.0.0.1", *args],
                                cwd=notebook.parent, env=env, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + SERVER_START_S
            while True:
                try:  # any HTTP answer means it is up (a 403 for this path is fine)
                    urllib.request.urlopen(f"{url}/api/status", timeout=2).close()
                    break
                except urllib.error.HTTPError:
                    break
                except (urllib.error.URLError, ConnectionError, OSError):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("Voilà did not start:\n" + log_path.read_text(
                            errors="replace")[-3000:])
                    time.sleep(0.25)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture
def voila(tmp_path):
    """Voilà serving demo/explorer.ipynb (`make demo`); yields its URL."""
    with _voila(tmp_path, EXPLORER) as url:
        yield url


@pytest.mark.timeout(300)
def test_memory_explorer_records_and_plays(browser, voila):
    """Pick a model and the planned arena, record a step, move the player's slider: the
    picture changes, the planner's packing shows, and no error appears on the page."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page()
    page_errors: list[str] = []
    page.on("pageerror", lambda exc: page_errors.append(str(exc)))
    try:
        page.goto(voila, timeout=KERNEL_READY_MS)
        selects = page.locator(".widget-dropdown select")
        selects.first.wait_for(timeout=KERNEL_READY_MS)
        assert "import" not in page.locator("body").inner_text(), "Voilà shows code"
        selects.nth(0).select_option("residual block")
        selects.nth(1).select_option("planned arena")
        page.locator("button", has_text="record one step").click()
        slider = page.locator(".widget-slider").first
        slider.wait_for(timeout=RUN_ALL_MS)
        page.wait_for_function("() => /recorded: residual block, planned arena/"
                               ".test(document.body.innerText)", timeout=RUN_ALL_MS)
        body = page.locator("body").inner_text()
        assert not any(w in body for w in ("Traceback", "Error", "Exception")), body[-2000:]
        assert "planner's packing" in body
        _step_the_player(page, slider, "the explorer's player")
        assert not page_errors, f"JavaScript errors: {page_errors}"
    finally:
        try:
            page.screenshot(path=str(ARTIFACTS / "explorer.png"), full_page=True)
        finally:
            page.close()


# ---------------------------------------------------------------------------------------------
# `make lecture`: a notebook as reveal.js slides with live players (Voilà, demo/'s template)
# ---------------------------------------------------------------------------------------------
LECTURE_TEMPLATES = ROOT / "demo" / "share" / "jupyter"  # JUPYTER_PATH entry: microtorch-slides
SLIDE_ON_SCREEN_JS = f"(el) => !!({PRESENT_JS})() && ({PRESENT_JS})().contains(el)"


@pytest.mark.timeout(300)
def test_slideshow_runs_a_player(browser, tmp_path):
    """`make lecture`: Voilà runs notebook 00 and shows it as reveal.js slides (its slide
    metadata) through the microtorch-slides template. Page through it as a lecturer does
    (Space: next slide or fragment) until the first player's slide is on screen, then move its
    slider and press its "forward ▶" button: each time the step number and the picture change.
    The page asks nothing of the network (every request goes to the Voilà server)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    notebook = ROOT / "notebooks" / SLIDESHOW
    page = browser.new_page()
    page_errors: list[str] = []
    outside: list[str] = []
    page.on("pageerror", lambda exc: page_errors.append(str(exc)))
    with _voila(tmp_path, notebook, "--template=microtorch-slides",
                env_extra={"JUPYTER_PATH": str(LECTURE_TEMPLATES)}) as url:
        page.on("request", lambda r: None if r.url.startswith((url, "data:", "blob:"))
                else outside.append(r.url))
        try:
            page.goto(url, timeout=KERNEL_READY_MS)
            slider = page.locator(".reveal .slides .widget-slider").first
            try:  # Voilà shows the page once every cell has run
                page.wait_for_selector(".reveal.ready", state="attached", timeout=RUN_ALL_MS)
                slider.wait_for(state="attached", timeout=RUN_ALL_MS)
            except Exception:
                pytest.fail(f"{SLIDESHOW}: no slideshow with a player within "
                            f"{RUN_ALL_MS // 1000} s\nVoilà log:\n"
                            + (tmp_path / "voila.log").read_text(errors="replace")[-3000:])
            slides = page.locator(".reveal .slides section:not(.stack)").count()
            assert slides > 5, f"{SLIDESHOW}: {slides} slides; is the slide metadata there?"
            text = page.locator(".reveal .slides").text_content()
            assert "import numpy as np" not in text, "the slides show code (sources not stripped)"
            assert not any(w in text for w in ("Traceback", "Error displaying widget")), \
                text[-2000:]

            # Space through the deck (slides and fragments) until the player is on screen.
            for _ in range(4 * slides):
                if slider.evaluate(SLIDE_ON_SCREEN_JS) and slider.is_visible():
                    break
                before = page.url, page.evaluate(f"() => ({PRESENT_JS})()?.innerHTML.length")
                page.keyboard.press("Space")
                page.wait_for_function(  # the hash or the shown fragments changed
                    f"([u, n]) => location.href !== u || ({PRESENT_JS})()?.innerHTML.length !== n"
                    f" || !!document.querySelector('.reveal .current-fragment')",
                    arg=list(before), timeout=WIDGET_MS)
            else:
                pytest.fail(f"{SLIDESHOW}: paged through the slides without reaching the player")
            slider.scroll_into_view_if_needed()
            handle = slider.locator(".noUi-handle").first
            box = slider.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]")
            forward = box.locator("button", has_text="forward").first

            def arrow():
                handle.focus()
                page.keyboard.press("ArrowRight")

            first, second = _step_the_player(
                page, slider, f"{SLIDESHOW} as slides, the slider (ArrowRight on its handle)", arrow)
            assert int(float(second)) == int(float(first)) + 1, (first, second)
            third = _step_the_player(
                page, slider, f'{SLIDESHOW} as slides, the "forward ▶" button', forward.click)[1]
            assert int(float(third)) == int(float(second)) + 1, (second, third)
            assert slider.evaluate(SLIDE_ON_SCREEN_JS), "the player left the slide on screen"
            assert not page_errors, f"JavaScript errors: {page_errors}"
            assert not outside, f"the slides asked the network: {outside}"
        finally:
            try:
                page.screenshot(path=str(ARTIFACTS / "lecture-00_start_here.png"))
            finally:
                page.close()
