"""The error tree: every class has its own code and HTTP status, and the docstring draws it.

Hardening item 21: before, REST kept a separate code -> status map that missed config_error,
manifest_error and input_required (they became 500); now the status lives on the class.
"""

from __future__ import annotations

import pincer.core.errors as errors
from pincer.core.errors import PincerError, error_class, http_status
from pincer.gateway.rest import status_for


def _tree(cls: type[PincerError]) -> list[type[PincerError]]:
    found = [cls]
    for sub in cls.__subclasses__():
        found.extend(_tree(sub))
    return found


def test_every_error_class_has_a_unique_code_and_a_status_of_its_own() -> None:
    classes = _tree(PincerError)
    codes = [cls.code for cls in classes]
    assert len(codes) == len(set(codes)), codes
    for cls in classes:
        assert 400 <= cls.http_status <= 599, cls
        assert error_class(cls.code) is cls
        assert status_for({"code": cls.code}) == cls.http_status
        assert cls.__module__ == "pincer.core.errors", f"{cls.__name__} lives outside the one error tree"


def test_the_docstring_draws_every_class() -> None:
    doc = errors.__doc__ or ""
    for cls in _tree(PincerError):
        assert cls.__name__ in doc, f"{cls.__name__} is missing from the tree in core/errors.py"
        line = next(line for line in doc.splitlines() if f" {cls.__name__} " in f" {line.strip().lstrip('│├└─ ')} ")
        assert str(cls.http_status) in line, f"the tree's line for {cls.__name__} does not show {cls.http_status}"


def test_codes_that_fell_through_before() -> None:
    assert http_status("config_error") == 503
    assert http_status("manifest_error") == 422
    assert http_status("input_required") == 409
    assert http_status("approval_gone") == 410
    assert http_status("no-such-code") == 500
