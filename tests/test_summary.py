"""The arguments a confirmation question shows: every name, whatever the caller sends, in a
bounded message that nothing in a value can hide text in."""

from __future__ import annotations

from typing import Any

import pytest

from fastapi_mcp_routes.server.confirmation.summary import MAX_SUMMARY, shorten, summarize, visible


def test_padding_cannot_push_an_argument_out_of_view() -> None:
    padded = {"body": " " * 600 + "see title", "title": "DROP EVERYTHING"}
    summary = summarize(padded)
    assert summary == 'body="⟨600 blanks⟩see title", title="DROP EVERYTHING"'


def test_the_callers_order_of_arguments_changes_nothing() -> None:
    first = {"body": "x" * 5000, "title": "DROP EVERYTHING"}
    second = {"title": "DROP EVERYTHING", "body": "x" * 5000}
    assert summarize(first) == summarize(second)
    assert 'title="DROP EVERYTHING"' in (summarize(first) or "")


def test_a_long_value_is_elided_in_its_middle_with_its_length() -> None:
    summary = summarize({"body": "abc" + "-" * 594 + "xyz"}) or ""
    assert summary.startswith('body="abc---')
    assert summary.endswith('---xyz" (600 chars)')
    assert "…" in summary
    assert len(summary) < 120


def test_a_value_cannot_close_its_own_quotes_and_pass_for_another_argument() -> None:
    summary = summarize({"body": 'fine", title="harmless'})
    assert summary == 'body="fine\\", title=\\"harmless"'


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a\u202eb", "a\\u202eb"),  # right-to-left override
        ("a\u200bb", "a\\u200bb"),  # zero-width space
        ("a\u00a0b", "a\\u00a0b"),  # no-break space
        ("a\nb\tc\rd", "a\\nb\\tc\\rd"),
        ("a\x1bb", "a\\u001bb"),  # escape
        ("a\U000e0041b", "a\\U000e0041b"),  # a tag character
        ("a\\b", "a\\\\b"),
        ("a   b", "a   b"),  # three blanks are shown as they are
        ("a \n\t b", "a⟨4 blanks⟩b"),  # more, whatever they are, are one marker
        ("é ü 中文", "é ü 中文"),  # letters of any script are themselves
    ],
)
def test_what_prints_as_nothing_or_moves_text_is_shown_as_an_escape(text: str, shown: str) -> None:
    assert visible(text) == shown


def test_nested_values_are_summarised_to_a_bounded_depth_and_size() -> None:
    deep: Any = "bottom"
    for _ in range(50):
        deep = {"next": deep}
    wide = {f"key{i:03}": i for i in range(100)}
    summary = summarize({"deep": deep, "items": list(range(1000)), "wide": wide}) or ""
    assert "bottom" not in summary
    assert "deep={next={next={next={…1 key}}}}" in summary
    assert "items=[0, 1, 2, 3, 4, 5, 6, 7, …992 more]" in summary
    assert "wide={key000=0, key001=1," in summary
    assert "…92 more}" in summary


def test_nested_keys_are_shown_like_values() -> None:
    summary = summarize({"body": {"x" * 500: 1, "title\u202e": 2}}) or ""
    assert '"xxxxx' in summary
    assert "(500 chars)=1" in summary
    assert '"title\\u202e"=2' in summary


def test_many_arguments_are_all_named_within_the_bound() -> None:
    arguments = {f"field{i}": "x" * 300 for i in range(60)}
    summary = summarize(arguments) or ""
    assert len(summary) <= MAX_SUMMARY
    for name in arguments:
        assert f"{name}=" in summary


def test_arguments_too_many_to_name_within_the_bound_have_no_summary() -> None:
    assert summarize({f"field{i}": "x" * 300 for i in range(2000)}) is None


@pytest.mark.parametrize(
    "arguments",
    [
        {"a": {"b": [{"c": {"d": ["e" * 1000] * 50}}] * 50}},
        {f"k{i}": {f"n{j}": "v" * 200 for j in range(30)} for i in range(10)},
        {"x": [[[[[1] * 20] * 20] * 20] * 20]},
    ],
)
def test_a_summary_never_exceeds_the_bound(arguments: dict[str, Any]) -> None:
    summary = summarize(arguments)
    assert summary is not None
    assert len(summary) <= MAX_SUMMARY
    assert all(f"{name}=" in summary for name in arguments)


def test_scalars_are_json_and_huge_numbers_are_elided() -> None:
    assert summarize({"b": True, "f": 1.5, "n": None, "i": 42}) == "b=true, f=1.5, i=42, n=null"
    huge = summarize({"i": 10**500}) or ""
    assert huge.endswith("(501 chars)")
    assert len(huge) < 120


def test_no_arguments_say_so() -> None:
    assert summarize({}) == "no arguments"


def test_shorten_keeps_short_text_whole() -> None:
    assert shorten("/notes/7", 120) == "/notes/7"
    assert shorten("/notes/" + "a" * 300, 20).endswith("(307 chars)")
