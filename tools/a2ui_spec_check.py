"""Give every test case and example of the A2UI specification pincer's verdict, by hand.

The v0.9 test cases (``specification/v0_9/test/cases``), the v0.8 examples and v0.8's minimal
catalog ship in no package (the v0.9 examples do, and tests/canvas/test_a2ui_spec.py checks
those in every test run): they live only in the A2UI project's repository, and nothing from it
is committed here. With a checkout of that repository at hand:

    .venv/bin/python tools/a2ui_spec_check.py --spec PATH/TO/A2UI/specification

prints each verdict that differs from the specification's and exits 1 if any does. A case runs
the way the specification's own runner (``run_tests.py``, ajv with formats) runs it: a
``server_to_client.json`` case is one message of a surface on the basic catalog; a
``client_to_server.json`` case is a message a person's action sends back.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pincer.canvas.a2ui import V09, check_client_message, parse_messages
from pincer.canvas.catalogs import BASIC_V09, CatalogSet, load_catalog
from pincer.core.errors import A2uiInvalid


def _verdict(messages: Any, catalogs: CatalogSet | None = None, prior: Any = None) -> str | None:
    """None when pincer accepts the batch, else why not."""
    try:
        parse_messages(messages, catalogs=catalogs, prior=prior)
    except A2uiInvalid as exc:
        return exc.message
    return None


def _messages(path: Path) -> list[Any]:
    loaded = json.loads(path.read_text(encoding="utf-8"))
    return list(loaded["messages"] if isinstance(loaded, dict) else loaded)


def v09_test_cases(spec: Path) -> tuple[int, list[str]]:
    """(cases judged, the ones whose verdict differs from the specification's)."""
    cases = spec / "v0_9" / "test" / "cases"
    wrong, count = [], 0
    # A case's message stands alone: an update is of a surface the basic catalog drew.
    basic = {"version": V09, "createSurface": {"surfaceId": "", "catalogId": BASIC_V09}}
    for suite_path in sorted(cases.glob("*.json")):
        suite = json.loads(suite_path.read_text(encoding="utf-8"))
        for case in suite["tests"]:
            count += 1
            data = case["data"]
            if suite.get("schema") == "client_to_server.json":
                try:
                    check_client_message(data)
                    accepted = True
                except A2uiInvalid:
                    accepted = False
            else:
                surface = next((v.get("surfaceId") for v in data.values() if isinstance(v, dict)), None)
                known = {surface: [basic]} if isinstance(surface, str) and "createSurface" not in data else None
                accepted = _verdict([data], prior=known) is None
            if accepted != case["valid"]:
                wrong.append(f"{suite_path.name}: {case['description']} (the specification says valid={case['valid']})")
    contact = cases / "contact_form_example.jsonl"
    if contact.is_file():
        for line in contact.read_text(encoding="utf-8").splitlines():
            if line.strip():
                count += 1
                if (why := _verdict([json.loads(line)])) is not None:
                    wrong.append(f"contact_form_example.jsonl: {line[:60]}... refused: {why}")
    return count, wrong


def v08_examples(spec: Path) -> tuple[int, list[str]]:
    """v0.8's basic examples use the standard catalog; its minimal ones name v0.8's minimal
    catalog, registered from the specification's file as ``[gateway] a2ui_catalogs`` does."""
    catalogs_dir = spec / "v0_8" / "json" / "catalogs"
    minimal = catalogs_dir / "minimal" / "minimal_catalog.json"
    catalogs = CatalogSet([load_catalog(minimal.read_bytes(), str(minimal))])
    files = sorted(catalogs_dir.glob("*/examples/*.json"))
    wrong = [
        f"{f.parent.parent.name}/{f.name}: refused: {why}"
        for f in files
        if (why := _verdict(_messages(f), catalogs)) is not None
    ]
    return len(files), wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", type=Path, required=True, help="the specification folder of a checkout of the A2UI repository")
    args = parser.parse_args(argv)
    if not (args.spec / "v0_9").is_dir() or not (args.spec / "v0_8").is_dir():
        print(f"{args.spec} has no v0_8 and v0_9 folders: give the specification folder of the A2UI repository", file=sys.stderr)
        return 2
    failed = False
    for name, check in (("v0.9 test cases", v09_test_cases), ("v0.8 examples", v08_examples)):
        count, wrong = check(args.spec)
        print(f"{name}: {count} judged, {len(wrong)} not as the specification says")
        for line in wrong:
            print(f"  {line}")
        failed = failed or bool(wrong) or count == 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
