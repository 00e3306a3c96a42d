"""Who sees and answers what, by gateway session: the one copy of the rules REST and the
dashboard apply (``rest/approvals.py``, ``rest/audit.py``, ``rest/runs.py``, ``ui/``).

A main session sees everything; a non-main session sees only its own approval requests, runs
and audit records, and may not answer approvals (an agent must not approve its own calls).

A person's token (store/people.py) carries the person's roles (policy/roles.py), and then the
roles decide what it may change, whatever its session: answering an approval takes an approver
whose scope holds that approval (or an admin), editing grants, trusting definitions and building
tools takes an operator, managing people an admin. A configured token stays as it was: its
session's kind decides.
"""

from __future__ import annotations

from collections.abc import Iterable

from pincer.config import Config
from pincer.gateway.tokens import GatewaySession
from pincer.llm.run import RunRequest
from pincer.policy.roles import PersonAct
from pincer.policy.visibility import require_skills_visible
from pincer.store.approvals import ApprovalRequest
from pincer.store.runs import RunRow

__all__ = [
    "sees_approval", "approvals_seen", "can_answer_approvals", "ANSWER_FORBIDDEN_HINT", "may_read_audit_of", "audit_session_filter",
    "runs_session_filter", "tasks_session_filter", "sees_run", "may_answer", "may_operate", "OPERATE_FORBIDDEN_HINT", "may_manage_people",
    "rerun_request", "MANAGE_PEOPLE_FORBIDDEN_HINT",
]  # fmt: skip

ANSWER_FORBIDDEN_HINT = "answer with a main session's token, or with `pincer approvals`"
OPERATE_FORBIDDEN_HINT = "ask an admin for the operator role (`pincer people add NAME --role operator`)"
MANAGE_PEOPLE_FORBIDDEN_HINT = "ask an admin, or use `pincer people` on the gateway's machine"


def sees_approval(session: GatewaySession, approval: ApprovalRequest) -> bool:
    return session.is_main or approval.session == session.name


def approvals_seen(session: GatewaySession, requests: Iterable[ApprovalRequest]) -> list[ApprovalRequest]:
    return [r for r in requests if sees_approval(session, r)]


def can_answer_approvals(session: GatewaySession) -> bool:
    """Whether the session may answer approvals at all (a person: some of them, by role)."""
    if session.roles is not None:
        return session.roles.answers_any()
    return session.is_main


def may_answer(session: GatewaySession, approval: ApprovalRequest) -> bool:
    """Whether the session may answer this approval: a person's roles must hold it."""
    if session.roles is not None:
        return session.roles.may_answer(tool=approval.tool, effects=approval.effects, session=approval.session)
    return session.is_main


def may_operate(session: GatewaySession) -> bool:
    """Grants, trust of definitions, builds and installs: a main session, or a person who is an operator."""
    if session.roles is not None:
        return session.roles.may(PersonAct.OPERATE)
    return session.is_main


def may_manage_people(session: GatewaySession) -> bool:
    """People and their roles: a main session (the gateway's owner token), or a person who is an admin."""
    if session.roles is not None:
        return session.roles.may(PersonAct.MANAGE_PEOPLE)
    return session.is_main


def may_read_audit_of(session: GatewaySession, asked: str | None) -> bool:
    """Whether a reader may ask for the audit records of session ``asked`` (None: every one's)."""
    return session.is_main or asked in (None, "", session.name)


def audit_session_filter(session: GatewaySession, asked: str | None) -> str | None:
    """The session whose audit records a reader gets: what it asked for if main, else its own
    (after :func:`may_read_audit_of` said yes)."""
    return (asked or None) if session.is_main else session.name


def runs_session_filter(session: GatewaySession) -> str | None:
    """The session whose runs a reader lists (None: every session's)."""
    return None if session.is_main else session.name


def tasks_session_filter(session: GatewaySession) -> str | None:
    """The session whose tasks a reader lists (None: every session's): the rule of runs."""
    return runs_session_filter(session)


def sees_run(session: GatewaySession, row: RunRow) -> bool:
    return session.is_main or row.session == session.name


def rerun_request(config: Config, session: GatewaySession, row: RunRow, *, trigger: str) -> RunRequest:
    """A run's skill, parameters and message again (REST, the dashboard's Run again), under the
    session and for the person who asks now: the rerun is theirs, never the first run's person's,
    and may change policy only as they may."""
    if row.skill is not None:  # the one rule for skills (policy/visibility.py), as a new run
        require_skills_visible(config.session(session.name), session.name)
    return RunRequest(skill=row.skill, params=dict(row.params), message=row.message, session=session.name, trigger=trigger,
                      person=session.person, may_change_policy=may_operate(session))  # fmt: skip
