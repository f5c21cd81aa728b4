"""The page's panels: each module declares the resources it listens to, app.js lists them all.

app.js routes each event to the panels whose `resources` meet the event's (the event
catalogue, `protocol.events.EVENTS`, through /protocol). A panel naming a resource the
catalogue does not have would never hear of a change; one app.js does not import would
never be drawn; one index.html does not preload would wait for its importer.
"""

from __future__ import annotations

import re
from importlib import resources

from commonroom.protocol.events import EVENTS, RESOURCES

_STATIC = resources.files("commonroom.gui").joinpath("static")
_PANEL = re.compile(r"^export const panel = \{(.*?)^\};", re.M | re.S)
_RESOURCES = re.compile(r"^\s*resources: \[([^\]]*)\]", re.M)
_IMPORT = re.compile(r'^import [^;]*? from "\./([\w-]+\.js)";', re.M)


def _scripts() -> dict[str, str]:
    return {f.name: f.read_text(encoding="utf-8") for f in _STATIC.iterdir() if f.name.endswith(".js")}


def _panels() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, text in _scripts().items():
        declared = _PANEL.search(text)
        if declared is None:
            continue
        listed = _RESOURCES.search(declared.group(1))
        assert listed is not None, f"{name}: its panel declares no resources"
        found[name] = re.findall(r'"([^"]+)"', listed.group(1))
    return found


def test_every_panel_listens_to_resources_of_the_event_catalogue() -> None:
    panels = _panels()
    assert len(panels) >= 10, panels
    touched = {resource for spec in EVENTS.values() for resource in spec.resources}
    for name, names in panels.items():
        assert names, f"{name}: no resources, so no event reaches it"
        assert set(names) <= set(RESOURCES), (name, sorted(set(names) - set(RESOURCES)))
        assert set(names) & touched, f"{name}: no event changes {names}"


def test_app_js_draws_every_panel_and_the_page_preloads_every_module() -> None:
    scripts = _scripts()
    app = scripts["app.js"]
    imported = set(_IMPORT.findall(app))
    assert set(_panels()) <= imported, sorted(set(_panels()) - imported)
    for name in _panels():
        assert re.search(rf"panel as (\w+) }} from \"\./{re.escape(name)}\"", app), name
    page = _STATIC.joinpath("index.html").read_text(encoding="utf-8")
    modules = {name for name, text in scripts.items() if re.search(r"^(import|export) ", text, re.M)}
    preloaded = set(re.findall(r'<link rel="modulepreload" href="/static/([\w-]+\.js)">', page))
    assert modules - {"app.js"} == preloaded, (sorted(modules - preloaded), sorted(preloaded - modules))
    assert '<script type="module" src="/static/app.js"></script>' in page
