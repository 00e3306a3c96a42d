"""docs/acts.md's table and the tests that hold it agree: every (act, path) the table names has a
test that runs that path for real and counts the act's records, and no test claims a path the
table does not name. Also: the table's kinds and effects are the code's, and a config.toml edit
outside the policy sections is no act."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pincer.config import parse_config
from pincer.core.acts import ActKind, act_effect
from pincer.reload import POLICY_SECTIONS, policy_changes

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "acts.md"
PATHS = ("cli", "rest", "dashboard", "mcp", "gateway")

# (act, path) -> the tests that run it: "file::function".
CLI_ACTS = "tests/acts/test_cli_acts.py::test_each_cli_act_writes_one_record_naming_the_cli_user"
PEOPLE_ACTS = "tests/people/test_people_cli.py::test_each_people_act_writes_one_record_naming_the_cli_user_and_never_the_token"
PEOPLE_MANAGED = "tests/people/test_people_manage.py::test_an_admin_adds_sets_and_removes_people_as_the_cli_does_and_the_last_admin_stays"
OWN_TOKENS = "tests/people/test_dashboard_tokens.py::test_a_person_makes_lists_and_revokes_only_their_own_tokens_and_sees_the_value_once"
OWN_CREDENTIALS = "tests/people/test_dashboard_credentials.py::test_a_person_sets_and_removes_only_their_own_value_and_it_is_never_shown"
COVERED: dict[tuple[str, str], tuple[str, ...]] = {
    ("grant-add", "dashboard"): ("tests/gateway/ui/test_dashboard_http.py::test_grants_are_added_and_revoked_from_the_page_and_every_edit_is_audited",),
    ("grant-revoke", "dashboard"): ("tests/gateway/ui/test_dashboard_http.py::test_grants_are_added_and_revoked_from_the_page_and_every_edit_is_audited",),
    ("mcp-trust", "cli"): ("tests/acts/test_attacks.py::test_pincer_mcp_trust_yes_writes_one_audit_record_naming_the_cli_user",),
    ("mcp-trust", "dashboard"): ("tests/gateway/ui/test_dashboard_mcp.py::test_a_changed_definition_is_shown_with_its_diff_and_trusted_from_the_page",),
    ("mcp-add", "cli"): (CLI_ACTS,),
    ("mcp-remove", "cli"): (CLI_ACTS,),
    ("mcp-import", "cli"): (CLI_ACTS,),
    ("openapi-add", "cli"): (CLI_ACTS,),
    ("openapi-remove", "cli"): (CLI_ACTS,),
    ("tool-install", "cli"): (CLI_ACTS, "tests/acts/test_cli_acts.py::test_wasm_install_and_remove_each_write_one_record"),
    ("tool-remove", "cli"): (CLI_ACTS, "tests/acts/test_cli_acts.py::test_wasm_install_and_remove_each_write_one_record"),
    ("tool-build", "cli"): ("tests/builder/test_cli.py::test_build_then_list_show_and_edit_from_the_command_line",),
    ("tool-build", "rest"): ("tests/builder/test_rest.py::test_post_builds_streams_stages_then_the_report_and_the_tool_is_served",),
    ("tool-build", "mcp"): ("tests/builder/test_agent_tool.py::test_build_tool_asks_shows_the_plan_bounds_and_registers_the_tool_live",),
    ("hub-install", "cli"): ("tests/hub/test_lifecycle_cli.py::test_publish_search_install_update_rollback_pin_verify_remove",),
    ("hub-install", "mcp"): ("tests/acts/test_gateway_acts.py::test_an_mcp_client_installing_through_skills_install_is_one_record_naming_its_session",),
    ("skill-pull", "cli"): ("tests/gateway/test_skills_mcp.py::test_pincer_pulls_skills_from_an_mcp_server_and_verifies_every_file",),
    ("skill-approve", "cli"): (CLI_ACTS, "tests/gateway/test_skills_mcp.py::test_pincer_pulls_skills_from_an_mcp_server_and_verifies_every_file"),
    ("approval-answer", "cli"): ("tests/acts/test_cli_acts.py::test_answering_an_approval_from_the_cli_writes_one_record",
                                 "tests/cli/test_run_cli.py::test_run_streams_text_shows_tool_lines_asks_on_stdin_and_sums_up"),
    ("approval-answer", "rest"): ("tests/acts/test_gateway_acts.py::test_answering_an_approval_over_rest_writes_one_record_naming_the_session",),
    ("approval-answer", "dashboard"): ("tests/acts/test_gateway_acts.py::test_answering_an_approval_from_the_dashboard_writes_one_record_naming_the_sign_in",),
    ("approval-answer", "mcp"): ("tests/gateway/test_mcp_http.py::test_an_ask_goes_to_the_client_as_an_elicitation",),
    ("secret-set", "cli"): (CLI_ACTS,),
    ("secret-remove", "cli"): (CLI_ACTS,),
    ("secret-set", "dashboard"): (OWN_CREDENTIALS,),
    ("secret-remove", "dashboard"): (OWN_CREDENTIALS,),
    ("signer-trust", "cli"): (CLI_ACTS,),
    ("signer-forget", "cli"): (CLI_ACTS,),
    ("token-new", "cli"): (CLI_ACTS,),
    ("person-add", "cli"): (PEOPLE_ACTS,),
    ("person-remove", "cli"): (PEOPLE_ACTS,),
    ("person-roles", "cli"): (PEOPLE_ACTS,),
    ("person-token", "cli"): (PEOPLE_ACTS,),
    ("person-add", "rest"): (PEOPLE_MANAGED,),
    ("person-add", "dashboard"): (PEOPLE_MANAGED,),
    ("person-roles", "rest"): (PEOPLE_MANAGED,),
    ("person-roles", "dashboard"): (PEOPLE_MANAGED,),
    ("person-remove", "rest"): ("tests/people/test_people_manage.py::test_an_admin_removes_a_person_over_rest_and_their_token_stops",),
    ("person-remove", "dashboard"): (PEOPLE_MANAGED,),
    ("person-token", "dashboard"): (OWN_TOKENS,),
    ("config-reload", "gateway"): ("tests/acts/test_gateway_acts.py::test_a_config_reload_that_changes_policy_is_one_record_by_the_gateway",),
    ("call-cancelled", "cli"): ("tests/acts/test_attacks.py::test_a_cli_call_killed_while_it_waits_for_an_approval_is_recorded_once_as_cancelled",
                                "tests/acts/test_attacks.py::test_a_call_whose_approval_times_out_is_recorded_as_cancelled_naming_it"),
    ("call-cancelled", "rest"): ("tests/gateway/test_rest_hangup.py::test_a_rest_caller_that_hangs_up_expires_its_approval_and_cancels_its_call",),
    ("call-cancelled", "mcp"): ("tests/acts/test_cancelled_paths.py::test_an_mcp_client_that_goes_away_while_its_call_waits_leaves_one_cancelled_record",),
    ("call-cancelled", "gateway"): ("tests/acts/test_attacks.py::test_several_processes_finding_a_killed_caller_at_once_record_its_call_once",
                                    "tests/store/test_approvals_gone.py::test_several_gateways_finding_a_dead_caller_at_once_record_its_call_once"),
}  # fmt: skip


def _table() -> list[dict[str, str]]:
    """The rows of the acts table, by column: act, kind, effect and one cell per path."""
    text = PAGE.read_text()
    section = text.split("## The acts", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| `")]
    rows = []
    for line in lines:
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        assert len(cells) == 3 + len(PATHS), f"a row of docs/acts.md has {len(cells)} cells: {line}"
        act, kind, effect, *paths = cells
        rows.append({"act": act.strip("`"), "kind": kind, "effect": effect, **dict(zip(PATHS, paths, strict=True))})
    return rows


def test_every_path_the_table_names_is_tested_and_no_test_claims_one_it_does_not() -> None:
    rows = _table()
    assert len(rows) >= 20
    named = {(row["act"], path) for row in rows for path in PATHS if row[path] != "—"}
    assert named == set(COVERED), (
        f"in docs/acts.md without a test: {sorted(named - set(COVERED))}; "
        f"tested but not in the table: {sorted(set(COVERED) - named)}"
    )


def test_every_test_the_table_relies_on_exists() -> None:
    for tests in COVERED.values():
        for test in tests:
            path, _, function = test.partition("::")
            tree = ast.parse((ROOT / path).read_text())
            defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
            assert function in defined, f"{test} does not exist"


def test_the_tables_kinds_and_effects_are_the_codes() -> None:
    for row in _table():
        kind = row["kind"].split("·")[0].strip().strip("`")
        if kind == "call":
            assert row["effect"] == "the call's effects"
            continue
        assert kind in {k.value for k in ActKind}, row
        if kind != "approval":
            assert row["effect"] == f"`{act_effect(ActKind(kind)).value}`", row


def test_the_policy_sections_the_page_names_are_the_codes(tmp_path: Path) -> None:
    text = " ".join(PAGE.read_text().split())
    listed = text.split("the policy sections are ", 1)[1].split(" (`POLICY_SECTIONS`", 1)[0]
    assert re.findall(r"`(\w+)`", listed) == list(POLICY_SECTIONS)
    base = parse_config("[approvals]\ntimeout_s = 60\n", home=tmp_path)
    assert policy_changes(base, parse_config("[approvals]\ntimeout_s = 60\n[output]\nmax_bytes = 4096\n", home=tmp_path)) == []
    assert policy_changes(base, parse_config("[approvals]\ntimeout_s = 5\n", home=tmp_path)) == ["approvals"]
    granted = parse_config('[approvals]\ntimeout_s = 60\n[[grants]]\ntool = "http"\ndefault = "allow"\n', home=tmp_path)
    assert policy_changes(base, granted) == ["grants"]
