"""What may name a tenant, and when two names are the same one (pure policy)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palimpsest.domain.tenant import InvalidTenantNameError, checked_tenant_name, tenant_name_key

_ASCII_NAMES = st.text(
    alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-_"), min_size=1, max_size=30
).filter(lambda s: any(c.isalpha() for c in s))
_INVISIBLE = st.sampled_from(list("\u200b\u200c\u200d\u2060\ufeff\u00ad\u202a\u202e\u2066"))
_CONTROLS = st.sampled_from(list("\u2067\u2068\u2069\u200e\u200f\u061c\x00\x1b\u2028"))
_CYRILLIC_LOOKALIKES = st.sampled_from(list("\u0430\u0435\u043e\u0440\u0441\u0443\u0445"))


def _fullwidth(name: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in name)


@given(_ASCII_NAMES)
def test_case_width_and_surrounding_space_do_not_make_another_name(name: str) -> None:
    key = tenant_name_key(name)
    assert tenant_name_key(name.upper()) == key
    assert tenant_name_key(_fullwidth(name)) == key
    assert tenant_name_key(f"  {name}\t") == key
    assert tenant_name_key(key) == key
    assert checked_tenant_name(name, 200) == name


@given(_ASCII_NAMES, _INVISIBLE | _CONTROLS, st.integers(min_value=0, max_value=30))
def test_an_invisible_or_bidi_character_anywhere_is_refused(
    name: str, hidden: str, at: int
) -> None:
    with pytest.raises(InvalidTenantNameError):
        checked_tenant_name(name[:at] + hidden + name[at:], 200)


@given(_ASCII_NAMES, _CYRILLIC_LOOKALIKES, st.integers(min_value=0, max_value=30))
def test_a_cyrillic_letter_among_latin_ones_is_refused(name: str, letter: str, at: int) -> None:
    with pytest.raises(InvalidTenantNameError):
        checked_tenant_name(name[:at] + letter + name[at:], 200)


@pytest.mark.parametrize(
    "name",
    ["default", "Équipe-2", "команда", "東京チーム", "서울팀", "ｄｅｆａｕｌｔ", "team 7"],  # noqa: RUF001
)
def test_names_in_one_script_or_a_language_s_own_mix_are_taken(name: str) -> None:
    assert checked_tenant_name(name, 200) == name


@pytest.mark.parametrize("name", ["", "   ", "x" * 201, "6f1c1c0e-34a2-4a07-9a55-04e1c1e3b0c4"])
def test_blank_long_and_uuid_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidTenantNameError):
        checked_tenant_name(name, 200)
