"""What issue 38 found on the dashboard, each read off the pages a person gets (plain HTTP against
a real ``pincer serve`` over a home seeded the way a user fills one: ``seeded.py``).

- no page prints Python's None/True/False, and none shows JSON outside a "raw" toggle;
- a run reads as a conversation: Markdown rendered (and sanitised), tool calls as cards with
  their arguments, result, decision, effects, duration and audit record, the system prompt folded;
- times are <time datetime> elements with a UTC fallback and an age;
- the overview counts refusals of every kind by reason, keeps the approval wait apart from the
  tool's time, prints integer counts and gives each decision one colour and a meaning;
- /favicon.ico answers without a token (no 401 warning per page load);
- audit, runs and approvals page and filter; grants are rows, and the form takes hosts;
- the canvas is in the menu; the skills page shows `pincer skills check`'s warnings;
- a tool's page lists its parameters instead of dumping its schema.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from tests.gateway.ui.conftest import WAIT_S, csrf_of, pincer_cli, sign_in
from tests.gateway.ui.seeded import APPROVAL_WAIT_S, BLOCKED_URL, ECHOED, Seeded


@pytest.fixture
def http(seeded: Seeded) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=seeded.url, trust_env=False, timeout=WAIT_S) as client:
        assert sign_in(client, seeded.token).status_code == 303
        yield client


class _Text(HTMLParser):
    """The text a person sees, leaving out what sits in a <details class="raw"> toggle (closed
    by default), <script>, <style> and <title> (an SVG tooltip, the tab's name), and attribute
    values."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._raw_depth = 0
        self._stack: list[bool] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "details":
            raw = "raw" in (dict(attrs).get("class") or "").split()
            self._stack.append(raw)
            self._raw_depth += raw
        elif tag in ("script", "style", "title"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "details" and self._stack:
            self._raw_depth -= self._stack.pop()
        elif tag in ("script", "style", "title"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._raw_depth and not self._skip:
            self.parts.append(data)


def visible_text(page: str) -> str:
    parser = _Text()
    parser.feed(page)
    return " ".join(" ".join(parser.parts).split())


def _pages(seeded: Seeded, http: httpx.Client) -> dict[str, str]:
    paths = ["/ui/", "/ui/approvals", "/ui/audit", "/ui/runs", f"/ui/runs/{seeded.done_run}",
             f"/ui/runs/{seeded.waiting_run}", "/ui/tools", "/ui/tools/browser", "/ui/tools/http", "/ui/grants",
             "/ui/skills", "/ui/mcp", "/ui/installed", "/ui/tasks"]  # fmt: skip
    records = json.loads(pincer_cli(seeded.server.home, "audit", "list", "--json").stdout)
    paths += [f"/ui/audit/{r['id']}" for r in records]
    pages = {}
    for path in paths:
        answer = http.get(path)
        assert answer.status_code == 200, (path, answer.status_code)
        pages[path] = answer.text
    return pages


def test_no_page_prints_python_literals_or_json_outside_a_raw_toggle(seeded: Seeded, http: httpx.Client) -> None:
    for path, page in _pages(seeded, http).items():
        text = visible_text(page)
        literals = [text[max(0, m.start() - 80) : m.end() + 40] for m in re.finditer(r"\b(None|True|False)\b", text)]
        assert not literals, (path, literals)
        assert not re.search(r'[{\[]\s*"[^"]*"\s*:', text), (path, "raw JSON outside a raw toggle", text[:3000])
        assert '{"' not in text and '": ' not in text, (path, text[:3000])


def test_a_run_reads_as_a_conversation(seeded: Seeded, http: httpx.Client) -> None:
    page = http.get(f"/ui/runs/{seeded.done_run}").text
    # The system prompt is folded; the user's and the model's words are Markdown, rendered.
    assert re.search(r'<details class="fold message role-system"[^>]*>\s*<summary>System prompt', page)
    assert "<strong>echo</strong>" in page  # "Let me **echo** that."
    assert "<h4>Done</h4>" in page and "<li><strong>once</strong>, with <code>echo</code></li>" in page
    assert '<a href="https://example.com/docs" rel="nofollow noopener noreferrer">the docs</a>' in page
    # The tool call is a card: its arguments and result as values, decision, effects, duration, record.
    card = page.split('class="card accent tool-call', 1)[1].split("</article>", 1)[0]
    audit_id = re.search(r'href="/ui/audit/(\d+)">audit record \1</a>', card)
    assert audit_id, card
    record = http.get(f"/ui/audit/{audit_id.group(1)}").text
    assert "<code>echo</code>" in record and f"{seeded.done_run}</a>" in record
    card_text = visible_text(card)
    assert "Tool call echo" in card_text and "allow" in card_text and "ok" in card_text
    assert re.search(r"took \d+(\.\d)? ms", card_text), card_text
    assert "Effects none" in card_text and f"Arguments text {ECHOED}" in card_text and f"Result text {ECHOED}" in card_text
    assert "Cancel" not in visible_text(page)  # a finished run cannot be cancelled


def test_the_message_of_a_model_is_sanitised(seeded: Seeded, http: httpx.Client) -> None:
    page = http.get(f"/ui/runs/{seeded.done_run}").text
    # Whatever the model writes, no tag of its own reaches the page (the Markdown test has the rest).
    assert "<script" not in page.split("<body>", 1)[1].replace('<script src="/ui/static/', "")


def test_a_waiting_run_says_it_waits_and_carries_its_approval(seeded: Seeded, http: httpx.Client) -> None:
    page = http.get(f"/ui/runs/{seeded.waiting_run}").text
    text = visible_text(page)
    assert re.search(rf"This run waits for a person: approval {seeded.waiting_approval} \( ?write_file ?\)", text), text
    assert f'href="#approval-{seeded.waiting_approval}"' in page and f'id="approval-{seeded.waiting_approval}"' in page
    card = page.split(f'id="approval-{seeded.waiting_approval}"', 1)[1].split("</article>", 1)[0]
    assert ">Allow once</button>" in card and ">Deny</button>" in card
    assert f'name="next" value="/ui/runs/{seeded.waiting_run}"' in card
    assert ">Cancel run</button>" in page
    # The live fragment carries Cancel too, so it leaves the page when the run ends.
    fragment = http.get(f"/ui/runs/{seeded.waiting_run}", headers={"HX-Request": "true"}).text
    assert ">Cancel run</button>" in fragment and "<html" not in fragment


def test_times_are_time_elements_in_utc_with_an_age(seeded: Seeded, http: httpx.Client) -> None:
    page = http.get("/ui/audit/1").text
    found = re.search(r'<time datetime="(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)" class="when">(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC</time>'
                      r' <small class="age">([^<]+)</small>', page)  # fmt: skip
    assert found, page
    assert found.group(1).replace("T", " ").rstrip("Z") == found.group(2)
    assert re.fullmatch(r"\d+ (s|min|h) ago|just now", found.group(3)), found.group(3)
    assert not re.search(r"\b1[0-9]{9}\.[0-9]+\b", visible_text(page))  # no Unix time


def test_the_overview_counts_every_kind_of_refusal_by_reason(seeded: Seeded, http: httpx.Client) -> None:
    text = visible_text(http.get("/ui/").text)
    refusals = text.split("Refusals in the last day", 1)[1]
    assert "policy denial 1" in refusals and "egress refusal 1" in refusals and "approval timed out 1" in refusals
    assert f"{BLOCKED_URL} refused" in refusals and "exec denied" in refusals and "nobody answered" in refusals
    assert "3 refused in the last day" in text


def test_the_overview_prints_integer_counts(seeded: Seeded, http: httpx.Client) -> None:
    page = http.get("/ui/").text
    for section in ("Busiest tools", "Runs by status", "Refusals in the last day"):
        part = visible_text(page.split(section, 1)[1].split("<h2", 1)[0])
        assert not re.search(r"\b\d+\.0\b", part), (section, part)
    assert "echo 4" in visible_text(page)


def test_the_approval_wait_is_kept_apart_from_the_tools_time(seeded: Seeded, http: httpx.Client) -> None:
    records = json.loads(pincer_cli(seeded.server.home, "audit", "list", "--json").stdout)
    asked = next(r for r in records if r["tool"] == "write_file" and r["kind"] == "call" and r["outcome"] == "ok")
    wait = asked["usage"]["approval_wait_ms"]
    assert wait >= APPROVAL_WAIT_S * 1000 * 0.9 and asked["duration_ms"] >= wait
    timed_out = next(r for r in records if r["error_code"] == "approval_timeout")
    assert timed_out["usage"]["approval_wait_ms"] >= 400  # the 0.5 s it waited before the request expired
    assert "approval_wait_ms" not in next(r for r in records if r["tool"] == "echo")["usage"]  # nobody was asked
    page = http.get("/ui/").text
    slowest = page.split('id="slowest"', 1)[1].split("</section>", 1)[0]
    shown = re.search(r">write_file</th>.*?<td class=\"value\">([^<]+)</td>", slowest, re.DOTALL)
    assert shown, slowest
    p95_text = shown.group(1).split(" / ")[1]
    assert p95_text.endswith(" ms"), p95_text  # the tool's own time: not the seconds a person took
    waited = page.split('id="waited"', 1)[1].split("</section>", 1)[0]
    assert ">write_file</th>" in waited and " s</td>" in waited
    record = visible_text(http.get(f"/ui/audit/{asked['id']}").text)
    assert re.search(r"Took [\d.]+ ms, after [\d.]+ s waiting for a person", record), record


def test_one_colour_per_decision_with_a_legend_that_says_what_each_means(seeded: Seeded, http: httpx.Client) -> None:
    assert pincer_cli(seeded.server.home, "tools", "call", "no_such_tool", "--args", "{}").returncode != 0
    overview = http.get("/ui/").text
    audit = http.get("/ui/audit").text
    for decision in ("allow", "deny", "none"):
        assert f'<rect class="d-{decision}"' in overview and f'<span class="swatch d-{decision}">' in overview
        assert f'<span class="badge d-{decision}"' in audit
    legend = visible_text(overview.split('<ul class="legend">', 1)[1].split("</ul>", 1)[0])
    assert "none 1 — no decision was reached" in legend, legend
    css = http.get("/ui/static/dashboard.css").text
    for decision in ("allow", "ask", "deny", "none"):
        colours = set(re.findall(rf"--{decision}: (#[0-9a-f]{{6}})", css))
        assert len(colours) == 1, (decision, colours)
        assert f"svg rect.d-{decision}, .swatch.d-{decision} {{ fill: var(--{decision}); background: var(--{decision}); }}" in css
    assert ".s0" not in css  # no colour handed out by a series' position


def test_the_favicon_is_served_without_a_token_and_logs_no_refusal(seeded: Seeded) -> None:
    with httpx.Client(base_url=seeded.url, trust_env=False, timeout=WAIT_S) as anonymous:
        icon = anonymous.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/x-icon"
    assert icon.content[:4] == b"\x00\x00\x01\x00"  # an ICO file
    logged = list(seeded.server.stderr_lines.queue)
    assert not [line for line in logged if "favicon" in line], logged


def test_audit_pages(seeded: Seeded, http: httpx.Client) -> None:
    total = len(json.loads(pincer_cli(seeded.server.home, "audit", "list", "--json").stdout))
    assert total > 6
    seen: list[str] = []
    url: str | None = "/ui/audit?per=3"
    while url:
        page = http.get(url).text
        ids = re.findall(r'<td data-label="Record"><a href="/ui/audit/(\d+)">', page)
        assert 0 < len(ids) <= 3, (url, ids)
        seen += ids
        older = re.search(r'<a class="button" href="([^"]+)" rel="next">Older</a>', page)
        url = older.group(1).replace("&amp;", "&") if older else None
    assert len(seen) >= total and seen == sorted(set(seen), key=int, reverse=True)
    first = http.get("/ui/audit", params={"tool": "echo", "per": "2"}).text
    older = re.search(r'<a class="button" href="([^"]+)" rel="next">Older</a>', first)
    assert older and "before=" in older.group(1) and "tool=echo" in older.group(1)
    filtered = http.get(older.group(1).replace("&amp;", "&")).text
    assert '<a class="button" href="/ui/audit?tool=echo&amp;per=2" rel="prev">Newest</a>' in filtered
    assert not re.search(r"<code>(?!echo)[a-z_]+</code></td>", filtered)


def test_runs_and_approvals_filter_and_page(seeded: Seeded, http: httpx.Client) -> None:
    done = http.get("/ui/runs", params={"status": "done"}).text
    assert f'href="/ui/runs/{seeded.done_run}"' in done and f'href="/ui/runs/{seeded.waiting_run}"' not in done
    first = http.get("/ui/runs", params={"per": "1"}).text
    older = re.search(r'<a class="button" href="([^"]+)" rel="next">Older</a>', first)
    assert older and f'href="/ui/runs/{seeded.waiting_run}"' in first
    second = http.get(older.group(1).replace("&amp;", "&")).text
    assert f'href="/ui/runs/{seeded.done_run}"' in second and f'href="/ui/runs/{seeded.waiting_run}"' not in second
    expired = http.get("/ui/approvals", params={"status": "expired"}).text
    answered = expired.split("Answered and expired", 1)[1]
    assert answered.count('class="card accent approval') == 1 and "status-expired" in answered
    allowed = http.get("/ui/approvals", params={"status": "allow_once"}).text.split("Answered and expired", 1)[1]
    assert "status-allow_once" in allowed and "status-expired" not in allowed
    assert "No answered request matches." in http.get("/ui/approvals", params={"tool": "echo"}).text


def test_grants_are_readable_rows_and_the_form_takes_hosts(seeded: Seeded, http: httpx.Client) -> None:
    page = http.get("/ui/grants").text
    text = visible_text(page)
    assert "network: allow" in text and "Hosts api.example.com" in text and "null" not in text
    assert 'name="hosts"' in page
    bad = http.post("/ui/grants", data={"tool": "http", "mode": "allow", "effects": ["network"], "hosts": "not a host!",
                                       "csrf_token": csrf_of(page)})  # fmt: skip
    assert bad.status_code == 400 and "hosts: 'not a host!' is not a host pattern" in html.unescape(bad.text)
    assert 'value="not a host!"' in bad.text  # the form comes back as it was sent
    added = http.post("/ui/grants", data={"tool": "http", "mode": "allow", "effects": ["network"],
                                         "hosts": "docs.example.com, *.docs.example.org", "hours": "8",
                                         "csrf_token": csrf_of(page)})  # fmt: skip
    assert added.status_code == 303
    listed = http.get("/ui/grants").text
    row = listed.split('id="grant-', 2)[-1] if "docs.example.com" in listed else ""
    assert "Hosts docs.example.com, *.docs.example.org" in visible_text(listed), visible_text(listed)
    assert "in 7 h" in visible_text(row) or "in 8 h" in visible_text(row)
    policy = json.loads(pincer_cli(seeded.server.home, "policy", "show", "--json").stdout)  # another process reads it
    assert any(g["hosts"] == ["docs.example.com", "*.docs.example.org"] for g in policy["grants"]), policy["grants"]


def test_the_canvas_is_in_the_menu(seeded: Seeded, http: httpx.Client) -> None:
    nav = http.get("/ui/").text.split('<nav aria-label="Dashboard">', 1)[1].split("</nav>", 1)[0]
    assert '<a href="/ui/canvas/main">Canvas</a>' in nav
    assert http.get("/ui/canvas/main").status_code == 200


def test_the_skills_page_shows_what_skills_check_warns_of(seeded: Seeded, http: httpx.Client) -> None:
    checked = pincer_cli(seeded.server.home, "skills", "check", "--json")
    warned = {s["name"]: [w["message"] for w in s["warnings"]] for s in json.loads(checked.stdout)["skills"]}
    assert warned["weekly-report"], warned
    row = http.get("/ui/skills").text.split('id="skill-weekly-report"', 1)[1].split("</tr>", 1)[0]
    for message in warned["weekly-report"]:
        assert message.replace("'", "&#39;") in row, (message, row)


def test_a_tool_page_lists_its_parameters_and_folds_its_schema(seeded: Seeded, http: httpx.Client) -> None:
    page = http.get("/ui/tools/browser").text
    params = page.split('<table class="table rows params">', 1)[1].split("</table>", 1)[0]
    assert "<code>action</code>" in params and "required" in params and "one of status, start" in params
    assert '<details class="raw"><summary>raw input schema</summary>' in page
    outside = page.split('<details class="raw"><summary>raw input schema</summary>', 1)
    assert "&#34;properties&#34;" not in outside[0] + outside[1].split("</details>", 1)[1]  # JSON only in the toggle


def test_the_grants_page_of_a_fresh_home_needs_no_json(pincer_home: Path) -> None:
    """The grants form's hosts round-trip without a seeded home: a grant for a loopback port."""
    from tests.gateway.conftest import pincer_serve
    from tests.gateway.ui.conftest import dashboard_config

    (pincer_home / "config.toml").write_text(dashboard_config())
    with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as http:
        sign_in(http, server.token)
        page = http.get("/ui/grants").text
        added = http.post("/ui/grants", data={"tool": "http", "mode": "allow", "effects": ["network"],
                                             "hosts": "127.0.0.1:8080", "csrf_token": csrf_of(page)})  # fmt: skip
        assert added.status_code == 303
        text = visible_text(http.get("/ui/grants").text)
        assert "Hosts 127.0.0.1:8080" in text and "Expires never" in text


def test_a_non_main_overview_shows_its_labels_whole(pincer_home: Path) -> None:
    from tests.gateway.conftest import pincer_serve
    from tests.gateway.ui.conftest import AGENT_TOKEN, dashboard_config

    grant = '\n[[grants]]\ntool = "write_file"\ndefault = "deny"\nsessions = ["agent"]\n'
    (pincer_home / "config.toml").write_text(dashboard_config() + grant)
    with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as http:
        agent = {"Authorization": f"Bearer {AGENT_TOKEN}"}
        refused = http.post("/api/v1/tools/write_file/call", headers=agent, json={"args": {"path": "x.txt", "content": "x"}})
        assert refused.status_code == 403, refused.text
        reason = json.loads(pincer_cli(pincer_home, "audit", "list", "--json").stdout)[-1]["reason"]
        assert len(reason) > 40, reason  # longer than the old chart's label could hold
        sign_in(http, AGENT_TOKEN)
        text = visible_text(http.get("/ui/").text)
        assert reason in text, (reason, text)  # whole: no label is cut
