"""``[auth.oidc.NAME]`` as config.toml gives it: the rules' roles are checked when the file is
read, and they map a verified email and groups to roles (every match adds its roles)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pincer.config import parse_config
from pincer.core.errors import ConfigError

BASE = '[auth.oidc.corp]\nissuer = "https://id.example.test"\nclient_id = "pincer"\n'


def test_rules_give_the_roles_of_every_match(tmp_path: Path) -> None:
    text = BASE + ('group_roles = { ops = ["operator"], approvers = ["approver:tool=github_*"] }\n'
                   'domain_roles = { "Example.test" = ["viewer"] }\nemail_roles = { "boss@example.test" = ["admin", "viewer"] }\n')  # fmt: skip
    provider = parse_config(text, home=tmp_path).auth.oidc["corp"]
    assert provider.roles_for(email="ann@example.test", groups=["approvers", "ops"]) == ["approver:tool=github_*", "operator", "viewer"]
    assert provider.roles_for(email="boss@example.test", groups=[]) == ["viewer", "admin"]
    assert provider.roles_for(email="eve@elsewhere.test", groups=["others"]) == []
    assert parse_config("", home=tmp_path).auth.token_sign_in is True


@pytest.mark.parametrize(
    ("rules", "said"),
    [('group_roles = { ops = ["owner"] }', "unknown role"), ('domain_roles = { "x.test" = [] }', "no role"),
     ('email_roles = { "a@x.test" = ["viewer:tool=x"] }', "takes no scope")],
)  # fmt: skip
def test_a_rule_naming_no_real_role_is_refused_when_the_file_is_read(tmp_path: Path, rules: str, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        parse_config(BASE + rules + "\n", home=tmp_path)
    with pytest.raises(ConfigError, match="issuer"):
        parse_config('[auth.oidc.corp]\nissuer = "ftp://x"\nclient_id = "pincer"\n', home=tmp_path)


GITHUB = '[auth.oidc.gh]\nkind = "github"\nclient_id = "Iv1.x"\nclient_secret_name = "gh"\n'


def test_a_github_provider_has_its_own_keys_and_rules(tmp_path: Path) -> None:
    provider = parse_config(GITHUB + 'group_roles = { "org:acme" = ["viewer"], "team:acme/ops.team_1" = ["operator"] }\n', home=tmp_path).auth.oidc["gh"]
    assert provider.kind == "github" and provider.scope_list() == ("read:user", "user:email", "read:org")
    assert parse_config(BASE, home=tmp_path).auth.oidc["corp"].scope_list() == ("openid", "email", "profile")


@pytest.mark.parametrize(
    ("text", "said"),
    [(GITHUB + 'group_roles = { acme = ["viewer"] }\n', "neither org:ORG nor team:ORG/TEAM-SLUG"),
     (GITHUB + 'issuer = "https://github.com"\n', "takes no issuer"),
     ('[auth.oidc.gh]\nkind = "github"\nclient_id = "Iv1.x"\n', "needs client_secret_name"),
     ('[auth.oidc.corp]\nclient_id = "pincer"\n', "needs issuer"),
     (GITHUB.replace('"github"', '"saml"'), "kind")],
)  # fmt: skip
def test_a_provider_with_the_wrong_keys_for_its_kind_is_refused(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        parse_config(text, home=tmp_path)
